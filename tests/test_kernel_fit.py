"""Which kernels of the M=1 step can share an SM, from the compiled module (bench/kernel_fit.py).

nvcc only, no GPU: the registers, shared memory and spills come from ptxas for sm_90 with the
module's flags, the step's shapes from plan_pass, the limits from an sm_90 SM (issue 48).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import kernel_fit as kf  # noqa: E402

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("ptxas") is None,
                                reason="nvcc is not installed")

needs_nvdisasm = pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("ptxas") is None
                                    or kf.nvdisasm() is None,
                                    reason="nvcc or nvdisasm is not installed (nvdisasm: pyproject's test extras, "
                                           "nvidia-cuda-nvdisasm)")


def test_register_allocation_rounds_to_eight_a_thread():
    assert kf.cta_registers(95, 256) == 96 * 256
    assert kf.cta_registers(72, 288) == 20736
    assert kf.cta_registers(52, 1024) == 57344


def test_parse_ptxas_reads_registers_spills_and_shared():
    text = """ptxas info    : Compiling entry function '_Z6k_gemvILi1ELi1ELb0EEv8GemvArgs' for 'sm_90'
ptxas info    : Function properties for _Z6k_gemvILi1ELi1ELb0EEv8GemvArgs
    0 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 95 registers, used 1 barriers, 2064 bytes smem
"""
    assert kf.parse_ptxas(text) == {"k_gemv<1, 1, false>": kf.Resources(95, 2064, 8, 0)}


def test_uniform_chain_contract_fits_three_to_an_sm():
    ops, res = kf.chain_contract_ops()
    assert kf.blocked_windows(ops, res) == []
    # one register more a thread than the contract and three no longer fit
    over = {"chain": kf.Resources(kf.CHAIN_MAX_REGISTERS + 8, 0, 0, 0)}
    assert kf.blocked_windows(ops, over)


def test_build_differences_names_the_kernels_and_pairs_another_build_changes():
    ops = [kf.Op("gate/up", "glu", 112, 512), kf.Op("down", "down", 512, 64)]
    shipped = {"glu": kf.Resources(84, 256, 0, 0), "down": kf.Resources(104, 0, 0, 0)}
    assert kf.build_differences(ops, shipped, shipped) == []
    # 4 registers more a thread: a rounded CTA of 7,168, and 2 of the 4 fit beside 45,056 where 3 did
    other = {**shipped, "down": kf.Resources(108, 0, 0, 0)}
    assert kf.build_differences(ops, shipped, other) == [
        "`down`: 108 registers, 7168 a CTA (shipped: 104, 6656)",
        "CTAs of the second beside the first, this build only: ('gate/up', 'down', 2, 4, 112)",
        "CTAs of the second beside the first, the shipped build only: ('gate/up', 'down', 3, 4, 112)"]
    # rounding to 8 registers a thread: 84 and 88 take the same CTA
    assert kf.build_differences(ops, shipped, {**shipped, "glu": kf.Resources(88, 256, 0, 0)}) == []


@needs_nvcc
def test_the_timeline_build_compiles_every_kernel_of_the_step():
    # the define kernel_fit gives it is the one CMake gives the timeline build
    assert "list(APPEND KITE_CUDA_DEFS KC_TIMELINE=1)" in (kf.CUDA_DIR / "CMakeLists.txt").read_text()
    assert kf.TIMELINE_DEFINES == ("KC_TIMELINE=1",)
    timeline = kf.compiled_resources(defines=kf.TIMELINE_DEFINES)
    step = {o.kernel for o in kf.step_ops_m1()}
    assert step <= set(timeline), sorted(step - set(timeline))
    assert {k: timeline[k].spill_bytes for k in step if timeline[k].spill_bytes} == {}


@needs_nvcc
def test_calculator_flags_the_review_pairs_left_before_narrow_residual_blocks():
    # the residual products in 256-thread blocks, as up to issue 48: two of the review's three
    # pairs (the third, head -> out, fits since the head's 16 warps of 8 rows: 36,864 + 26,624)
    pairs = {(a, b) for a, b, _ in kf.blocked_pairs(kf.step_ops_m1(256), kf.compiled_resources())}
    lm_head = {(f"LM head piece {p}", f"LM head piece {p + 1}") for p in range(3)}
    assert pairs - lm_head == {("in-proj", "deltanet head"), ("gate/up + SwiGLU", "down + residual")}


@needs_nvcc
def test_narrow_residual_blocks_fit_beside_the_head_and_gate_up():
    # and the streamed LM head's pieces, two CTAs an SM each (53,248 registers): the next piece's
    # CTAs start as this piece's leave, the price of the second CTA, which P6 measured faster
    pairs = {(a, b) for a, b, _ in kf.blocked_pairs(kf.step_ops_m1(), kf.compiled_resources())}
    assert pairs == {("in-proj", "deltanet head"), *((f"LM head piece {p}", f"LM head piece {p + 1}") for p in range(3))}
    header = (kf.CUDA_DIR / "matvec.cuh").read_text()
    assert f"#define KC_GEMV_NARROW_THREADS {kf.RESIDUAL_THREADS}" in header
    assert f"#define KC_LM_CTAS_PER_SM {kf.LM_CTAS_PER_SM}" in header
    assert f"#define KC_LM_THREADS {kf.LM_THREADS}" in header
    assert f"#define KC_GLU_RPW {kf.GLU_RPW}" in header
    assert "#define KC_GLU_THREADS (2 * 32 / KC_GLU_RPW * 32)" in header


@needs_nvcc
def test_calculator_names_the_pairs_where_only_some_ctas_fit_beside():
    # an evenly spread wave of 512 residual blocks wants 4 an SM (26,624 registers): beside a
    # k_gemv_glu block (45,056) 3 fit; beside a k_deltanet_head block (36,864) all 4
    crowded = kf.crowded_pairs(kf.step_ops_m1(), kf.compiled_resources())
    assert crowded == [("gate/up + SwiGLU", "down + residual", 3, 4, 112)]


# Gates read from the compiled module. The M=1 step's kernels keep no spills; the instances that
# run with three CTAs an SM (in-proj, qkv) stay at <= 80 registers; the residual
# products' y[r] preload (issue 48) took k_gemv<1, 1, false> from 95 to 97 registers (104 as
# allocated); a kernel named k_chain_* is of the uniform chain and keeps its contract.
@needs_nvcc
def test_register_spill_and_shared_gates():
    res = kf.compiled_resources()
    step = {o.kernel for o in kf.step_ops_m1()}
    assert step <= set(res), sorted(step - set(res))
    assert {k: res[k].spill_bytes for k in step if res[k].spill_bytes} == {}
    assert res["k_gemv<1, 4, false>"].registers <= 80
    # the Q4_0 DeltaNet in-proj, one block an SM: a k_deltanet_head block (36,864) fits beside it
    assert res["k_gemv_wide"].registers <= 112 and res["k_gemv_wide"].spill_bytes == 0
    assert res["k_gemv<1, 1, false>"].registers <= 104
    # the streamed LM head: two CTAs an SM, both in the register file (2 x 32,768)
    assert res["k_lm_head<1>"].registers <= 128 and res["k_lm_head<2>"].registers <= 128
    # a short context's attention: k_attn_scores holds every load of its block in flight (87
    # registers at its keeping), k_attn_values 1024 threads at 32, a CTA of each beside the other
    assert res["k_attn_scores"].registers <= 96 and res["k_attn_values"].registers <= 32
    for name, r in res.items():
        if name.startswith("k_chain"):
            assert r.registers <= kf.CHAIN_MAX_REGISTERS and r.spill_bytes == 0, (name, r)
            assert r.static_shared <= kf.CHAIN_MAX_DYNAMIC_SHARED, (name, r)


def test_only_the_products_schedule_the_next_kernel_past_their_wait():
    # the products' kernels (gemv, glu, LM head) let the next kernel start once past their wait,
    # so that at most one product's weight loads run ahead of the body between products (P9); the
    # ops between products let it start at once, so that the next product streams during them
    common = (kf.CUDA_DIR / "kc_common.cuh").read_text()
    body = common[common.index("#define KC_KERNEL_BODY("):common.index("#define KC_PASS_KERNEL(")]
    assert "if (!(product)) KC_PDL_TRIGGER();" in body and "KC_TL_WAIT(product)" in body
    assert "#define KC_PASS_KERNEL(args, ...) KC_KERNEL_BODY(false, args, __VA_ARGS__)" in common
    assert "#define KC_PRODUCT_KERNEL(args, ...) KC_KERNEL_BODY(true, args, __VA_ARGS__)" in common
    assert "if (trigger_after) KC_PDL_TRIGGER();" in common
    # ... but a product into the residual stream (its first job adds) is followed by the row norm,
    # which has no weights: it lets the norm and the product after it start at once, except the
    # M=1 out products (after the DeltaNet head or the attention), which the pass sets apart
    matvec = (kf.CUDA_DIR / "matvec.cu").read_text()
    assert matvec.count("KC_PRODUCT_KERNEL(a, ") == 2
    # ... and after a DeltaNet layer the glu lets the down product start at once
    # (k_gemv_glu_early), so that its blocks load their weights during the glu's body
    assert matvec.count("KC_PASS_KERNEL(") == 2 and "KC_PASS_KERNEL(a, gemv_glu_block);" in matvec
    # ... and the Q4_0 DeltaNet in-proj (k_gemv_wide) the head at its start, beside it
    assert "KC_PASS_KERNEL(a, gemv_block<1, 8, false>);" in matvec
    assert "KC_KERNEL_BODY(a.trigger_after_wait, a, gemv_block<MT, RPW, PRO>);" in matvec
    assert "ga.trigger_after_wait = !js.j[0].add;" in matvec
    forward = (kf.CUDA_DIR / "forward.cu").read_text()
    for role in ("ROLE_DN_OUT", "ROLE_ATT_OUT"):
        assert f"tag(ops, from, {role});\n            out_trigger_after_wait(ops, from, m);" in forward
    assert forward.count("out_trigger_after_wait(ops, from, m);") == 2
    others = {f.name for f in kf.CUDA_DIR.glob("*.cu") if "KC_PASS_KERNEL(a, " in f.read_text()}
    assert others == {"activation.cu", "attention.cu", "deltanet.cu", "matvec.cu"}


@needs_nvdisasm
def test_the_deltanet_head_computes_nothing_before_its_wait():
    # its state rows' and history taps' loads are issued before the wait and nothing is computed
    # from them there, so that the block reaches its wait at once and they arrive during the
    # release (a float op on a loaded value would hold the thread until that load came back)
    lines = kf.sass_kernels("deltanet.cu")["k_deltanet_head"]
    assert kf.sass_before_wait(lines, kf.SASS_FLOAT_OPS) == []
    assert len(kf.sass_loads_before_wait(lines)) >= 32 + 3  # a thread's 32 state values (8 rows of 4) and the taps
    # ... and the conv weights of its channel (K = 4 of them), which after the wait sat in the
    # in-proj outputs' trip (docs/PERFORMANCE.md: loaded before it, Q8_0 1.033, 6 of 6)
    assert len(kf.sass_before_wait(lines, ("LDG.E.CONSTANT",))) >= 4
    res = kf.compiled_resources()["k_deltanet_head"]
    assert res.registers <= 72 and res.spill_bytes == 0, res  # KC_MAX_REGISTERS: the out product fits beside
    assert f"#define KC_DNH_WARPS {kf.DNH_WARPS}" in (kf.CUDA_DIR / "deltanet.cuh").read_text()


@needs_nvdisasm
def test_the_deltanet_head_issues_few_instructions():
    # its warps share an SM's 4 issue slots, and its 32 warps of 4 rows were as much issue as
    # latency (Nsight Compute, docs/PERFORMANCE.md): dk and dv are the constants deltanet_head_fits
    # checks (no runtime loop), the ring row it writes comes from the taps' walk (no division after
    # the wait), and a warp's row sums take one scatter each (16 warps of 8 rows: 9 shuffles and 8
    # to share a sum, not 40)
    lines = kf.sass_kernels("deltanet.cu")["k_deltanet_head"]
    wait = next(i for i, line in enumerate(lines) if "ACQBULK" in line)
    assert [line for line in lines[wait:] if "I2F.RP" in line] == []
    assert sum("SHFL" in line for line in lines) <= 56


def test_one_function_decides_who_writes_a_short_rows_attention():
    # k_attn_scores takes a short row's whole attention and k_attn_values leaves it alone on the
    # same test: each asks attn_short_row after its wait, and nothing else decides it
    body = (kf.CUDA_DIR / "attention_device.cuh").read_text()
    assert body.count("__device__ __forceinline__ bool attn_short_row(") == 1
    assert body.count("<= KC_ATT_SHORT") == body.count("> KC_ATT_SHORT") + 1 == 1
    scores = body[body.index("void attn_scores_block("):body.index("void attn_values_block(")]
    values = body[body.index("void attn_values_block("):]
    assert "    if (attn_short_row(n, D)) {" in scores.split("wait();", 1)[1]
    assert "    if (n > a.max_pos || attn_short_row(n, D)) return;" in values.split("wait();", 1)[1]


@needs_nvcc
def test_only_listed_kernels_read_plain_global_memory_before_their_wait():
    readers = set()
    for src in kf.MODULE_KERNEL_SOURCES:
        for name, body in kf.ptx_kernels(src).items():
            if kf.loads_before_wait(body):
                readers.add(name.split("<")[0])
    assert readers <= set(kf.PRE_WAIT_LOADS_ALLOWED), sorted(readers - set(kf.PRE_WAIT_LOADS_ALLOWED))
    # the kernels whose inputs all come after the wait stay so
    assert not readers & {"k_actq", "k_act", "k_embed", "k_qkprep"}


def test_pre_wait_walk_follows_branches_and_stops_at_the_wait():
    body = """
\tld.global.nc.u32 \t%r1, [%rd1];
\t@%p1 bra $L__BB0_2;
\tgriddepcontrol.wait;
\tld.global.u32 \t%r2, [%rd2];
$L__BB0_2:
\tld.global.u32 \t%r3, [%rd3];
\tret;
"""
    assert kf.loads_before_wait(body) == ["ld.global.u32 \t%r3, [%rd3]"]


# ptxas moves a load whose value is first used after griddepcontrol.wait below the wait (a shorter
# live range): the M=1 gemvs with the weight kind known lost 12 % that way (d6565dc), and the
# M-row gemvs keep theirs ahead only through use_before_wait (a37f278). Each instance without a
# prologue loads 4 weight blocks a lane before its wait (Q8_0: 8 16-byte halves and 4 scales at
# least); the instances with a prologue wait first, so none of theirs is ahead: the check's
# negative. Without use_before_wait the M-row instances keep 0-5 of their 20.
@needs_nvdisasm
def test_weight_loads_stay_ahead_of_the_wait_in_the_sass():
    loads = kf.immutable_loads_before_wait("matvec.cu")
    products = [f"k_gemv<{mt}, {rpw}, false>" for mt in (1, 2, 4, 8) for rpw in (1, 2, 4)] + ["k_gemv_glu"]
    assert {k: loads.get(k, 0) for k in products if loads.get(k, 0) < 12} == {}
    assert {k: n for k, n in loads.items() if k.endswith("true>") and n} == {}
    # k_actq's norm weight, loaded before the wait (activation_device.cuh)
    assert kf.immutable_loads_before_wait("activation.cu")["k_actq"] >= 1
    # the streamed LM head's first 4 groups (2 rows of two 16-byte halves and a scale each): all 24
    # loads ahead of ACQBULK
    assert kf.immutable_loads_before_wait("matvec.cu")["k_lm_head<1>"] >= 24


# The M=1 out products ask L2 for the glu's weights and the next layer's first product's during the
# head's or the attention's body (forward.cu's weights_ahead, matvec_device.cuh's l2_ahead): each
# warp sleeps out the delay and asks ahead of its wait, where the memory is idle; past the wait
# the same prefetches made the out product and the row norm wait behind them (glu-weights-ahead,
# docs/PERFORMANCE.md).
@needs_nvdisasm
def test_the_out_products_ask_l2_for_later_weights_before_their_wait():
    lines = kf.sass_kernels("matvec.cu")["k_gemv<1, 1, false>"]
    prefetches = sum("CCTL" in ln for ln in lines)
    assert len(kf.sass_before_wait(lines, ("CCTL",))) == prefetches
    assert kf.sass_before_wait(lines, ("NANOSLEEP",))
    forward = (kf.CUDA_DIR / "forward.cu").read_text()
    assert forward.count("weights_ahead(ops, out_from, out_to, w, ") == 1


# After a DeltaNet layer the glu lets the down product start at its start (k_gemv_glu_early, kept
# at 1.028), so that the down product's blocks load their weights during its body; after the
# attention it stays a product (k_gemv_glu), triggering past its wait.
@needs_nvdisasm
def test_the_glu_after_a_deltanet_layer_triggers_at_its_start():
    kernels = kf.sass_kernels("matvec.cu")
    assert kf.sass_before_wait(kernels["k_gemv_glu_early"], ("PREEXIT",))
    assert not kf.sass_before_wait(kernels["k_gemv_glu"], ("PREEXIT",))
    assert any("PREEXIT" in ln for ln in kernels["k_gemv_glu"])
    forward = (kf.CUDA_DIR / "forward.cu").read_text()
    assert forward.count("o.early = l.rec != 0;") == 1
    assert "klaunch(o.early ? k_gemv_glu_early : k_gemv_glu," in forward


def test_sass_walk_skips_the_branch_over_a_wait_and_stops_at_it():
    lines = ["LDG.E.128.CONSTANT R4, desc[UR4][R2.64]", "@P0 BRA `(.L_x_2)", "@P1 BRA `(.L_x_1)",
             "ACQBULK", ".L_x_1:", "LDG.E.CONSTANT R8, desc[UR4][R6.64]", "EXIT",
             ".L_x_2:", "LDG.E.U16.CONSTANT R9, desc[UR4][R6.64]", "BRA `(.L_x_3)", "LDG.E R10, desc[UR4][R6.64]",
             ".L_x_3:", "EXIT"]
    # the load at .L_x_1 follows the wait on the first pass (the branch to it skips the wait);
    # .L_x_2's is reached by a branch that skips none; the load after the unconditional BRA is not
    assert kf.sass_loads_before_wait(lines) == ["LDG.E.128.CONSTANT R4, desc[UR4][R2.64]",
                                                "LDG.E.U16.CONSTANT R9, desc[UR4][R6.64]"]


@needs_nvcc
def test_p6_builds_with_the_module_lm_head(tmp_path):
    # bench/probe_lmhead.cu (P6) measures the module's k_lm_head beside k_gemv<1, 4> (its (d) rows,
    # present when native/cuda/lm_head_device.cuh is): a GPU call builds it first
    exe = tmp_path / "probe_lmhead"
    res = subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-o", str(exe), str(kf.REPO / "bench" / "probe_lmhead.cu")],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert b"k_lm_candidate" in exe.read_bytes()


@needs_nvcc
@pytest.mark.parametrize("probe", ["probe_contention", "probe_release"])  # P9, P10
def test_a_probe_builds(tmp_path, probe):
    # the probe builds as bench/probes.sh builds it; it runs on a GPU only
    exe = tmp_path / probe
    res = subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-o", str(exe), str(kf.REPO / "bench" / f"{probe}.cu")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and exe.exists(), res.stderr[-2000:]
