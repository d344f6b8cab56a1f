"""A matrix entry's criteria go through the loop `verify` uses (harness/run/suite.py): registry
first, then the runner, with the entry's builds, its environment, and its launcher (wine for the
MinGW build: an argv prefix and Z:\\ paths)."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.builder import cmake as B
from harness.matrix.entry import EntryRun, win_path
from harness.matrix.run import entry_criteria
from harness.contract.gate import Gate
from harness.matrix.spec import Entry, Module
from harness.run.runner import NATIVE, Launcher
from harness.run.suite import Models
from harness.contract import registry
from harness.verify import existing_build, load_criteria

CRITERIA = """\
criteria:
  - id: EQ
    title: stub and module absent agree
    kind: equivalence
    args: [run, --model, "{model}", --prompt, "1,2,3", --steps, "2"]
    variants:
      - {name: stub, build: stub}
      - {name: absent, layout: engine_only, env: {"{env.module_path}": ""}}
    compare: {dumps: [h_out, logits]}
  - id: ST
    title: selftest
    kind: run
    runs: [{args: [selftest], expect: {passes_min: 1}}]
"""

# stands in for wine: Z:\ paths back to this machine's, then the program
FAKE_WINE = f"""#!{sys.executable}
import os, sys
args = [a[2:].replace("\\\\", "/") if a.startswith("Z:") else a for a in sys.argv[1:]]
os.execv(args[0], args)
"""


class FakeRunner:
    """What entry_criteria needs of an EntryRunner, over the fake repository's prebuilt engines."""

    def __init__(self, cfg, runner: str, launcher: Launcher):
        self.cfg = cfg
        self.ent = Entry("e", "", "mingw" if runner == "wine" else "gcc", {}, True, Module(), False, runner, (),
                         ("regressions/m.yaml",), (), {}, None)
        self._launcher = launcher
        self.said: list[str] = []
        self.say = self.said.append

    def ensure_build(self, name: str):
        return existing_build(self.cfg, name)

    def gpu_info(self):
        return None

    def launcher(self) -> Launcher:
        return self._launcher

    def base_env(self) -> dict[str, str]:
        return {"FAKE_REQUEST_MS": "3"}


def setup(fake_repo, register: bool = True):
    cfg_file = fake_repo.root / "configs" / "engine.yaml"
    cfg_file.write_text(cfg_file.read_text().replace("  meta_file:", "  env: {module_path: KITE_CUDA_LIB}\n"
                                                                      "  meta_file:"))
    p = fake_repo.criteria(CRITERIA, "m.yaml")
    cfg = fake_repo.config()
    reg = registry.load(fake_repo.registry)
    if register:
        reg = [registry.Entry(c.id, c.file, c.digest, "2026-12-01T00:00:00Z", "register", "") for c in load_criteria(cfg, [p])]
    return cfg, reg


def run(fake_repo, runner: FakeRunner, reg, entry_run: EntryRun | None = None, exploratory: bool = False):
    out = fake_repo.root / "reports" / "m"
    return entry_criteria(runner.cfg, runner, entry_run or EntryRun("e", "PASS", ""), out, Gate(reg), exploratory,
                          Models(runner.cfg, runner.say)), out


def test_entry_criteria_through_the_verify_loop(fake_repo):
    cfg, reg = setup(fake_repo)
    results, out = run(fake_repo, FakeRunner(cfg, "native", NATIVE), reg)
    by_id = {r.id: r for r in results}
    assert set(by_id) == {"e/EQ", "e/ST"}
    assert by_id["e/EQ"].verdict == "PASS", by_id["e/EQ"].reason
    assert by_id["e/EQ"].title == "e: stub and module absent agree" and by_id["e/EQ"].registration == "registered"
    assert by_id["e/ST"].verdict == "PASS" and by_id["e/ST"].log_dir == "criteria/e/logs/ST"
    runs = by_id["e/EQ"].details["runs"]
    assert runs[1]["env_overlay"] == {"FAKE_REQUEST_MS": "3", "KITE_CUDA_LIB": ""}  # entry env + role


def test_unregistered_criteria_fail_unless_exploratory(fake_repo):
    cfg, _ = setup(fake_repo, register=False)
    results, _ = run(fake_repo, FakeRunner(cfg, "native", NATIVE), [])
    assert {r.verdict for r in results} == {"FAIL"} and "not pre-registered" in results[0].reason
    assert results[0].reproduce == "python -m harness matrix e"
    results, _ = run(fake_repo, FakeRunner(cfg, "native", NATIVE), [], exploratory=True)
    assert {r.verdict for r in results} == {"PASS"} and all(r.exploratory for r in results)


def test_skipped_entry_skips_its_criteria(fake_repo):
    cfg, reg = setup(fake_repo)
    results, _ = run(fake_repo, FakeRunner(cfg, "native", NATIVE), reg, EntryRun("e", "SKIP", "wine not available"))
    assert [(r.verdict, r.reason) for r in results] == [("SKIP", "wine not available")] * 2


def test_missing_criterion_reference_fails(fake_repo):
    cfg, reg = setup(fake_repo)
    runner = FakeRunner(cfg, "native", NATIVE)
    runner.ent = Entry("e", "", "gcc", {}, True, Module(), False, "native", (), ("regressions/m.yaml#NOPE",), (), {},
                       None)
    results, _ = run(fake_repo, runner, reg)
    assert [(r.id, r.verdict, r.reason) for r in results] == [
        ("e/regressions/m.yaml#NOPE", "FAIL", "regressions/m.yaml has no criterion NOPE")]


def test_wine_launcher_prefix_and_paths(fake_repo, tmp_path):
    wine = tmp_path / "fakewine"
    wine.write_text(FAKE_WINE)
    wine.chmod(0o755)
    cfg, reg = setup(fake_repo)
    results, _ = run(fake_repo, FakeRunner(cfg, "wine", Launcher([str(wine)], win_path)), reg)
    eq = next(r for r in results if r.id == "e/EQ")
    assert eq.verdict == "PASS", eq.reason
    argv = eq.details["runs"][0]["argv"]
    assert argv[0] == str(wine)
    assert argv[argv.index("--model") + 1].startswith("Z:\\") and argv[argv.index("--dump") + 1].startswith("Z:\\")
    assert win_path(Path("/a/b c/d")) == "Z:\\a\\b c\\d"


def test_build_placeholder_is_the_entrys_build_folder(fake_repo, tmp_path):
    """`{build}` names the folder the entry's build was made in (build/<entry>/), not
    build/<criterion's build name>/ (E1 read build/default/ in every matrix entry)."""
    cfg, _ = setup(fake_repo)
    p = fake_repo.criteria("""\
criteria:
  - id: A
    title: the entry's CMake cache
    kind: artifact
    files: [{path: "{build}/engine/CMakeCache.txt", text_match: ["^ENTRY=e$"]}]
""", "a.yaml")
    reg = [registry.Entry(c.id, c.file, c.digest, "2026-12-01T00:00:00Z", "register", "") for c in load_criteria(cfg, [p])]
    entry_dir = fake_repo.root / "build" / "e"
    (entry_dir / "engine").mkdir(parents=True)
    (entry_dir / "engine" / "CMakeCache.txt").write_text("ENTRY=e\n")
    runner = FakeRunner(cfg, "native", NATIVE)
    runner.ent = Entry("e", "", "gcc", {}, True, Module(), False, "native", (), ("regressions/a.yaml",), (), {}, None)
    runner.ensure_build = lambda name: B.BuildResult(name, str(entry_dir / "bin"), "", "", B.PartResult("built"),
                                                     B.PartResult("skipped"))
    (result,) = run(fake_repo, runner, reg)[0]
    assert result.verdict == "PASS", result.reason
