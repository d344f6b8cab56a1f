"""The parts of `harness compare`: the `kind: compare` schema, per-kernel hashes of a module's fat
binary, the report writers (verdict table first, JUnit, comment, GitHub annotations), and verify's
SKIP of a compare workload."""

from __future__ import annotations

import io
import math
import struct

import pytest

from harness.builder.fatbin import FATBIN_MAGIC
from harness.compare import identity, report
from harness.compare.revisions import Revision
from harness.compare.sequential import Sequence
from harness.compare.session import Compare
from harness.compare.workload import Outcome, finish_speed
from harness.errors import SchemaErrors
from harness.contract import criteria as C
from harness.contract import looks, schema

BUILDS = ["default", "stub"]
DUMPS = ["h_out", "logits"]
GOOD = """criteria:
  - id: W
    title: t
    kind: compare
    build: stub
    args: [run, --model, "{model}"]
    dumps: [h_out]
    bytes: same
    metric: {field: timings.decode_ms, reduce: median}
    margin: 0.02
    budget: {pairs: 100, seconds: 60}
"""


def load(text: str) -> list[C.Criterion]:
    return schema.load_text(text, "regressions/c.yaml", BUILDS, DUMPS)


def test_a_workload_loads():
    (c,) = load(GOOD)
    s = c.spec
    assert isinstance(s, C.CompareSpec) and c.builds() == ["stub"]
    assert (s.bytes, s.margin, s.budget_pairs, s.budget_seconds, s.block, s.warmups) == ("same", 0.02, 100, 60.0, 4, 1)
    assert s.variant.args == ["run", "--model", "{model}"]


def test_a_workload_may_register_a_tail():
    (c,) = load(GOOD.replace("    margin: 0.02\n", "    margin: 0.02\n    tail: 0.9\n"))
    assert c.spec.tail == 0.9 and load(GOOD)[0].spec.tail is None  # type: ignore[union-attr]


@pytest.mark.parametrize("old, new, message", [
    ("bytes: same", "bytes: maybe", "'maybe' is not allowed; allowed: same, may-change"),
    ("    dumps: [h_out]\n", "", "`bytes: same` needs `dumps`"),
    ("dumps: [h_out]", "dumps: [h_in]", "unknown dump 'h_in'"),
    ("margin: 0.02", "margin: 2", "margin"),
    ("    margin: 0.02\n", "", "missing required key 'margin'"),
    ("budget: {pairs: 100, seconds: 60}", "budget: {seconds: 60}", "missing required key 'pairs'"),
    ("budget: {pairs: 100, seconds: 60}", "budget: {pairs: 100, minutes: 1}", "minutes"),
    ("    margin: 0.02\n", "    margin: 0.02\n    block: 3\n", "3 is odd"),
    ("budget: {pairs: 100, seconds: 60}", "budget: {pairs: 4}\n    block: 8", "more than the budget of 4"),
    ('args: [run, --model, "{model}"]', 'args: "run --model x"', "shell command string is not allowed"),
    ("    margin: 0.02\n", "    margin: 0.02\n    cases: [{n: '1'}]\n", "`cases` is not supported for compare"),
    ("    margin: 0.02\n", "    margin: 0.02\n    tail: 1.5\n", "tail"),
])
def test_bad_workloads_are_refused_with_the_line(old, new, message):
    assert old in GOOD
    with pytest.raises(SchemaErrors) as e:
        load(GOOD.replace(old, new))
    text = "\n".join(e.value.messages)
    assert message in text and "regressions/c.yaml:" in text


def test_registered_default_workloads_load():
    from harness.contract.config import load_config  # noqa: PLC0415 - test-local
    from tests.conftest import REPO  # noqa: PLC0415

    cfg = load_config(REPO)
    ws = schema.load_file(REPO / "regressions" / "compare.yaml", REPO, list(cfg.builds), list(cfg.dumps),
                          list(cfg.env_names))
    assert all(c.kind == "compare" for c in ws)
    # every workload keeps its bytes but CMP7, the speed-only fine margin on CMP3's decode
    assert [c.id for c in ws if c.spec.bytes != "same"] == ["CMP7"] and "CMP3" in {c.id for c in ws}
    gpu = [c for c in ws if "gpu" in c.requires]
    assert {c.model["qtype"] for c in gpu} == {"q8_0", "q4_0"} and len(ws) - len(gpu) == 2



def test_every_registered_workload_s_budget_can_give_a_speed_verdict():
    """A compare workload whose budget allows fewer looks than a verdict needs can never say
    regressed: its speed claim could not fail (LH1-LH3 could not, until 2026-12-04). Each one
    registered allows the looks of a bisect step (alpha / 3), in pairs, a look every `block`:
    looks.unfit, the rule `register` refuses with and compare warns with."""
    from harness.contract.config import load_config  # noqa: PLC0415
    from tests.conftest import REPO  # noqa: PLC0415

    cfg = load_config(REPO)
    short = {}
    for f in sorted((REPO / "regressions").rglob("*.yaml")):
        if f.name == "registry.lock" or "criteria:" not in f.read_text():
            continue
        for c in schema.load_file(f, REPO, list(cfg.builds), list(cfg.dumps), list(cfg.env_names)):
            if why := looks.unfit(c):
                short[c.id] = why
    assert looks.looks_needed(looks.BISECT_ALPHA) == 18 and short == {}

# ---- per-kernel hashes ------------------------------------------------------------------------

def cubin(sections: dict[str, bytes]) -> bytes:
    """A minimal little-endian ELF64 with these sections (and the section-name table)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in sections) + b".shstrtab\0"
    body = b"".join(sections.values())
    data_off = 64
    str_off = data_off + len(body)
    sh_off = str_off + len(names)
    heads = [bytes(64)]
    at, name_at = data_off, 1
    for n, code in sections.items():
        heads.append(struct.pack("<IIQQQQIIQQ", name_at, 1, 6, 0, at, len(code), 0, 0, 16, 0))
        at += len(code)
        name_at += len(n) + 1
    heads.append(struct.pack("<IIQQQQIIQQ", name_at, 3, 0, 0, str_off, len(names), 0, 0, 1, 0))
    hdr = bytearray(64)
    hdr[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", hdr, 0x28, sh_off)
    struct.pack_into("<HHH", hdr, 0x3A, 64, len(heads), len(heads) - 1)
    return bytes(hdr) + body + names + b"".join(heads)


def fatbin(elf: bytes, arch: int = 90, flags: int = 0) -> bytes:
    entry = bytearray(64)
    struct.pack_into("<HHIQ", entry, 0, 2, 0x101, 64, len(elf))
    struct.pack_into("<I", entry, 28, arch)
    struct.pack_into("<Q", entry, 40, flags)
    payload = bytes(entry) + elf
    return b"junk" + struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(payload)) + payload + b"tail"


def test_kernel_hashes_name_the_changed_kernel():
    a = fatbin(cubin({".text.gemv": b"\x01" * 32, ".text.norm": b"\x02" * 16, ".nv.info": b"x"}))
    b = fatbin(cubin({".text.gemv": b"\x01" * 32, ".text.norm": b"\x03" * 16, ".nv.info": b"y"}))
    ka, kb = identity.kernels(a), identity.kernels(b)
    assert set(ka) == {"sm_90 gemv", "sm_90 norm"}
    base = identity.BuildFacts("e", "m1", ka)
    head = identity.BuildFacts("e", "m2", kb)
    assert identity.changes(base, head) == ["module: m1 -> m2", "kernel sm_90 norm: code changed"]
    assert identity.changes(base, base) == []


def test_a_compressed_cubin_is_hashed_whole():
    k = identity.kernels(fatbin(b"compressed bytes", 80, 0x2000))
    assert list(k) == ["sm_80 elf#0 (compressed)"]


# ---- the report ---------------------------------------------------------------------------------

def a_compare() -> Compare:
    rev = Revision("A", "a" * 40, "t" * 40, "aaaaaaaaaa")
    slow = Outcome("S|1", "slow", "regressions/c.yaml", 3, "same", bytes="same", margin=0.02)
    seq = Sequence(0.02, 0.025)
    while seq.decided() is None:
        seq.add([1.1] * 4)
    finish_speed(slow, seq)
    changed = Outcome("B", "bytes", "regressions/c.yaml", 14, "same", bytes="changed", speed="identical build",
                      bytes_detail=[{"dump": "h_out", "identical": False, "reason": "1 of 8 elements differ"}])
    skipped = Outcome("G", "gpu", "regressions/c.yaml", 25, "same", speed="skipped", reason="no GPU: x")
    return Compare(rev, Revision("B", "b" * 40, "u" * 40, "bbbbbbbbbb+dirty", True), [slow, changed, skipped], {},
                   0.05, 2)


def test_report_opens_with_the_verdict_table():
    md = report.render_markdown(a_compare())
    lines = md.splitlines()
    assert lines[0] == "# compare aaaaaaaaaa → bbbbbbbbbb+dirty: FAIL"
    assert [h.strip() for h in lines[2].strip("|").split("|")] == report.HEADERS
    assert "S\\|1" in md and "bytes changed (must stay the same)" in md and "Holm" in md
    assert "working tree with uncommitted changes: dirty" in md
    assert "- speed: skipped: no GPU: x" in md
    # a verdict's reason that starts with it is said once (was "- speed: regressed: regressed: ...")
    c = a_compare()
    c.outcomes[0].reason = "regressed: ratio 1.1000, interval [1.05, 1.15] after 24 pairs"
    md = report.render_markdown(c)
    assert "- speed: regressed: ratio 1.1000" in md and "regressed: regressed" not in md


def test_junit_comment_and_annotations():
    c = a_compare()
    junit = report.render_junit(c)
    assert 'tests="3" failures="2" errors="0" skipped="1"' in junit
    assert report.render_comment(c).startswith("**kite compare** `aaaaaaaaaa` → `bbbbbbbbbb+dirty`: **FAIL**")
    stream = io.StringIO()
    report.publish(c, __import__("pathlib").Path("."), env={"GITHUB_ACTIONS": "true"}, stream=stream)
    notes = stream.getvalue().splitlines()
    assert len(notes) == 2 and notes[0].startswith("::error file=regressions/c.yaml,line=3,")
    assert "bytes changed (must stay the same): `h_out`: 1 of 8 elements differ" in notes[1]


def a_pr_compare() -> Compare:
    """A compare a reviewer reads: a byte change with base/head values, a slowdown, a GPU skip."""
    c = a_compare()
    c.head = Revision("B", "b" * 40, "u" * 40, "bbbbbbbbbb")
    c.bisect_good, c.bisect_bad, c.bisect_linear = "a" * 40, "b" * 40, True
    c.machine = {"cpu": "Test CPU", "cores": 2, "ram_gb": 23.4, "os": "Linux 6.1", "runner": ""}
    c.outcomes[1].bytes_detail = [{"dump": "h_out", "identical": False, "elements": 8, "row_len": 4,
                                   "differing": 2, "first_index": 5, "first_position": 1, "first_element": 1,
                                   "first_values": [1.5, -1.5], "max_abs": 3.0, "max_ulp": 2130706432,
                                   "sign_flips": 1, "max_ulp_same_sign": 3, "nmse": 0.25,
                                   "reason": "2 of 8 elements differ"}]
    return c


LINKS = report.Links(glossary="https://example.invalid/kite/blob/x/docs/GLOSSARY.md",
                     run="https://example.invalid/o/r/actions/runs/7", artifact="https://example.invalid/art/9")


def test_comment_has_what_a_reviewer_acts_on():
    text = report.render_comment(a_pr_compare(), "any", LINKS)
    g = LINKS.glossary
    # verdict words link to the glossary's anchors
    assert f"[regressed]({g}#regressed)" in text and f"[bytes changed]({g}#bytes-changed)" in text
    assert f"[skipped]({g}#skipped)" in text and f"[identical build]({g}#identical)" in text
    assert "+10.0 % (slower)" in text  # the change in percent, in words
    assert "G: no GPU: x" in text  # why a workload was skipped
    # which dump changed, in base/head terms; ULP only where the signs agree
    assert "first at index 5 (row 1, element 1): base 1.5, head -1.5" in text
    assert "max ULP 3 where the signs agree; 1 element(s) change sign" in text and "2130706432" not in text
    assert "machine: Test CPU, 2 cores, 23.4 GiB, Linux 6.1" in text
    assert f"python3 -m harness bisect {'a' * 40} {'b' * 40} --workload B --what bytes" in text
    assert "--workload 'S|1' --what speed" in text  # quoted: runs as printed
    assert f"[run]({LINKS.run}) · [report artifact]({LINKS.artifact})" in text
    assert "How to read this" in text and "Holm" not in text  # a footnote for a reviewer, not a statistician


def test_max_ulp_is_left_out_when_every_sign_changed():
    d = {"dump": "x", "identical": False, "elements": 4, "row_len": 0, "differing": 1, "first_index": 2,
         "first_values": [0.5, -0.5], "max_abs": 1.0, "max_ulp": 2130706432, "sign_flips": 1,
         "max_ulp_same_sign": 0, "nmse": 1.0}
    line = report.byte_line(d)
    assert "ULP" not in line and "1 element(s) change sign" in line and "base 0.5, head -0.5" in line


def test_bisect_from_a_fork_point_and_after_a_fetch():
    c = a_pr_compare()
    c.bisect_linear, c.bisect_fetch = False, True
    cmd = report.bisect_command(c, c.outcomes[1])
    a, b = "a" * 40, "b" * 40
    assert cmd == (f'git fetch origin {a} {b} && python3 -m harness bisect "$(git merge-base {a} {b})" {b} '
                   "--workload B --what bytes")


def test_junit_failure_lines_are_labelled():
    import xml.etree.ElementTree as ET  # noqa: PLC0415 - test-local

    cases = {tc.get("name"): tc for tc in ET.fromstring(report.render_junit(a_pr_compare())).iter("testcase")}
    body = cases["B"].find("failure").text.splitlines()
    assert body[0].startswith("bytes changed (must stay the same): `h_out`: 2 of 8 elements differ")
    assert body[1:] == ["where: regressions/c.yaml:14", f"next step: python3 -m harness bisect {'a' * 40} "
                        f"{'b' * 40} --workload B --what bytes"]
    slow = cases["S|1"].find("failure")
    assert slow.get("message").startswith("speed: regressed") and slow.text.splitlines()[1] == "where: regressions/c.yaml:3"


def test_compare_uses_the_shared_writers():
    """No copy of the console guard, the Markdown escaper, JUnit or the GitHub publisher (issue 44)."""
    import inspect  # noqa: PLC0415 - test-local

    from harness.compare import cli  # noqa: PLC0415

    src = inspect.getsource(report) + inspect.getsource(cli)
    assert not hasattr(cli, "Out") and "def _cell" not in src and "quoteattr" not in src
    assert "GITHUB_STEP_SUMMARY" not in src and "os.dup2" not in src


def test_step_summary_gets_the_report(tmp_path):
    summary = tmp_path / "summary.md"
    report.publish(a_compare(), tmp_path, env={"GITHUB_STEP_SUMMARY": str(summary)}, stream=io.StringIO())
    assert summary.read_text().startswith("# compare aaaaaaaaaa → bbbbbbbbbb+dirty: FAIL")


def test_fail_on_bytes_passes_a_speed_regression_only():
    c = a_compare()
    assert c.failed("any") and c.failed("bytes")  # B's bytes changed
    c.outcomes.pop(1)
    assert c.failed("any") and not c.failed("bytes")


def test_json_has_no_infinite_numbers():
    o = Outcome("X", "x", "f", 1, "may-change")
    doc = o.to_json()
    assert doc["half_width"] is None and doc["ratio"] is None and not math.isnan(doc["p_value"])


def test_verify_skips_a_compare_workload(tmp_path):
    from harness.run.probes import Probes  # noqa: PLC0415 - test-local
    from harness.run.runner import Context, evaluate  # noqa: PLC0415

    (c,) = load(GOOD)
    ctx = Context(cfg=None, report_dir=tmp_path, probes=Probes(gpu_info=lambda: None),  # type: ignore[arg-type]
                  ensure_build=None, model_path=None)  # type: ignore[arg-type]
    out = evaluate(ctx, c)
    assert (out.verdict, out.reason) == ("SKIP", "a compare workload: run by `python3 -m harness compare BASE [HEAD]` "
                                                 "(docs/COMPARE.md)")


def test_bisect_judges_speed_by_compare_s_one_rule():
    """A bisect step is bad on speed exactly when compare fails on it: one rule (sequential.verdict),
    where the margin makes a change shown smaller than it equivalent. Before, bisect asked more
    (median >= 1 + margin), so a regression compare failed on (ratio 1.01) was a good commit."""
    from harness.compare.bisect import is_bad  # noqa: PLC0415 - test-local

    for speed in ("regressed", "improved", "equivalent", "inconclusive", "identical build"):
        for ratio in (0.9, 1.0, 1.01, 1.03):
            o = Outcome("X", "x", "f", 1, "may-change", bytes="same", speed=speed, ratio=ratio, margin=0.02)
            assert is_bad(o, "speed") == o.failed() == is_bad(o, "any"), (speed, ratio)
    changed = Outcome("X", "x", "f", 1, "may-change", bytes="changed", speed="improved", ratio=0.9, margin=0.02)
    assert (is_bad(changed, "any"), is_bad(changed, "speed"), is_bad(changed, "bytes")) == (True, False, True)


class FakeRun:
    """A workload runner whose times alternate so that the interval stays wide."""

    def __init__(self, spec: C.CompareSpec):
        self.spec = spec
        self.crit = type("Crit", (), {"id": "W"})()
        self.n = 0

    def timed(self, key: str, label: str) -> float:
        self.n += 1
        return 10.0 + (3.0 if self.n % 3 else -3.0)


def test_seconds_budget_ends_timing_inconclusive():
    from harness.compare.workload import sequential  # noqa: PLC0415 - test-local

    (c,) = load(GOOD)
    run = FakeRun(c.spec)  # budget: 100 pairs or 60 s
    ticks = iter(range(0, 10_000, 25))  # 25 s a look
    out = Outcome("W", "t", "f", 1, "same", margin=0.02)
    lines: list[str] = []
    seq = sequential(run, out, 0.05, lines.append, clock=lambda: float(next(ticks)))  # type: ignore[arg-type]
    assert seq.pairs == 12 and seq.decided() is None  # looks at 25, 50, 75 s: the third is past 60 s
    assert len(lines) == 3 and lines[0].startswith("  [W] 4 pairs: ratio ")
    assert run.n == 2 + 2 * 12  # one warm-up a side, then the pairs


def test_default_cache_is_per_project(tmp_path, monkeypatch):
    """Two clones do not share checkouts (git worktrees of one clone) unless told to."""
    from harness.compare.revisions import CACHE_ENV, default_cache  # noqa: PLC0415 - test-local

    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    a, b = default_cache(tmp_path / "one" / "kite"), default_cache(tmp_path / "two" / "kite")
    assert a != b and a.parent == b.parent == tmp_path / "xdg" / "kite" / "compare"
    assert a.name.startswith("kite-") and default_cache(tmp_path / "one" / "kite") == a
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "shared"))  # shared on purpose
    assert default_cache(tmp_path / "one" / "kite") == default_cache(tmp_path / "two" / "kite") == tmp_path / "shared"



def test_a_timed_run_keeps_its_log_only_when_it_fails(tmp_path):
    """A compare times hundreds of runs: their logs are written only for one that failed."""
    from types import SimpleNamespace  # noqa: PLC0415 - test-local

    from harness.compare.workload import Runner  # noqa: PLC0415
    from harness.run.runner import CriterionFail  # noqa: PLC0415

    run = object.__new__(Runner)
    run.crit, run.report_dir, run.runs = SimpleNamespace(id="W", timeout_s=30), tmp_path, 0
    run.cfgs = {"base": None}
    run.prepared = {"base": SimpleNamespace(argv=["sh", "-c", 'echo out; echo err >&2; exit "$0"'], env={})}
    run._run("base", ["0"], "pair1.base", keep_log=False)
    assert not (tmp_path / "logs").exists()
    with pytest.raises(CriterionFail, match=r"pair2\.base: engine .*\(log: logs/W/pair2\.base\.\*\)"):
        run._run("base", ["3"], "pair2.base", keep_log=False)
    logs = tmp_path / "logs" / "W"
    assert sorted(x.name for x in logs.iterdir()) == ["pair2.base.cmd", "pair2.base.stderr", "pair2.base.stdout"]
    assert (logs / "pair2.base.stdout").read_text() == "out\n" and (logs / "pair2.base.stderr").read_text() == "err\n"


def test_interval_wording_says_what_it_means():
    """The half-width is not a detection guarantee (a change that size is found about half the
    time); the interval is named by its level. Before: "smallest detectable change"."""
    from harness.compare.session import _speed_reason  # noqa: PLC0415 - test-local

    c = a_compare()
    slow = c.outcomes[0]
    reason = _speed_reason(slow)
    assert "97.5 % anytime interval" in reason and "half-width" in reason and "about half the time" in reason
    md = report.render_markdown(c)
    assert "smallest detectable" not in md + reason and "interval half-width" in md


@pytest.mark.parametrize("shape", [[4, "16"], [-1], 7])
def test_a_malformed_dump_shape_fails_the_workload_as_verify_fails_it(tmp_path, shape):
    """compare reads a dump's shape by verify's one rule (dumps.shape): a shape that is not a list
    of non-negative integers is an error, never taken as "no shape" (which skipped the size check)."""
    import json  # noqa: PLC0415 - test-local
    from pathlib import Path  # noqa: PLC0415
    from types import SimpleNamespace  # noqa: PLC0415

    from harness.compare.workload import Runner  # noqa: PLC0415
    from harness.contract.config import DumpSpec  # noqa: PLC0415
    from harness.run.runner import CriterionFail  # noqa: PLC0415

    def write_dump(key, extra, label):
        out = Path(extra[1])
        out.mkdir(parents=True)
        (out / "meta.json").write_text(json.dumps({"dims": {"v": shape}}))
        (out / "v.f32").write_bytes(b"\0" * 64)

    run = object.__new__(Runner)
    run.spec = SimpleNamespace(dumps=["v"], variant=SimpleNamespace(preconditions={}))
    run.cfgs = {"base": SimpleNamespace(dump_flag="--dump", meta_file="meta.json",
                                        dumps={"v": DumpSpec(name="v", file="v.f32", dtype="f32", shape="dims.v")})}
    run.prepared = {"base": SimpleNamespace(work=tmp_path)}
    run._run = write_dump
    with pytest.raises(CriterionFail, match=r"base: meta.json dims.v = .* is not a list of non-negative integers"):
        run.dumps("base")
