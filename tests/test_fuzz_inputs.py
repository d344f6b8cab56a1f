"""Property tests (hypothesis) for everything the harness reads that someone else wrote: criteria
YAML, regressions/registry.lock, meta.json, the dump files, and a report.json to resume.

The property is always the same: any input gives a verdict (PASS/FAIL/SKIP) or one of the
harness's own errors (SchemaErrors, HarnessError) with a message; never another exception, and
never a criterion that ends as "internal error". Example counts are bounded so that the whole
file runs in a few seconds.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from harness.contract import criteria as C  # noqa: E402
from harness.contract import registry  # noqa: E402
from harness.report import document as report  # noqa: E402
from harness.run import runner  # noqa: E402
from harness.contract import schema  # noqa: E402
from harness.builder.cmake import BuildResult, PartResult  # noqa: E402
from harness.process import ProcResult  # noqa: E402
from harness.errors import HarnessError, SchemaErrors  # noqa: E402
from harness.run.probes import Probes  # noqa: E402
from harness.tools import fuzz_criteria as F  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = (REPO / "tests" / "data" / "example_suite.yaml").read_text()
BUILDS = ["default", "stub", "gpu"]
DUMPS = ["h_out", "logits"]

# Examples per test: 100 in CI (a few seconds, the same examples every run); set
# KITE_FUZZ_EXAMPLES=N for a longer exploration (docs/RELIABILITY.md has the figures).
N_EXAMPLES = int(os.environ.get("KITE_FUZZ_EXAMPLES", "100"))
FAST = settings(max_examples=N_EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
SLOW = settings(FAST, max_examples=max(1, N_EXAMPLES * 2 // 5))

# every key the schema knows (so that generated documents get past "unknown key" often), the
# words of its values, and documents made of them: shared with the criteria fuzz campaign
KEYS, WORDS, yaml_values = F.KEYS, F.WORDS, F.values


def _load(text: str) -> None:
    """Load criteria text: a list of criteria or SchemaErrors; anything else propagates."""
    try:
        crits = schema.load_text(text, "regressions/fuzz.yaml", BUILDS, DUMPS)
    except SchemaErrors as e:
        assert e.messages and all(isinstance(m, str) and m.startswith("regressions/fuzz.yaml") for m in e.messages)
        return
    for c in crits:
        assert c.id and c.kind in C.KINDS and c.digest
        # what verify does next with a loaded criterion must not raise either
        registry.status([], c)
        c.builds()


# ---- criteria YAML -------------------------------------------------------------------------

@FAST
@given(st.text(max_size=300))
def test_criteria_any_text(text):
    _load(text)


@FAST
@given(st.binary(max_size=200))
@example(b"\x80")  # found: UnicodeDecodeError escaped load_file (now a SchemaErrors "not UTF-8 text")
def test_criteria_any_bytes_as_file(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("crit") / "bytes.yaml"
    p.write_bytes(data)
    try:
        schema.load_file(p, p.parent, BUILDS, DUMPS)
    except SchemaErrors as e:
        assert e.messages


@FAST
@given(yaml_values)
def test_criteria_generated_documents(doc):
    _load(yaml.safe_dump(doc, allow_unicode=True))


@FAST
@given(st.lists(yaml_values, min_size=1, max_size=3), st.sampled_from(C.KINDS))
def test_criteria_generated_criteria(bodies, kind):
    crits = []
    for i, body in enumerate(bodies):
        c = {"id": f"F{i}", "title": "t", "kind": kind}
        if isinstance(body, dict):
            c.update({str(k): v for k, v in body.items()})
        crits.append(c)
    _load(yaml.safe_dump({"version": 1, "criteria": crits}, allow_unicode=True))


@st.composite
def mutated_example(draw):
    lines = EXAMPLE.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "duplicate", "replace", "insert", "indent"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "replace" and lines[i]:
            j = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:j] + draw(st.sampled_from(list(":-[]{}&*!|>'\"#%@` \t") + WORDS)) + lines[i][j + 1:]
        elif op == "insert":
            lines.insert(i, draw(st.sampled_from(["  - id: X1", "    kind: run", "    variants: []", "<<: *x",
                                                  "    args: *run_args", "    compare: {dumps: [nope]}",
                                                  "    timeout_s: -1", "\t", "---", "...", "? [a]", "- &a [*a]"])))
        elif op == "indent":
            lines[i] = "  " + lines[i]
    return "\n".join(lines) + "\n"


@SLOW
@given(mutated_example())
def test_criteria_mutated_example(text):
    _load(text)


def test_example_suite_still_loads():
    assert len(schema.load_text(EXAMPLE, "example.yaml", BUILDS, DUMPS)) >= 5


# ---- registry.lock ---------------------------------------------------------------------------

def _some_criteria() -> list[C.Criterion]:
    return schema.load_text(EXAMPLE, "regressions/example.yaml", BUILDS, DUMPS)


field_text = st.one_of(st.sampled_from(["X1", "X2", "register", "amend", '"why"', "", "\"", "null", "[1]",
                                        "sha256:" + "0" * 64, "2026-01-01T00:00:00Z", "regressions/x.yaml"]),
                       st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=20))


@FAST
@given(st.lists(st.lists(field_text, min_size=0, max_size=8).map("\t".join), max_size=8))
def test_registry_any_lines(lines):
    text = "".join(ln + "\n" for ln in lines)
    try:
        entries = registry.parse(text)
    except HarnessError as e:
        assert str(e).startswith("registry.lock:")
        return
    crits = _some_criteria()
    for c in crits:
        st_ = registry.status(entries, c)
        assert st_.state in ("registered", "unregistered", "changed", "suspect", "withdrawn", "elsewhere")
        st_.reason()
    registry.plan(entries, crits, ["X1"], None)
    registry.plan(entries, crits, ["X1"], "a reason")


def _registry_oracle(text: str) -> list[tuple[str, ...]] | str:
    """What registry.parse must give, worked out independently: the entries' fields, or the
    'registry.lock:N:' prefix of the first bad line. The header's two lines, then entry lines
    each ending in LF; no byte-order mark, CR, comment or blank line."""
    if text.startswith("\ufeff"):
        return "registry.lock:1:"
    rows = text.split("\n")
    header = registry.HEADER.split("\n")[:2]
    out = []
    for n, line in enumerate(rows, 1):
        if n == len(rows) and line == "":
            break
        if "\r" in line or n == len(rows):
            return f"registry.lock:{n}:"
        if n <= 2 and not out and line == header[n - 1]:
            continue
        if line.strip() == "" or line[:1] == "#":
            return f"registry.lock:{n}:"
        parts = line.split("\t")
        if len(parts) != 6:
            return f"registry.lock:{n}:"
        try:
            reason = json.loads(parts[5])
        except ValueError:
            return f"registry.lock:{n}:"
        out.append((*parts[:5], str(reason)))
    return out


@FAST
@given(st.one_of(st.text(max_size=400),
                 st.lists(st.lists(field_text, min_size=5, max_size=7).map("\t".join), max_size=6).map("\n".join)))
def test_registry_any_text(text):
    """Any text: the entries it holds, or an error naming the first bad line, as the oracle says."""
    want = _registry_oracle(text)
    try:
        got = [(e.id, e.file, e.digest, e.time, e.event, e.reason) for e in registry.parse(text)]
    except HarnessError as e:
        assert isinstance(want, str) and str(e).startswith(want), (str(e), want)
        return
    assert got == want


_REG_DIR = Path(tempfile.mkdtemp(prefix="kite-fuzz-registry-"))
atexit.register(shutil.rmtree, _REG_DIR, True)


@FAST
@given(st.binary(max_size=120))
@example(b"\x80")  # found: UnicodeDecodeError escaped registry.load
def test_registry_any_bytes_as_file(data):
    """UTF-16 (a byte order mark), binary bytes (a NUL) and bytes that are not UTF-8 are refused as
    such; any other file loads as its text parses."""
    path = _REG_DIR / "bytes.lock"
    path.write_bytes(data)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        with pytest.raises(HarnessError, match=r"^registry.lock: UTF-16 text \(byte order mark\)"):
            registry.load(path)
        return
    if b"\0" in data:
        with pytest.raises(HarnessError, match=r"^registry.lock: binary data \(NUL byte at offset \d+\), not text$"):
            registry.load(path)
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(HarnessError, match=r"^registry.lock: not UTF-8 text \(byte \d+"):
            registry.load(path)
        return
    want = _registry_oracle(text)
    try:
        got = [(e.id, e.file, e.digest, e.time, e.event, e.reason) for e in registry.load(path)]
    except HarnessError as e:
        assert isinstance(want, str) and str(e).startswith(want), (str(e), want)
        return
    assert got == want


@settings(FAST, max_examples=max(1, N_EXAMPLES * 3 // 10))  # each example appends with fsync
@given(st.text(max_size=60))
@example("\x85")  # found: splitlines() split the line at U+0085 / U+2028: the registry became unreadable
@example("a\u2028b")
def test_registry_reason_round_trip(reason):
    """Whatever the reason text, an appended line parses back to the same reason."""
    path = _REG_DIR / "registry.lock"
    path.unlink(missing_ok=True)
    c = _some_criteria()[0]
    registry.append(path, [(c, "amend", reason)])
    (e,) = registry.load(path)
    assert (e.id, e.digest, e.event, e.reason) == (c.id, c.digest, "amend", reason)


# ---- meta.json and dumps through a criterion ------------------------------------------------

from conftest import ENGINE_YAML, write_engine  # noqa: E402  (the fake repository's engine.yaml, one copy)

_ROOT = Path(tempfile.mkdtemp(prefix="kite-fuzz-inputs-"))
atexit.register(shutil.rmtree, _ROOT, True)


def _cfg():
    from harness.contract.config import load_config

    (_ROOT / "configs").mkdir(exist_ok=True)
    (_ROOT / "configs" / "engine.yaml").write_text(ENGINE_YAML)
    return load_config(_ROOT)


def _ctx(report_dir: Path) -> runner.Context:
    cfg = _cfg()
    bins = _ROOT / "fakebin" / "default"
    b = BuildResult("default", str(bins), str(bins / "kite"), str(bins / "libkite_cuda.so"),
                    PartResult("prebuilt"), PartResult("skipped"))
    return runner.Context(cfg=cfg, report_dir=report_dir, probes=Probes(gpu_info=lambda: None),
                          ensure_build=lambda name: b, model_path=lambda spec: _ROOT / "models" / "tiny.gguf",
                          progress=lambda s: None)


class _FakeRuns:
    """Stands in for harness.process.run_process: each call 'runs' and leaves the next planned
    outputs (meta.json, dumps, stdout, exit status) where the engine would."""

    def __init__(self, plans: list[dict[str, Any]]):
        self.plans = plans
        self.i = 0

    def __call__(self, argv, env=None, *, timeout=120.0, log_prefix=None, **kw):
        plan = self.plans[self.i % len(self.plans)]
        self.i += 1
        if "--dump" in argv:
            d = Path(argv[argv.index("--dump") + 1])
            d.mkdir(parents=True, exist_ok=True)
            for name, data in plan.get("files", {}).items():
                (d / name).write_bytes(data)
        rc = plan.get("rc", 0)
        return ProcResult(list(argv), dict(env or {}), rc, plan.get("signal"), plan.get("timed_out", False), 0.01,
                          0.01, 1.0, None, None, stdout=plan.get("stdout", ""), stderr=plan.get("stderr", ""))


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64), st.floats(allow_nan=False),
              st.text(max_size=8)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=6), kids, max_size=4)),
    max_leaves=20)
shape_values = st.one_of(json_values, st.lists(st.integers(-3, 40), max_size=3),
                         st.lists(st.one_of(st.integers(0, 8), st.text(max_size=2), st.floats(), st.none()),
                                  max_size=3))


@st.composite
def meta_docs(draw):
    """meta.json texts: mostly plausible objects with hostile parts, sometimes not JSON at all."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=40))
    if kind == 1:
        return json.dumps(draw(json_values)).encode()
    doc = {"shapes": {"h_out": draw(shape_values), "logits": draw(shape_values)},
           "backend": draw(st.one_of(json_values, st.fixed_dictionaries({"compiled": st.booleans(),
                                                                          "bound": json_values,
                                                                          "available": st.booleans()}))),
           "counters": draw(st.dictionaries(st.sampled_from(["gpu_steps", "graph_replays", "stream_steps"]),
                                            json_values, max_size=3)),
           "timings": {"request_ms": draw(st.one_of(json_values, st.lists(st.floats(), max_size=4)))}}
    text = json.dumps(doc)
    if kind == 2:
        text = text[: draw(st.integers(0, len(text)))]  # truncated
    return text.encode()


float_dumps = st.one_of(st.binary(max_size=64),
                        st.lists(st.floats(width=32), max_size=16).map(lambda xs: struct.pack(f"<{len(xs)}f", *xs)))

EQUIV = """\
criteria:
  - id: Q1
    title: fuzzed meta and dumps
    kind: equivalence
    args: [run, --model, "{model}", --prompt, "1,2"]
    variants:
      - {name: a, preconditions: {backend.compiled: true}}
      - {name: b, build: gpu}
    compare: {dumps: [h_out, logits], MODE}
"""


def _outcome(crit_text: str, plans: list[dict[str, Any]], monkeypatch, tmp: Path) -> runner.Outcome:
    (crit,) = schema.load_text(crit_text, "regressions/q.yaml", BUILDS, DUMPS)
    monkeypatch.setattr(runner, "run_process", _FakeRuns(plans))
    out = runner.evaluate(_ctx(tmp), crit)
    assert out.verdict in ("PASS", "FAIL", "SKIP"), out
    assert "internal error" not in out.reason, out.reason
    assert out.reason
    return out


@SLOW
@given(st.lists(st.fixed_dictionaries({"files": st.fixed_dictionaries(
    {"meta.json": meta_docs(), "h_out.f32": float_dumps, "logits.f32": float_dumps})}), min_size=2, max_size=2),
    st.sampled_from(["mode: memcmp", "mode: tolerance, max_ulp: 2", "mode: tolerance, max_abs: 0.1, nmse: 0.001"]))
@example(plans=[{"files": {"meta.json": b"\x80", "h_out.f32": b"", "logits.f32": b""}}] * 2,
         mode="mode: memcmp")  # found: non-UTF-8 meta.json was an "internal error"
@example(plans=[{"files": {"meta.json": b'{"shapes": {"h_out": [""]}, "backend": {"compiled": true}}',
                            "h_out.f32": b"", "logits.f32": b""}}] * 2,
         mode="mode: memcmp")  # found: a shape of strings was an "internal error" (int(""))
@example(plans=[{"files": {"meta.json": b'{"backend": {"compiled": true}}', "h_out.f32": b"\0\0\x80?",
                            "logits.f32": b"\0\0\x80?"}}] * 2, mode="mode: memcmp")  # the oracle's PASS
@example(plans=[{"files": {"meta.json": b'{"backend": {"compiled": true}}', "h_out.f32": b"\0\0\x80?",
                            "logits.f32": b""}}] * 2, mode="mode: memcmp")  # an empty dump: vacuous, FAIL
def test_equivalence_any_meta_and_dumps(monkeypatch, tmp_path_factory, plans, mode):
    out = _outcome(EQUIV.replace("MODE", mode), plans, monkeypatch, tmp_path_factory.mktemp("eq"))
    want = _equivalence_oracle(plans, mode)
    assert want is None or out.verdict == want, (want, out.reason)


_NOT_JSON = object()


def _json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:
        return _NOT_JSON


def _equivalence_oracle(plans: list[dict[str, Any]], mode: str) -> str | None:
    """The verdict where it follows from the inputs alone: FAIL for a meta.json that is not JSON, a
    failed precondition (A needs backend.compiled true), a dump that is empty or not whole float32,
    a NaN, or (memcmp) any byte that differs; PASS for identical, well-formed outputs without shapes."""
    a, b = (p["files"] for p in plans)
    meta_a, meta_b = _json(a["meta.json"]), _json(b["meta.json"])
    if meta_a is _NOT_JSON or meta_b is _NOT_JSON:
        return "FAIL"
    backend = meta_a.get("backend") if isinstance(meta_a, dict) else None
    if not (isinstance(backend, dict) and backend.get("compiled") is True):
        return "FAIL"
    dumps = [a["h_out.f32"], a["logits.f32"], b["h_out.f32"], b["logits.f32"]]
    if any(len(d) % 4 or not d for d in dumps):
        return "FAIL"
    if any(x != x for d in dumps for x in struct.unpack(f"<{len(d) // 4}f", d)):
        return "FAIL"
    same = dumps[0] == dumps[2] and dumps[1] == dumps[3]
    if "memcmp" in mode and not same:
        return "FAIL"
    no_shapes = all(not isinstance(m, dict) or m.get("shapes") in (None, {}) for m in (meta_a, meta_b))
    return "PASS" if same and no_shapes else None


@st.composite
def dump_pairs(draw):
    """Well-formed runs of A and B (valid meta.json with matching shapes) and what B does to the
    bytes: nothing, one flipped byte, or a NaN."""
    rows, e, v = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    finite = st.floats(allow_nan=False, width=32)
    h = struct.pack(f"<{rows * e}f", *draw(st.lists(finite, min_size=rows * e, max_size=rows * e)))
    lg = struct.pack(f"<{rows * v}f", *draw(st.lists(finite, min_size=rows * v, max_size=rows * v)))
    meta = json.dumps({"shapes": {"h_out": [rows, e], "logits": [rows, v]}, "backend": {"compiled": True}}).encode()
    a = {"meta.json": meta, "h_out.f32": h, "logits.f32": lg}
    b = dict(a)
    change, which = draw(st.sampled_from(["same", "flip", "nan"])), draw(st.sampled_from(["h_out.f32", "logits.f32"]))
    if change == "flip":
        data = bytearray(b[which])
        data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
        b[which] = bytes(data)
    elif change == "nan":
        k = draw(st.integers(0, len(b[which]) // 4 - 1))
        b[which] = b[which][:4 * k] + struct.pack("<f", float("nan")) + b[which][4 * k + 4:]
    return [{"files": a}, {"files": b}], change


@SLOW
@given(dump_pairs())
def test_equivalence_verdict_oracle(monkeypatch, tmp_path_factory, pair):
    """Identical bytes PASS; one flipped byte FAILs; a NaN FAILs."""
    plans, change = pair
    out = _outcome(EQUIV.replace("MODE", "mode: memcmp"), plans, monkeypatch, tmp_path_factory.mktemp("eqo"))
    assert out.verdict == ("PASS" if change == "same" else "FAIL"), (change, out.reason)
    if change == "nan":
        assert "NaN in B" in out.reason, out.reason


@SLOW
@given(st.integers(1, 40), st.integers(0, 3), st.sampled_from(["h_out.f32", "logits.f32"]))
def test_truncated_dump_fails_with_reason(monkeypatch, tmp_path_factory, rows, cut, which):
    """A dump cut short (the engine died while writing it) is a FAIL naming the truncation."""
    e, v = 4, 6
    meta = json.dumps({"shapes": {"h_out": [rows, e], "logits": [rows, v]}, "backend": {"compiled": True}}).encode()
    h = struct.pack(f"<{rows * e}f", *([0.5] * rows * e))
    lg = struct.pack(f"<{rows * v}f", *([0.25] * rows * v))
    good = {"meta.json": meta, "h_out.f32": h, "logits.f32": lg}
    bad = dict(good)
    bad[which] = good[which][: len(good[which]) - 1 - cut]
    out = _outcome(EQUIV.replace("MODE", "mode: memcmp"), [{"files": good}, {"files": bad}], monkeypatch,
                   tmp_path_factory.mktemp("tr"))
    assert out.verdict == "FAIL"
    assert "truncated" in out.reason or "not a whole number" in out.reason, out.reason


AB = """\
criteria:
  - id: T1
    title: fuzzed timings
    kind: ab_timing
    args: [run, --model, "{model}"]
    a: {name: a}
    b: {name: b, preconditions: {counters.gpu_steps: ">=0"}}
    metric: {field: timings.request_ms, reduce: REDUCE}
    pairs: 3
    pass_if: "ci_lower >= 1.0"
    bootstrap: {resamples: 100, seed: 1}
"""


good_timing_meta = st.fixed_dictionaries({
    "timings": st.fixed_dictionaries({"request_ms": st.lists(st.floats(0.5, 50.0), min_size=2, max_size=5)}),
    "counters": st.fixed_dictionaries({"gpu_steps": st.integers(0, 9)})}).map(json.dumps)


@SLOW
@given(st.lists(st.fixed_dictionaries({"stdout": st.one_of(meta_docs().map(lambda b: b.decode("utf-8", "replace")),
                                                           good_timing_meta)}),
                min_size=1, max_size=3), st.sampled_from(C.REDUCERS))
@example(plans=[{"stdout": json.dumps({"timings": {"request_ms": [2.0, 3.0]}, "counters": {"gpu_steps": 1}})}],
         reduce="rest_median")  # the oracle's PASS
def test_ab_timing_any_meta(monkeypatch, tmp_path_factory, plans, reduce):
    """Any output gives a verdict; where the oracle knows it, the right one: the first run's
    stdout not a JSON object FAILs (not JSON at all: in the first warm-up), and A/A on one well-formed output gives ratio 1, which passes
    'ci_lower >= 1.0' exactly."""
    out = _outcome(AB.replace("REDUCE", reduce), plans, monkeypatch, tmp_path_factory.mktemp("ab"))
    first = _json(plans[0]["stdout"].encode())
    if first is _NOT_JSON:
        assert out.verdict == "FAIL" and out.reason.startswith("warmup1.A: stdout is not the JSON"), out.reason
    if not isinstance(first, dict):
        assert out.verdict == "FAIL", out.reason
    if all(p == plans[0] for p in plans) and _well_formed_timing(first):
        assert out.verdict == "PASS" and "median a/b 1.0000" in out.reason, out.reason


def _well_formed_timing(doc: Any) -> bool:
    """B's precondition holds and every reducer gives a positive, finite time."""
    if not isinstance(doc, dict) or not isinstance(doc.get("counters"), dict) \
            or not isinstance(doc.get("timings"), dict):
        return False
    steps, ms = doc["counters"].get("gpu_steps"), doc["timings"].get("request_ms")
    number = (int, float)
    return (isinstance(steps, number) and not isinstance(steps, bool) and steps >= 0 and isinstance(ms, list)
            and len(ms) >= 2 and all(isinstance(x, number) and not isinstance(x, bool) and 0 < x < 1e300 for x in ms))


RUN = """\
criteria:
  - id: R1
    title: fuzzed run output
    kind: run
    runs:
      - name: info
        args: [info, --json]
        expect: {exit: 0, passes_min: 1, must_match: ["ok"], json: {cuda.bound: true, cuda.search.0.how: "~KITE"}}
"""


GOOD_INFO = json.dumps({"cuda": {"bound": True, "search": [{"how": "KITE_CUDA_LIB"}]}})


@SLOW
@given(st.lists(st.fixed_dictionaries({
    "stdout": st.one_of(st.text(max_size=60), meta_docs().map(lambda b: b.decode("utf-8", "replace")),
                        st.sampled_from(["3 passed, 0 failed\n", "x passed, -1 failed", "9" * 40 + " passed, 0 failed",
                                         GOOD_INFO])),
    "stderr": st.one_of(st.text(max_size=30), st.sampled_from(["ok\n1 passed, 0 failed\n"])),
    "rc": st.one_of(st.none(), st.integers(-300, 300)),
    "signal": st.one_of(st.none(), st.sampled_from(["SIGSEGV", "SIGKILL"])),
    "timed_out": st.booleans()}), min_size=1, max_size=1))
@example(plans=[{"stdout": GOOD_INFO, "stderr": "ok\n1 passed, 0 failed\n", "rc": 0, "signal": None,
                 "timed_out": False}])
def test_run_any_output(monkeypatch, tmp_path_factory, plans):
    """Any output gives a verdict: FAIL when the engine did not exit 0 or its stdout is not the
    JSON the expectations read; PASS for output that meets every expectation."""
    out = _outcome(RUN, plans, monkeypatch, tmp_path_factory.mktemp("run"))
    (p,) = plans
    ended_ok = p["rc"] == 0 and p["signal"] is None and not p["timed_out"]
    if not ended_ok or not isinstance(_json(p["stdout"].encode()), dict):
        assert out.verdict == "FAIL", out.reason
    elif p["stdout"] == GOOD_INFO and p["stderr"].startswith("ok\n1 passed, 0 failed"):
        assert out.verdict == "PASS", out.reason


# ---- report.json given to --resume -----------------------------------------------------------

@SLOW
@given(st.one_of(st.binary(max_size=60), json_values.map(lambda v: json.dumps(v).encode()),
                 st.fixed_dictionaries({"schema": st.just(report.SCHEMA),
                                        "results": st.one_of(json_values, st.lists(json_values, max_size=3))},
                                       optional={"summary": json_values, "resumed": json_values,
                                                 "builds": json_values}).map(lambda d: json.dumps(d).encode())))
@example(b"null")  # found: AttributeError in Report.load
@example(b'{"schema": "kite-report/1", "results": []}')  # found: KeyError 'builds'
@example(b'{"schema": "kite-report/1", "results": [], "builds": {"": null}}')  # found: TypeError in the Markdown
def test_resume_any_report_json(tmp_path_factory, data):
    """verify --resume DIR with a damaged report.json: a HarnessError, or a run that keeps going."""
    from harness.cli import main

    root = tmp_path_factory.mktemp("resume")
    (root / "configs").mkdir()
    (root / "configs" / "engine.yaml").write_text(ENGINE_YAML)
    (root / "regressions").mkdir()
    (root / "regressions" / "s.yaml").write_text("criteria:\n  - {id: A1, title: t, kind: artifact, "
                                                 "files: [{path: '{root}/nothing', exists: false}]}\n")
    write_engine(root / "fakebin" / "default")
    rdir = root / "reports" / "old"
    rdir.mkdir(parents=True)
    (rdir / "report.json").write_bytes(data)
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["--root", str(root), "verify", "--exploratory", "--no-build", "--resume", str(rdir)])
    assert "internal error" not in err.getvalue(), err.getvalue()[-400:]
    doc = _json(data)
    if not (isinstance(doc, dict) and doc.get("schema") == report.SCHEMA):
        assert rc == 2 and "report.json" in err.getvalue(), (rc, err.getvalue()[-400:])
    elif rc == 2:
        assert "--resume: cannot read" in err.getvalue() and "damaged" in err.getvalue(), err.getvalue()[-400:]
    else:
        after = json.loads((rdir / "report.json").read_text())
        assert after["status"] == "complete" and [r["id"] for r in after["results"]] == ["A1"]
        assert rc == (0 if after["results"][0]["verdict"] == "PASS" else 1)
        if doc.get("results") == []:
            assert after["results"][0]["verdict"] == "PASS" and rc == 0

