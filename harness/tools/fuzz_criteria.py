"""A fuzz campaign over the criteria loader (hypothesis): structured documents over every schema
key, YAML with anchors, aliases, merge keys and tags, and mutations of the project's own criteria
files, at the text, line and byte level.

The property: any input gives criteria (which then digest, register and substitute without error)
or SchemaErrors whose messages name the file; never another exception. Each finding is shrunk by
hypothesis, printed, written to the summary and the campaign goes on with the next seed.

    python -m harness.tools.fuzz_criteria --seconds 600 --seed 0 --out build/fuzz/criteria.json

Exit status 0: no finding; 1: findings (listed in the summary); 2: usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from harness.errors import SchemaErrors
from harness.contract import criteria as C
from harness.contract import registry, schema
from harness.contract.digest import canonical_json, criterion_digest

ROOT = Path(__file__).resolve().parent.parent.parent
REL = "regressions/fuzz.yaml"
BUILDS = ["default", "stub", "gpu"]
DUMPS = ["h_out", "logits"]


def seed_files(root: Path = ROOT) -> dict[str, str]:
    """The real criteria files the mutations start from (name -> text)."""
    paths = sorted((root / "regressions").glob("*.yaml")) + [root / "tests" / "data" / "example_suite.yaml"]
    return {p.name: p.read_text(encoding="utf-8") for p in paths if p.is_file()}


# ---- the property -----------------------------------------------------------------------------

def check_text(text: str) -> None:
    """Load criteria text; anything but criteria or SchemaErrors (naming the file) raises."""
    try:
        crits = schema.load_text(text, REL, BUILDS, DUMPS)
    except SchemaErrors as e:
        if not e.messages or not all(isinstance(m, str) and m.startswith(REL) for m in e.messages):
            raise AssertionError(f"SchemaErrors without the file name: {e.messages!r}") from None
        return
    values = {p: f"/x/{p}" for p in C.PLACEHOLDERS}
    for c in crits:
        if not (c.id and c.kind in C.KINDS and c.digest == criterion_digest(c.raw)):
            raise AssertionError(f"inconsistent criterion {c.id!r}")
        canon = canonical_json(c.raw)  # the digested text reads back as itself: one text, one value
        if canonical_json(json.loads(canon)) != canon:
            raise AssertionError(f"canonical form of {c.id!r} does not read back as itself: {canon[:200]}")
        registry.status([], c)
        registry.plan([], [c], [], None)
        c.builds()
        for case in c.cases or [{}]:
            for var in c.variants():
                for a in var.args + var.wrapper + list(var.env.values()) + list(var.place.values()):
                    C.substitute(a, {**values, **case})


def check_bytes(data: bytes, folder: Path) -> None:
    """The same through a file (decoding, size and type checks included)."""
    p = folder / "fuzz.yaml"
    p.write_bytes(data)
    try:
        schema.load_file(p, folder, BUILDS, DUMPS)
    except SchemaErrors as e:
        if not e.messages or not all(m.startswith("fuzz.yaml") for m in e.messages):
            raise AssertionError(f"SchemaErrors without the file name: {e.messages!r}") from None


# ---- strategies -------------------------------------------------------------------------------

KEYS = sorted(set(schema.TOP_KEYS) | set(schema.COMMON) | set(schema.VARIANT_KEYS) | set(schema.EXPECT_KEYS)
              | set(schema.COMPARE_KEYS) | set(schema.FILE_KEYS) | {k for ks in schema.KIND_KEYS.values() for k in ks}
              | {"field", "reduce", "resamples", "seed", "recipe", "qtype"})
WORDS = sorted(set(KEYS) | set(C.KINDS) | set(C.REQUIREMENTS) | set(C.LAYOUTS) | set(C.COMPARE_MODES)
               | set(C.ORDERS) | set(C.REDUCERS) | set(C.RATIOS) | set(BUILDS) | set(DUMPS)
               | {"{model}", "{work}", "{bin}", "{nope}", "{{", "}}", "{case_x}", "ci_lower >= 1.05", ">0", "==0",
                  "!=1e400", "~re(", "~ok", "~a{99999999999}", "a{4294967296}", "(?P<a>x)(?P=b)", "(" * 300,
                  "timings.request_ms", "counters.gpu_steps", "1,2,3", "../../x", "default", "tiny", "q8_0"})
TOKENS = ["&a ", "*a", "<<: *a", "!!binary ", "!!set ", "!!omap ", "!!timestamp ", "!!float ", "!!int ",
          "!!python/object:os.system ", "!!str ", "? ", "- ", ": ", "---\n", "...\n", "%YAML 1.1\n", "\t", "#",
          "|\n", ">-\n", ".nan", ".inf", "-.inf", "0x1F", "0o17", "1_000", "2026-12-01T00:00:00Z", "~", "null",
          "[", "]", "{", "}", ",", "'", '"', "\\", "\u0085", "\u2028", "\ufeff", "\x00", "\x1b", "é"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(WORDS),
                    st.text(max_size=16))
values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6), st.integers(-3, 3)), kids, max_size=6)),
    max_leaves=40)


@st.composite
def criteria_documents(draw: st.DrawFn) -> str:
    """A criteria file: criteria of one kind each, their keys drawn from the schema's."""
    crits = []
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(C.KINDS + ("nope",)))
        c: dict[Any, Any] = {"id": draw(st.sampled_from([f"F{i}", "F0", "1bad", ""])), "title": "t", "kind": kind}
        allowed = sorted(set(schema.COMMON) | set(schema.KIND_KEYS.get(kind, {})))
        for k in draw(st.lists(st.sampled_from(allowed), max_size=8, unique=True)):
            c[k] = draw(values)
        crits.append(c)
    doc: dict[str, Any] = {"criteria": crits}
    if draw(st.booleans()):
        doc["version"] = draw(st.sampled_from([1, 2, "1", None]))
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


@st.composite
def anchored_yaml(draw: st.DrawFn) -> str:
    """Hand-written YAML with anchors, aliases (some recursive, some nested many times) and merges."""
    lines = ["definitions:"]
    names = []
    for i in range(draw(st.integers(1, 6))):
        name = f"a{i}"
        earlier = [f"*{n}" for n in names]
        item = draw(st.one_of(st.sampled_from(WORDS).map(json.dumps),
                              st.lists(st.sampled_from(earlier + ["1", "x", f"*{name}"]), max_size=12)
                              .map(lambda xs: "[" + ", ".join(xs) + "]"),
                              st.sampled_from(["{kind: run, args: [info]}", f"{{<<: *{name}}}",
                                               "{<<: [" + ", ".join(earlier or ["{}"]) + "]}"])))
        lines.append(f"  {name}: &{name} {item}")
        names.append(name)
    ref = draw(st.sampled_from([f"*{n}" for n in names]))
    lines += ["criteria:", "  - id: A1", "    title: t", "    kind: run",
              f"    args: {draw(st.sampled_from([ref, '[info, ' + ref + ']', '[info]']))}",
              f"    runs: {draw(st.sampled_from(['[{}]', '[' + ref + ']', ref]))}"]
    if draw(st.booleans()):
        lines.append(f"  - {{<<: {ref}, id: A2, title: t, kind: run}}")
    return "\n".join(lines) + "\n"


@st.composite
def mutated_file(draw: st.DrawFn, seeds: dict[str, str] | None = None) -> str:
    """A real criteria file with 1-6 line, token or character mutations (or two files spliced)."""
    seeds = seeds or SEEDS
    name = draw(st.sampled_from(sorted(seeds)))
    lines = seeds[name].split("\n")
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "token", "char", "indent", "dedent", "splice",
                                   "truncate"]))
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        if not lines:
            lines = [""]
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "token":
            j = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:j] + draw(st.sampled_from(TOKENS + WORDS)) + lines[i][j:]
        elif op == "char" and lines[i]:
            j = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:j] + draw(st.characters()) + lines[i][j + 1:]
        elif op == "indent":
            lines[i] = draw(st.sampled_from(["  ", " ", "\t", "    "])) + lines[i]
        elif op == "dedent":
            lines[i] = lines[i].lstrip()
        elif op == "splice":
            other = seeds[draw(st.sampled_from(sorted(seeds)))].split("\n")
            j = draw(st.integers(0, len(other) - 1))
            lines[i:i] = other[j:j + draw(st.integers(1, 20))]
        elif op == "truncate":
            lines = lines[:i + 1]
            lines[-1] = lines[-1][:draw(st.integers(0, len(lines[-1])))]
    return "\n".join(lines)


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    data = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))].encode("utf-8"))
    for _ in range(draw(st.integers(1, 8))):
        i = draw(st.integers(0, max(0, len(data) - 1)))
        op = draw(st.sampled_from(["flip", "insert", "delete"]))
        if op == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif data:
            del data[i:i + draw(st.integers(1, 16))]
    return bytes(data)


SEEDS = seed_files()
TEXT_STRATEGIES: dict[str, st.SearchStrategy[str]] = {
    "documents": criteria_documents(),
    "anchors": anchored_yaml(),
    "mutated": mutated_file(),
    "any-text": st.text(max_size=400),
}


# ---- the campaign -----------------------------------------------------------------------------

@dataclass
class Finding:
    strategy: str
    seed: int
    error: str
    input: str  # repr of the shrunk input


@dataclass
class Summary:
    seed: int
    seconds: float = 0.0
    executions: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.executions.values())


def _batch(name: str, strategy: st.SearchStrategy[Any], batch_seed: int, examples: int, summary: Summary,
           folder: Path, shrink: bool) -> None:
    last: list[Any] = [None]
    phases = [p for p in Phase if shrink or p is not Phase.shrink]

    @seed(batch_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False, phases=phases,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(strategy)
    def prop(x: Any) -> None:
        summary.executions[name] = summary.executions.get(name, 0) + 1
        last[0] = x
        if isinstance(x, bytes):
            check_bytes(x, folder)
        else:
            check_text(x)

    try:
        prop()
    except Exception as e:  # noqa: BLE001 - a finding: the last input tried is the shrunk one
        err = "".join(traceback.format_exception_only(type(e), e)).strip()
        summary.findings.append(Finding(name, batch_seed, err[:2000], repr(last[0])[:4000]))


def campaign(seconds: float, seed_: int, folder: Path, examples: int = 200,
             say: Any = lambda s: print(s, file=sys.stderr, flush=True), shrink: bool = True) -> Summary:
    """Batches of `examples` inputs per strategy, round robin, seeds seed_, seed_+1, ... until
    `seconds` have passed (the batch running then completes). A finding is shrunk unless
    shrink is False."""
    strategies: dict[str, st.SearchStrategy[Any]] = {**TEXT_STRATEGIES, "mutated-bytes": mutated_bytes()}
    summary = Summary(seed_)
    t0 = time.monotonic()
    batch = 0
    while time.monotonic() - t0 < seconds:
        for name, strat in strategies.items():
            n_before = len(summary.findings)
            _batch(name, strat, seed_ + batch, examples, summary, folder, shrink)
            for f in summary.findings[n_before:]:
                say(f"finding ({name}, seed {f.seed}): {f.error}\n  input: {f.input[:300]}")
        batch += 1
        summary.batches = batch
        if batch % 5 == 0:
            say(f"{time.monotonic() - t0:.0f} s: {summary.total} executions, {len(summary.findings)} findings")
    summary.seconds = time.monotonic() - t0
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.tools.fuzz_criteria",
                                 description="fuzz campaign over the criteria loader (hypothesis)")
    ap.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    ap.add_argument("--seed", type=int, default=0, help="first seed; batch k uses seed+k (default 0)")
    ap.add_argument("--examples", type=int, default=200, help="inputs per strategy and batch (default 200)")
    ap.add_argument("--out", type=Path, help="write the summary as JSON here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kite-fuzz-criteria-") as tmp:
        s = campaign(args.seconds, args.seed, Path(tmp), args.examples)
    doc = {**asdict(s), "total_executions": s.total}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"criteria fuzz: {s.total} executions in {s.seconds:.0f} s ({s.batches} batches, seed {s.seed}); "
          f"findings: {len(s.findings)}")
    for name, n in sorted(s.executions.items()):
        print(f"  {name}: {n}")
    for f in s.findings:
        print(f"  FINDING {f.strategy} seed {f.seed}: {f.error}")
    return 1 if s.findings else 0


if __name__ == "__main__":
    sys.exit(main())
