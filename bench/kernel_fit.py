"""Which kernels of the M=1 decode step can share an SM, read from the compiled module (issue 48).

PDL lets an op's CTAs start, and issue the loads they may issue before their wait, while the op
before still runs, but only if they fit on an SM beside that op's CTAs. This tool takes each
kernel's registers, shared memory and spills from ptxas (sm_90, the module's own flags), the
shapes of the qwen35-0.8b M=1 step (grid, threads, dynamic shared memory, as plan_pass in
native/cuda/forward.cu makes them) and the limits of an sm_90 SM, and says which consecutive ops
cannot be resident together. It also lists the global loads that a kernel's PTX issues before
its first griddepcontrol.wait: only immutable data may be read there, and, from the SASS
(nvdisasm), the immutable loads that ptxas kept ahead of the wait (ACQBULK): the weight loads
that are to overlap the op before.

    python3 bench/kernel_fit.py            # the step's op pairs and the uniform chain's contract
    python3 bench/kernel_fit.py --timeline # and where the timeline build's kernels fit otherwise

Runs with nvcc alone (no GPU); tests/test_kernel_fit.py runs the same checks.
"""
from __future__ import annotations

import argparse
import functools
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CUDA_DIR = REPO / "native" / "cuda"

# An sm_90 SM (CUDA programming guide, compute capability 9.0).
SM_REGISTERS = 65536
SM_THREADS = 2048
SM_CTAS = 32
SM_SHARED = 228 * 1024        # the largest carve-out
CTA_RESERVED_SHARED = 1024    # the runtime's own shared memory a CTA
REGISTER_UNIT = 8             # registers a thread are allocated in steps of 8 (256 a warp)
SMS = 132                     # multiprocessors of an H200

# The uniform M=1 chain of issue 48 (docs/PERFORMANCE.md): one CTA an SM, and three consecutive
# ops fit on one SM.
CHAIN_THREADS = 288
CHAIN_MAX_REGISTERS = 72
CHAIN_MAX_DYNAMIC_SHARED = 72 * 1024


@dataclass(frozen=True)
class Resources:
    registers: int
    static_shared: int
    spill_bytes: int
    stack_bytes: int


@dataclass(frozen=True)
class Op:
    name: str           # what the op does in the step
    kernel: str         # demangled kernel name, as ptxas reports it
    grid: int           # CTAs
    threads: int        # threads a CTA
    dynamic_shared: int = 0


def module_flags() -> list[str]:
    """The module's numeric flags, from its CMakeLists.txt."""
    cmake = (CUDA_DIR / "CMakeLists.txt").read_text()
    return re.search(r"set\(KITE_CUDA_FLAGS ([^)]*)\)", cmake).group(1).split()


def demangle(sym: str) -> str:
    """_Z6k_gemvILi1ELi4ELb0EEv8GemvArgs -> k_gemv<1, 4, false>; _Z10k_actq7ActArgs -> k_actq."""
    m = re.match(r"_Z(\d+)(\w+)", sym)
    if not m:
        return sym
    n = int(m.group(1))
    base, rest = m.group(2)[:n], m.group(2)[n:]
    args = re.match(r"I((?:L[ib]-?\d+E)+)E", rest)
    if not args:
        return base
    values = [("false", "true")[int(v)] if kind == "b" else v for kind, v in re.findall(r"L([ib])(-?\d+)E", args.group(1))]
    return base + "<" + ", ".join(values) + ">"


def parse_ptxas(text: str) -> dict[str, Resources]:
    """{kernel: Resources} from the output of `ptxas -v` (entry functions only)."""
    out: dict[str, Resources] = {}
    name, frame, spill = None, 0, 0
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name, frame, spill = demangle(m.group(1)), 0, 0
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            frame, spill = int(m.group(1)), int(m.group(2)) + int(m.group(3))
            continue
        m = re.search(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?", line)
        if m and name:
            out[name] = Resources(int(m.group(1)), int(m.group(2) or 0), spill, frame)
            name = None
    return out


MODULE_KERNEL_SOURCES = ("matvec.cu", "deltanet.cu", "activation.cu", "attention.cu")
# The timeline build's define (native/cuda/CMakeLists.txt, KITE_CUDA_TIMELINE=ON): its kernels
# record times, and their registers, so which of them share an SM, may differ from the shipped ones.
TIMELINE_DEFINES = ("KC_TIMELINE=1",)


@functools.cache
def ptx_text(src: str, defines: tuple[str, ...] = ()) -> str:
    """The PTX of one module source (nvcc -ptx, sm_90, the module's flags, and -D defines)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.ptx"
        proc = subprocess.run(
            ["nvcc", "-O3", "-std=c++17", "-ptx", "-arch=sm_90", "-DKCUDA_BUILD", *module_flags(),
             *(f"-D{d}" for d in defines), f"-I{REPO / 'native' / 'include'}", str(CUDA_DIR / src), "-o", str(out)],
            capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc -ptx {src}: {proc.stderr[-2000:]}")
        return out.read_text()


def nvdisasm() -> str | None:
    """The SASS disassembler: on PATH, or from the nvidia-cuda-nvdisasm wheel (pyproject's test
    extras), or None."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia  # a namespace package: the wheel's files under nvidia/cu*/bin
    except ImportError:
        return None
    for base in getattr(nvidia, "__path__", []):
        for exe in sorted(Path(base).glob("cu*/bin/nvdisasm")):
            return str(exe)
    return None


@functools.cache
def assembled(src: str, defines: tuple[str, ...] = ()) -> tuple[str, bytes]:
    """One module source's PTX through ptxas for sm_90, once: (ptxas -v's report, the cubin)."""
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(ptx_text(src, defines))
        proc = subprocess.run(["ptxas", "-O3", "-arch=sm_90", "-v", str(ptx), "-o", str(cubin)],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"ptxas {src}: {proc.stderr[-2000:]}")
        return proc.stderr, cubin.read_bytes()


@functools.cache
def sass_text(src: str) -> str:
    """The SASS of one module source: its cubin through nvdisasm."""
    exe = nvdisasm()
    if exe is None:
        raise RuntimeError("nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(assembled(src)[1])
        proc = subprocess.run([exe, "-c", str(cubin)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"nvdisasm {src}: {proc.stderr[-2000:]}")
    return proc.stdout


SASS_INSTRUCTION = re.compile(r"^/\*[0-9a-f]+\*/\s+(.*?)\s*;")
SASS_LABEL = re.compile(r"^(\.L_x_\d+):")


def sass_kernels(src: str) -> dict[str, list[str]]:
    """{kernel: its SASS, one instruction or label (`.L_x_N:`) a line} of one module source."""
    out = {}
    for m in re.finditer(r"^//-+ \.text\.(\w+) +-+\n(.*?)(?=^//-+ \.text\.|\Z)", sass_text(src), re.S | re.M):
        lines = []
        for ln in m.group(2).splitlines():
            ln = ln.strip()
            if (lab := SASS_LABEL.match(ln)) or (ins := SASS_INSTRUCTION.match(ln)):
                lines.append(lab.group(1) + ":" if lab else ins.group(1))
        out[demangle(m.group(1))] = lines
    return out


@dataclass(frozen=True)
class Insn:
    """What one line of a kernel's code means to walk_to_wait."""
    wait: bool = False          # the wait itself: the path stops before it
    load: str | None = None     # a line to report (a load, or what the walk asks for)
    target: str | None = None   # a label it may branch to (None: none, or one not to follow)
    ends: bool = False          # no fall-through: an unconditional branch, exit or return


def walk_to_wait(lines: list[str], labels: dict[str, int], read) -> list[str]:
    """The loads (read(line).load) that some path from the entry (line 0) reaches before its first
    wait: a walk over branches and labels (labels: {label: its line}), each path stopped at the
    first line that read() calls a wait. Path-insensitive: every branch may be taken or not."""
    found, seen, todo = [], set(), [0]
    while todo:
        i = todo.pop()
        while i < len(lines) and i not in seen:
            seen.add(i)
            ins = read(lines[i])
            if ins.wait:
                break
            if ins.load:
                found.append(ins.load)
            if ins.target is not None:
                todo.append(labels[ins.target])
            if ins.ends:
                break
            i += 1
    return found


def sass_loads_before_wait(lines: list[str]) -> list[str]:
    """The global loads (LDG) that some path from the kernel's entry reaches before any ACQBULK
    (griddepcontrol.wait): sass_before_wait's lines whose opcode starts with LDG."""
    return sass_before_wait(lines, ("LDG",))


# float arithmetic that holds a thread until its operands' loads have come back
SASS_FLOAT_OPS = ("FMUL", "FADD", "FFMA")


def sass_before_wait(lines: list[str], opcodes: tuple[str, ...]) -> list[str]:
    """The lines whose opcode starts with one of opcodes that some path from the kernel's entry
    reaches before any ACQBULK (griddepcontrol.wait). A branch to the label right after a wait is not followed: it is a
    body's `if (!waited)` (matvec_device.cuh), not taken before the first wait, and following it
    would count the loads that ptxas moved below the wait. Calls fall through (the module's callees
    are arithmetic helpers); an unconditional BRA, EXIT or RET ends a path."""
    labels = {ln[:-1]: i for i, ln in enumerate(lines) if ln.endswith(":")}
    after_wait = {label for label, i in labels.items() if i > 0 and lines[i - 1] == "ACQBULK"}

    def read(ln: str) -> Insn:
        predicated = ln.startswith("@")
        words = ln.split()[1:] if predicated else ln.split()
        op = words[0] if words else ""
        target = re.search(r"`\((\.L_x_\d+)\)", ln)  # nvdisasm: BRA `(.L_x_12)
        if op.startswith("BRA") and target:
            # BRA.DIV, or a predicate operand (BRA P1, ...), is conditional too
            conditional = predicated or op != "BRA" or bool(re.match(r"!?U?P[T\d]", words[1]))
            label = target.group(1)
            return Insn(target=None if label in after_wait else label, ends=not conditional)
        return Insn(wait=op == "ACQBULK", load=ln if op.startswith(opcodes) else None,
                    ends=op.split(".")[0] in ("EXIT", "RET") and not predicated)

    return walk_to_wait(lines, labels, read)


def immutable_loads_before_wait(src: str) -> dict[str, int]:
    """{kernel: the .CONSTANT loads (ld.global.nc: weights, norm weights) its SASS can issue
    before its wait}: the loads meant to overlap the op before, which ptxas may move below it."""
    return {k: sum("CONSTANT" in ln for ln in sass_loads_before_wait(lines)) for k, lines in sass_kernels(src).items()}


@functools.cache
def compiled_resources(sources: tuple[str, ...] = MODULE_KERNEL_SOURCES,
                       defines: tuple[str, ...] = ()) -> dict[str, Resources]:
    """Resources of every kernel of the given module sources: their PTX through ptxas for sm_90
    (with -D defines: TIMELINE_DEFINES for the timeline build's)."""
    res: dict[str, Resources] = {}
    for src in sources:
        res.update(parse_ptxas(assembled(src, defines)[0]))
    return res


def cta_registers(registers: int, threads: int) -> int:
    """Registers one CTA takes: a thread's count rounded up to the allocation unit, per warp."""
    per_thread = -(-registers // REGISTER_UNIT) * REGISTER_UNIT
    return per_thread * 32 * -(-threads // 32)


@dataclass(frozen=True)
class Footprint:
    ctas: int           # CTAs of the op on its busiest SM
    registers: int
    threads: int
    shared: int


def ctas_per_sm_limit(res: Resources, op: Op) -> int:
    """How many CTAs of the op fit on an empty SM."""
    shared = res.static_shared + op.dynamic_shared + CTA_RESERVED_SHARED
    return min(SM_CTAS, SM_REGISTERS // cta_registers(res.registers, op.threads), SM_THREADS // op.threads,
               SM_SHARED // shared)


def footprint(res: Resources, op: Op, ctas: int | None = None) -> Footprint:
    """The op's CTAs on its busiest SM (spread evenly, at most a full SM), or `ctas` of them."""
    if ctas is None:
        ctas = min(-(-op.grid // SMS), ctas_per_sm_limit(res, op))
    return Footprint(ctas, ctas * cta_registers(res.registers, op.threads), ctas * op.threads,
                     ctas * (res.static_shared + op.dynamic_shared + CTA_RESERVED_SHARED))


def fits(parts: list[Footprint]) -> list[str]:
    """The SM limits that these CTAs together exceed (empty: they fit)."""
    over = []
    if sum(p.registers for p in parts) > SM_REGISTERS:
        over.append(f"registers {' + '.join(str(p.registers) for p in parts)} > {SM_REGISTERS}")
    if sum(p.threads for p in parts) > SM_THREADS:
        over.append(f"threads {sum(p.threads for p in parts)} > {SM_THREADS}")
    if sum(p.shared for p in parts) > SM_SHARED:
        over.append(f"shared {sum(p.shared for p in parts)} > {SM_SHARED}")
    if sum(p.ctas for p in parts) > SM_CTAS:
        over.append(f"CTAs {sum(p.ctas for p in parts)} > {SM_CTAS}")
    return over


def one_wave(res: Resources, op: Op) -> bool:
    return op.grid <= SMS * ctas_per_sm_limit(res, op)


def blocked_pairs(ops: list[Op], res: dict[str, Resources]) -> list[tuple[str, str, list[str]]]:
    """Consecutive ops (a, b) of one wave each where no CTA of b fits beside a's CTAs on a's busiest
    SM: b's CTAs there start only as a's exit, so b issues nothing before its wait early."""
    out = []
    for a, b in zip(ops, ops[1:], strict=False):
        ra, rb = res[a.kernel], res[b.kernel]
        if not (one_wave(ra, a) and one_wave(rb, b)):
            continue  # a kernel of several waves fills every SM by design (the LM head)
        over = fits([footprint(ra, a), footprint(rb, b, ctas=1)])
        if over:
            out.append((a.name, b.name, over))
    return out


def crowded_pairs(ops: list[Op], res: dict[str, Resources]) -> list[tuple[str, str, int, int, int]]:
    """Consecutive ops (a, b) of one wave each where some, but not all, of b's CTAs of an evenly
    spread first wave (ceil(b.grid / SMS) an SM) fit beside a's CTAs on a's busiest SM: (a, b, CTAs
    that fit, CTAs wanted, SMs that run a's CTAs). The rest start there only as a's CTAs exit, or
    crowd onto the SMs that a leaves free."""
    out = []
    for a, b in zip(ops, ops[1:], strict=False):
        ra, rb = res[a.kernel], res[b.kernel]
        if not (one_wave(ra, a) and one_wave(rb, b)):
            continue
        fa, wanted = footprint(ra, a), footprint(rb, b).ctas
        fit = max((n for n in range(wanted + 1) if not fits([fa, footprint(rb, b, ctas=n)])), default=0)
        if 0 < fit < wanted:
            out.append((a.name, b.name, fit, wanted, min(a.grid, SMS)))
    return list(dict.fromkeys(out))  # an FFN pair once, though both layer kinds end with it


def blocked_windows(ops: list[Op], res: dict[str, Resources]) -> list[tuple[tuple[str, ...], list[str]]]:
    """Windows of three consecutive ops whose CTAs (one an SM each) do not fit on one SM."""
    out = []
    for w in zip(ops, ops[1:], ops[2:], strict=False):
        over = fits([footprint(res[o.kernel], o) for o in w])
        if over:
            out.append((tuple(o.name for o in w), over))
    return out


def build_differences(ops: list[Op], shipped: dict[str, Resources], other: dict[str, Resources]) -> list[str]:
    """Where another build of the module (the timeline build's) runs the step's ops differently from
    the shipped one: each kernel whose CTA takes other registers, each pair of consecutive ops that
    cannot share an SM in one build only, and each pair whose second op fits fewer or more CTAs
    beside the first's. Empty: the two place the step's CTAs alike."""
    out = []
    for kernel in dict.fromkeys(o.kernel for o in ops):
        threads = next(o.threads for o in ops if o.kernel == kernel)
        ours, theirs = (cta_registers(r[kernel].registers, threads) for r in (shipped, other))
        if ours != theirs:
            out.append(f"`{kernel}`: {other[kernel].registers} registers, {theirs} a CTA "
                       f"(shipped: {shipped[kernel].registers}, {ours})")
    for label, pairs in (("cannot share an SM", lambda r: {(a, b) for a, b, _ in blocked_pairs(ops, r)}),
                         ("CTAs of the second beside the first", lambda r: set(crowded_pairs(ops, r)))):
        mine, theirs = pairs(shipped), pairs(other)
        for p in sorted(theirs - mine):
            out.append(f"{label}, this build only: {p}")
        for p in sorted(mine - theirs):
            out.append(f"{label}, the shipped build only: {p}")
    return out


RESIDUAL_THREADS = 64  # KC_GEMV_NARROW_THREADS (native/cuda/matvec.cuh); 256 up to issue 48
LM_CTAS_PER_SM, LM_THREADS = 2, 256  # KC_LM_CTAS_PER_SM, KC_LM_THREADS (native/cuda/matvec.cuh)
GLU_RPW = 4  # KC_GLU_RPW (native/cuda/matvec.cuh): k_gemv_glu's rows a warp
DNH_WARPS = 16  # KC_DNH_WARPS (native/cuda/deltanet.cuh): k_deltanet_head's warps
GLU_THREADS = 2 * 32 // GLU_RPW * 32  # KC_GLU_THREADS: a warp per GLU_RPW rows of gate and of up


def step_ops_m1(residual_threads: int = RESIDUAL_THREADS) -> list[Op]:
    """One DeltaNet layer and one attention layer of the qwen35-0.8b M=1 step, then the LM head:
    the ops plan_pass makes (E 1024, F 3584, 16 value heads of 128, 8 query heads of 256). The
    residual products (one row a warp, 1024 rows) in blocks of residual_threads."""
    g14 = "k_gemv<1, 4, false>"
    g11 = "k_gemv<1, 1, false>"
    res = (1024 * 32 // residual_threads, residual_threads)
    def ffn(glu: str) -> list[Op]:  # after a DeltaNet layer, k_gemv_glu_early (forward.cu)
        return [Op("ffn norm", "k_actq", 4, 256), Op("gate/up + SwiGLU", glu, 112, GLU_THREADS),
                Op("down + residual", g11, *res)]
    deltanet = [Op("attn norm", "k_actq", 4, 256), Op("in-proj", g14, 257, 256),
                Op("deltanet head", "k_deltanet_head", 16, DNH_WARPS * 32), Op("out + residual", g11, *res),
                *ffn("k_gemv_glu_early")]
    attention = [Op("attn norm", "k_actq", 4, 256), Op("qkv", g14, 160, 256), Op("qkprep", "k_qkprep", 12, 256, 1024),
                 Op("scores", "k_attn_scores", 128, 256), Op("values", "k_attn_values", 64, 1024),
                 Op("attn out + residual", g11, *res), *ffn("k_gemv_glu")]
    head = [Op("final norm", "k_actq", 4, 256)]
    head += [Op(f"LM head piece {p}", "k_lm_head<1>", LM_CTAS_PER_SM * SMS, LM_THREADS) for p in range(4)]
    return deltanet + attention + head


def chain_contract_ops() -> tuple[list[Op], dict[str, Resources]]:
    """A DeltaNet layer and its FFN as the uniform chain's contract allows at its limits: every op
    one CTA an SM of 288 threads at 72 registers and 72 KB of dynamic shared memory."""
    names = ["norm + in-proj", "deltanet head", "out + residual", "norm + gate/up", "down + residual"]
    ops = [Op(n, "chain", SMS, CHAIN_THREADS, CHAIN_MAX_DYNAMIC_SHARED) for n in names] * 2
    return ops, {"chain": Resources(CHAIN_MAX_REGISTERS, 0, 0, 0)}


# Global loads a kernel's PTX may issue before its first griddepcontrol.wait that are not
# `ld.global.nc` (immutable data read through __ldg or a const __restrict__ argument), with why.
# Everything else read before the wait may still be written by an op that runs ahead of it.
PRE_WAIT_LOADS_ALLOWED = {
    "k_deltanet_head": "its own layer's state rows and conv history, written only by this op one "
                       "step earlier (a whole pass before)",
    "k_deltanet": "its own layer's state rows and conv history, as k_deltanet_head",
    "k_attn_scores": "the pass's position (d_in), copied from the host before the pass's first kernel",
    "k_attn_values": "the pass's position (d_in), as k_attn_scores",
    # The walk does not follow values: a warp's later rows skip the wait through the `waited`
    # flag, and that branch makes the activation loads (and the M=1 residual's y) look reachable
    # before the wait. The SASS shows them after ACQBULK (docs/PERFORMANCE.md, issue 48).
    "k_gemv": "the `waited` flag of warp_rows (a path-insensitive walk); the weights are ld.global.nc",
    "k_gemv_wide": "k_gemv's body at 8 rows a warp: as k_gemv",
    "k_gemv_glu": "the `waited` flag of warp_rows, as k_gemv",
    "k_gemv_glu_early": "k_gemv_glu's body, as k_gemv_glu",
}


def ptx_kernels(src: str) -> dict[str, str]:
    """{kernel: PTX body} of one module source."""
    return {demangle(m.group(1)): m.group(2) for m in re.finditer(r"\.entry (\w+)\((.*?)\n\}", ptx_text(src), re.S)}


def loads_before_wait(body: str) -> list[str]:
    """The plain global loads (not .nc) that some path from the kernel's entry reaches before any
    griddepcontrol.wait, in the PTX."""
    lines = [ln.strip() for ln in body.splitlines()]
    labels = {ln[:-1]: i for i, ln in enumerate(lines) if re.match(r"^\$\w+:$", ln)}
    load = re.compile(r"^(?:@!?%p\d+\s+)?(ld\.global(?!\.nc)[\w.]*\s[^;]*);")

    def read(ln: str) -> Insn:
        b = re.match(r"^(@!?%p\d+\s+)?bra(?:\.uni)?\s+(\$\w+);", ln)
        if b:
            return Insn(target=b.group(2), ends=not b.group(1))
        m = load.match(ln)
        return Insn(wait=ln.startswith("griddepcontrol.wait"), load=m.group(1) if m else None,
                    ends=ln.startswith(("ret;", "exit;")))

    return walk_to_wait(lines, labels, read)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeline", action="store_true",
                    help="also say where the timeline build (KC_TIMELINE=1) places the step's CTAs otherwise")
    args = ap.parse_args(argv)
    res = compiled_resources()
    ops = step_ops_m1()
    print("| op | kernel | CTAs | threads | registers | a CTA's registers | spill B | smem B |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for o in dict((o.kernel + o.name, o) for o in ops).values():
        r = res[o.kernel]
        print(f"| {o.name} | `{o.kernel}` | {o.grid} | {o.threads} | {r.registers} | "
              f"{cta_registers(r.registers, o.threads)} | {r.spill_bytes} | {r.static_shared + o.dynamic_shared} |")
    pairs = blocked_pairs(ops, res)
    print(f"\nop pairs of the step that cannot share an SM: {len(pairs)}")
    for a, b, over in pairs:
        print(f"- {a} -> {b}: {'; '.join(over)}")
    crowded = crowded_pairs(ops, res)
    print(f"op pairs where only some of the second op's CTAs fit beside the first's: {len(crowded)}")
    for a, b, fit, wanted, sms in crowded:
        print(f"- {a} -> {b}: {fit} of {wanted} an SM, on the {sms} SMs that run {a}")
    if args.timeline:
        diffs = build_differences(ops, res, compiled_resources(defines=TIMELINE_DEFINES))
        print(f"\nthe timeline build against the shipped one: {len(diffs)} differences")
        for d in diffs:
            print(f"- {d}")
    chain, cres = chain_contract_ops()
    wins = blocked_windows(chain, cres)
    print(f"\nthe uniform chain at its contract's limits: {len(wins)} windows of three that do not fit")
    bad = 0
    for src in MODULE_KERNEL_SOURCES:
        for k, body in sorted(ptx_kernels(src).items()):
            loads = loads_before_wait(body)
            if loads and k.split("<")[0] not in PRE_WAIT_LOADS_ALLOWED:
                bad += 1
                print(f"- {k}: {len(loads)} plain global loads before griddepcontrol.wait: {loads[:3]}")
    print(f"kernels reading possibly-written memory before their wait: {bad}")
    if nvdisasm() is None:
        print("\nSASS: nvdisasm not found (pip install nvidia-cuda-nvdisasm): immutable loads before the wait not read")
    else:
        step = {o.kernel for o in ops}
        print("\nimmutable loads (weights) the SASS can issue before the wait, the step's kernels:")
        for src in MODULE_KERNEL_SOURCES:
            for k, n in sorted(immutable_loads_before_wait(src).items()):
                if k in step:
                    print(f"- `{k}`: {n}")
    return 1 if wins or bad else 0


if __name__ == "__main__":
    sys.exit(main())
