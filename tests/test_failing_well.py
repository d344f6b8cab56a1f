"""Failing well (issue: a broken build, an interrupt, each reported once, where the user looks):
set-ups with a real compile error planted in a copy of the engine's source."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import alive, register_command

REPO = Path(__file__).resolve().parent.parent

needs_cc = pytest.mark.skipif(not (shutil.which("cmake") and (shutil.which("cc") or shutil.which("gcc"))),
                              reason="needs cmake and a host C compiler")


def project_copy(tmp_path: Path) -> Path:
    """The project's engine source, configuration and criteria, copied (no build, no models)."""
    root = tmp_path / "kite"
    shutil.copytree(REPO / "native", root / "native", ignore=shutil.ignore_patterns("build", "llamacpp", "fuzz"))
    shutil.copytree(REPO / "configs", root / "configs")
    shutil.copytree(REPO / "regressions", root / "regressions")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def plant_compile_error(root: Path) -> None:
    f = root / "native" / "engine" / "vec_math.c"
    f.write_text(f.read_text() + "\nint kite_planted_error(void) { return undeclared_planted_name; }\n")


def harness(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "--root", str(root), *args], cwd=root,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


@needs_cc
def test_broken_engine_fails_only_run_once_and_stops_builds(tmp_path):
    """`verify --only D4 E8a` with the engine not compiling: exit 1 (was: SKIP "no GPU", exit 0);
    the compiler error is printed once; D4 and E8a FAIL with one line pointing at the build; the
    module and test module are not started."""
    root = project_copy(tmp_path)
    plant_compile_error(root)
    r = harness(root, "verify", "--only", "D4", "E8a")
    assert r.returncode == 1, r.stderr[-3000:]
    err = r.stderr
    # D4 and E8a need the build default, which answers the GPU probe: its first error once, then
    # one line per FAIL (D4's stub build is not started: with the probe's build failed, D4 FAILs
    # pointing at that build whatever its other builds would do)
    lines = err.splitlines()
    first = [ln for ln in lines if ln.startswith("    native/engine/vec_math.c:")]
    assert len(first) == 1 and "undeclared_planted_name" in first[0], err
    assert err.count("undeclared_planted_name") == 1 + 2, err
    assert "build default failed" in err
    import json

    [rdir] = [d for d in (root / "reports").iterdir() if d.name != "latest"]
    doc = json.loads((rdir / "report.json").read_text())
    for cid in ("D4", "E8a"):
        res = next(x for x in doc["results"] if x["id"] == cid)
        assert res["verdict"] == "FAIL"
        assert re.match(r"build (stub|default) failed \(engine\): native/engine/vec_math.c:\d+: ", res["reason"]), res
        assert "build_errors" not in res["details"] and res["kept"] is None
    b = doc["builds"]["default"]
    assert b["engine"]["status"] == "failed"
    assert b["module"]["status"] == "skipped" and "not started" in b["module"]["reason"]
    assert not (root / "build" / "default" / "testmod").exists() and not (root / "build" / "default" / "cuda").exists()
    assert "kept dumps" not in err


# ---- the process tree ---------------------------------------------------------------------------

# a build job that moves to a process group of its own, as ninja puts every job it starts
_JOB = """\
import os, sys, time
os.setpgid(0, 0)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def _wait_for(what, seconds: float = 120.0) -> bool:
    """Poll until what() holds (an event, not a guessed delay); False if it never did."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.05)
    return False


def slow_build_project(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose engine build runs a job that hangs in its own process group."""
    root = tmp_path / "proj"
    (root / "native").mkdir(parents=True)
    (root / "configs").mkdir()
    (root / "regressions").mkdir()
    pidfile = tmp_path / "job.pid"
    (root / "native" / "job.py").write_text(_JOB)
    (root / "native" / "main.c").write_text("int main(void) { return 0; }\n")
    (root / "native" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(kite C)\n"
        f'add_custom_target(slow ALL COMMAND "{sys.executable}" "${{CMAKE_SOURCE_DIR}}/job.py" "{pidfile}")\n'
        "add_executable(kite main.c)\nadd_dependencies(kite slow)\n")
    (root / "configs" / "engine.yaml").write_text(
        "engine: {binary: kite, module: libkite_cuda.so}\nbuilds:\n  default:\n    engine: {source: native}\n"
        "models: {dir: models, default: {path: models/none.gguf}}\nbuild: {jobs: 1}\n")
    (root / "regressions" / "suite.yaml").write_text(
        "criteria:\n  - {id: P1, title: runs, kind: run, runs: [{args: [selftest]}]}\n")
    return root, pidfile


@needs_cc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "parent-death", "SIGKILL"])
def test_interrupt_during_build_ends_the_whole_tree(tmp_path, how):
    """A signal to the harness (or its parent's death) while a build job that left the build's
    process group runs: the harness ends that job before it exits (was: the job went on), and the
    report says "interrupted" and what had run; reports/latest does not move to it."""
    import json
    import signal

    root, pidfile = slow_build_project(tmp_path)
    cmd = [sys.executable, "-m", "harness", "--root", str(root), "verify", "--exploratory"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    harness_pid_file = tmp_path / "harness.pid"
    if how == "parent-death":
        parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                                   f"p = subprocess.Popen({cmd!r})\n"
                                   f"open({str(harness_pid_file)!r}, 'w').write(str(p.pid))\ntime.sleep(600)"],
                                  cwd=root, env=env, start_new_session=True, stderr=subprocess.DEVNULL)
    else:
        # the signal's default disposition in the harness, whatever this suite inherited: started from
        # a background job, SIGINT is ignored, and an ignored signal stays ignored across exec
        parent = subprocess.Popen(cmd, cwd=root, env=env, start_new_session=True, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        harness_pid_file.write_text(str(parent.pid))
    job = 0
    try:
        assert _wait_for(pidfile.exists), "the build job never started"
        job = int(pidfile.read_text())
        harness_pid = int(harness_pid_file.read_text())
        if how == "parent-death":
            os.kill(parent.pid, signal.SIGKILL)
            parent.wait(timeout=30)
            assert _wait_for(lambda: not alive(harness_pid)), "the harness outlived its parent"
        elif how == "SIGKILL":  # nothing runs in the harness: the build's tree guard ends the tree
            os.kill(parent.pid, signal.SIGKILL)
            parent.wait(timeout=30)
            assert _wait_for(lambda: not alive(job)), f"build job {job} outlived the killed harness"
            return
        else:
            os.kill(parent.pid, getattr(signal, how))
            _, err = parent.communicate(timeout=120)
            assert parent.returncode == 128 + getattr(signal, how), err
        # the harness ends the tree before it exits: no waiting for the job to go
        assert not alive(job), f"build job {job} outlived the harness"
    finally:
        for pid in (job, parent.pid):
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
    [rdir] = list((root / "reports").glob("2*"))
    doc = json.loads((rdir / "report.json").read_text())
    assert doc["status"] == "interrupted" and doc["not_run"] == ["P1"]
    md = (rdir / "report.md").read_text()
    assert "status **interrupted**" in md and "- **interrupted** by SIG" in md and "what had run: no criterion" in md
    assert not (root / "reports" / "latest").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_engine_helper_in_its_own_session_is_ended(fake_repo, tmp_path):
    """An engine that leaves a helper in a session of its own (setsid): the helper is ended once
    the engine has been reaped (was: it went on, free to write into the finished report)."""
    import signal

    helper = tmp_path / "helper.pid"
    fake_repo.criteria("criteria:\n  - {id: H1, title: helper, kind: run, runs: [{args: [selftest], env: "
                       f"{{FAKE_SPAWN_HELPER: '{helper}'}}}}]}}\n")
    pid = 0
    try:
        assert fake_repo.verify("--exploratory") == 0
        pid = int(helper.read_text())
        assert not alive(pid), "the engine's helper outlived the run"
    finally:
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)


@needs_cc
def test_no_build_names_a_stale_engine(tmp_path):
    """`--no-build` after the engine's source changed: the build is "stale", compared by its stamp
    (was: "up-to-date"); with no build at all, "not built"."""
    import json

    from harness.contract.config import load_config
    from harness.verify import existing_build

    root = tmp_path / "proj"
    (root / "native").mkdir(parents=True)
    (root / "configs").mkdir()
    (root / "native" / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(kite C)\n"
                                                    "add_executable(kite main.c)\n")
    (root / "native" / "main.c").write_text("int main(void) { return 0; }\n")
    (root / "configs" / "engine.yaml").write_text(
        "engine: {binary: kite, module: libkite_cuda.so}\nbuilds:\n  default:\n    engine: {source: native}\n"
        "build: {jobs: 1}\n")
    cfg = load_config(root)
    b = existing_build(cfg, "default")
    assert b.engine.status == "failed" and "not built" in b.engine.reason
    r = harness(root, "build", "default")
    assert r.returncode == 0, r.stderr
    assert existing_build(cfg, "default").engine.status == "up-to-date"
    (root / "native" / "main.c").write_text("int main(void) { return 1; }\n")
    assert existing_build(cfg, "default").engine.status == "stale"
    (root / "regressions").mkdir()
    (root / "regressions" / "s.yaml").write_text(
        "criteria:\n  - {id: N1, title: runs, kind: run, runs: [{args: [x], expect: {exit: 0}}]}\n")
    r = harness(root, "verify", "--no-build", "--exploratory")
    assert r.returncode == 0, r.stderr  # the old binary still runs, as asked
    assert "build default: engine stale (its sources, options or tools changed" in r.stderr
    doc = json.loads((root / "reports" / "latest" / "report.json").read_text())
    assert doc["builds"]["default"]["engine"]["status"] == "stale"
    # the report's header says its verdicts are of that build, not of the commit it names
    md = (root / "reports" / "latest" / "report.md").read_text()
    assert "- **built from other sources**: default's engine (stale:" in md.split("\n\n")[1]


@needs_cc
def test_compile_error_annotations_come_first_and_are_capped(tmp_path):
    """Under GitHub Actions, one compile error in native/engine/vec_math.c: the first annotation
    is at that file and line (was: 11 at regressions/*.yaml lines, the C file's cut by GitHub's
    cap of 10); at most 10 error annotations; a short step summary that names the full report."""
    root = project_copy(tmp_path)
    plant_compile_error(root)
    summary = tmp_path / "summary.md"
    r = harness(root, "verify", env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 1, r.stderr[-3000:]
    ann = [ln for ln in r.stdout.splitlines() if ln.startswith("::error")]
    assert ann and ann[0].startswith("::error file=native/engine/vec_math.c,line="), ann
    assert "undeclared_planted_name" in ann[0]
    assert len(ann) <= 10
    assert sum("file=native/engine/vec_math.c" in a for a in ann) == 1  # one cause, however many builds hit it
    # every criterion failed for that one error: one more annotation, at the first of them
    assert len(ann) == 2 and ann[1].startswith("::error file=regressions/") and "one cause" in ann[1], ann
    text = summary.read_text()
    assert "native/engine/vec_math.c:" in text and "Full report: `reports/" in text
    assert len(text.encode()) < 8192, len(text.encode())


# ---- hints --------------------------------------------------------------------------------------

def test_register_hints_run_as_printed(fake_repo, tmp_path):
    """An unregistered, then a changed criterion: the FAIL line carries file:line and a command that
    runs as printed, in the form the harness was run (was: "run `harness register`", no such
    command, no file; and plain `register` is refused for a changed one)."""
    f = fake_repo.criteria("criteria:\n  - {id: H1, title: hinted, kind: run, runs: [{args: [selftest]}]}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=fake_repo.root, env=env, capture_output=True, text=True, timeout=300)

    r = run([sys.executable, "-m", "harness", "verify"])
    assert r.returncode == 1 and "    FAIL at regressions/suite.yaml:2: not pre-registered" in r.stderr, r.stderr
    hint = register_command(r.stderr)
    assert hint[:3] == [sys.executable, "-m", "harness"] or hint[1:3] == ["-m", "harness"]
    assert hint[3:] == ["register", "regressions/suite.yaml"]
    assert run(hint).returncode == 0
    assert run([sys.executable, "-m", "harness", "verify"]).returncode == 0
    f.write_text(f.read_text().replace("title: hinted", "title: hinted again"))
    r = run([sys.executable, "-m", "harness", "verify"])
    assert r.returncode == 1, r.stderr
    hint = register_command(r.stderr)
    assert hint[3:7] == ["register", "regressions/suite.yaml", "--amend", "H1"] and "--reason" in hint
    done = run(hint)
    assert done.returncode == 0, done.stderr
    assert run([sys.executable, "-m", "harness", "verify"]).returncode == 0


def test_refused_register_names_the_amend_command(fake_repo):
    """`register` of a changed criterion is refused with a command that amends it, as printed."""
    import shlex

    f = fake_repo.criteria("criteria:\n  - {id: H2, title: one, kind: run, runs: [{args: [selftest]}]}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "harness", "register", "regressions/suite.yaml"]
    assert subprocess.run(cmd, cwd=fake_repo.root, env=env, capture_output=True, timeout=120).returncode == 0
    f.write_text(f.read_text().replace("title: one", "title: two"))
    r = subprocess.run(cmd, cwd=fake_repo.root, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    hint = r.stderr.rsplit("if the changes are intended: ", 1)[1].strip()
    argv = shlex.split(hint)
    assert argv[-5:-1] == ["regressions/suite.yaml", "--amend", "H2", "--reason"], hint
    done = subprocess.run(argv, cwd=fake_repo.root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "amended    H2" in done.stdout, done.stderr


# ---- A/B on a CPU, nox ------------------------------------------------------------------------

def test_a_registered_ab_criterion_runs_on_a_cpu():
    """At least one registered A/B criterion needs no GPU and runs on a CUDA-free build (was: all
    seven needed a GPU, so `nox -s ab` on a CPU machine could only skip)."""
    from harness.contract import registry
    from harness.contract.config import load_config
    from harness.contract.depends import dependency_digests
    from harness.verify import default_files, load_criteria

    cfg = load_config(REPO)
    entries = registry.load(REPO / "regressions" / "registry.lock")
    cpu = [c for c in load_criteria(cfg, default_files(cfg)) if c.kind == "ab_timing"
           and not {"gpu", "nvcc"} & set(c.requires)
           and all(cfg.builds[b].module is None and cfg.builds[b].engine.options.get("KITE_CUDA") == "OFF"
                   for b in c.builds())]
    assert cpu, "no A/B criterion runs on a CPU-only machine"
    assert any(registry.status(entries, c, dependency_digests(cfg, c)).ok for c in cpu)


def test_nox_list_shows_whole_sentences():
    """`nox -l` prints the first line of each session's docstring: it must be a whole sentence
    (was: cut mid-sentence for verify, matrix, llamacpp, oracle, mutation)."""
    import ast

    tree = ast.parse((REPO / "noxfile.py").read_text())
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list):
        doc = ast.get_docstring(fn, clean=False) or ""
        first, _, rest = doc.strip().partition("\n")
        assert first.rstrip().endswith((".", ")")) and first.count("(") == first.count(")"), (fn.name, first)
        assert not rest or rest.startswith("\n") or not rest.strip(), (fn.name, "summary line runs on")


@pytest.mark.parametrize("req,package", [("valgrind", "valgrind"), ("wine", "wine wine64"), ("cmake", "cmake"),
                                         ("host_cxx", "g++"), ("mingw", "gcc-mingw-w64-x86-64")])
def test_skip_for_a_missing_tool_names_its_package(monkeypatch, req, package):
    """A tool missing from PATH: the SKIP reason says what to install (was: "valgrind not found")."""
    from harness.run import probes

    monkeypatch.setattr(probes.shutil, "which", lambda name: None)
    ok, why = probes.Probes(gpu_info=lambda: None).check(req)
    assert not ok and why.endswith(f"(install: apt-get install -y {package})"), why


# ---- reports ------------------------------------------------------------------------------------

LONG = "no GPU: planted for the test, a long reason that many criteria share, as cudart's does on a CPU machine"


def test_report_reads_well(fake_repo, monkeypatch):
    """Titles in the summary table; a long reason shared by several rows written once; a
    criterion's time without its build's; paths relative to the project; the project's own name
    and "not a git repository" (was: "kite verify report", commit "?")."""
    import time as time_mod

    import harness.verify as V

    cfg = fake_repo.root / "configs" / "engine.yaml"
    cfg.write_text(cfg.read_text().replace("engine:\n", "engine:\n  name: toy\n", 1))
    fake_repo.criteria("criteria:\n" + "".join(
        f"  - {{id: G{i}, title: gpu thing {i}, kind: run, requires: [gpu], runs: [{{args: [selftest]}}]}}\n"
        for i in range(3)) + "  - {id: S1, title: stub selftest, kind: run, build: stub, runs: [{args: [selftest]}]}\n"
                             "  - {id: S2, title: model missing, kind: run, build: stub, "
                             "runs: [{args: [run, --model, '{model}']}], model: {path: models/none.gguf}}\n")
    # a build that takes 100 s on a fake clock: the criteria's times must not include it
    real_clock, real_build, offset = time_mod.perf_counter, V.build, [0.0]
    monkeypatch.setattr(time_mod, "perf_counter", lambda: real_clock() + offset[0])

    def slow_build(*a, **k):
        offset[0] += 100.0
        return real_build(*a, **k)

    monkeypatch.setattr(V, "build", slow_build)
    from harness.cli import _verify_opts, make_parser

    opts = _verify_opts(make_parser().parse_args(["--root", str(fake_repo.root), "verify", "--exploratory"]),
                        fake_repo.config())
    opts.probe_overrides["gpu"] = (False, LONG)
    assert V.verify(fake_repo.config(), opts, lambda s: None) == 1
    doc = fake_repo.report()
    assert all(r["duration_s"] < 50 for r in doc["results"]), [(r["id"], r["duration_s"]) for r in doc["results"]]
    md = (fake_repo.newest() / "report.md").read_text()
    assert md.startswith("# toy verify report\n")
    assert "- commit: not a git repository" in md
    head = next(x for x in md.splitlines() if x.startswith("| id "))
    assert [c.strip() for c in head.strip("|").split("|")][:2] == ["id", "title"]
    assert next(x for x in md.splitlines() if x.startswith("| G0 ")).split("|")[2].strip() == "gpu thing 0"
    skip_reason = next(r["reason"] for r in doc["results"] if r["id"] == "G0")
    assert len(skip_reason) > 60 and md.count(skip_reason) == 1, md  # written once, as a note
    assert str(fake_repo.root) not in md and str(fake_repo.root) not in json.dumps(doc["builds"])
    s2 = next(r for r in doc["results"] if r["id"] == "S2")
    assert s2["verdict"] == "FAIL" and s2["reason"].startswith("model ")


def test_version_names_the_package(capsys):
    from harness import __version__
    from harness.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"kite-harness {__version__}"


@pytest.mark.parametrize("no_color,tty,coloured", [("", True, True), ("1", True, False), ("", False, False)])
def test_verdicts_in_colour_on_a_terminal(monkeypatch, no_color, tty, coloured):
    """PASS/FAIL/SKIP in colour on a terminal, never with NO_COLOR set or into a file."""
    import io

    from harness import cli

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    out = Stream()
    monkeypatch.setattr(cli.sys, "stderr", out)
    monkeypatch.setenv("NO_COLOR", no_color)
    cli._say("    FAIL at regressions/x.yaml:3: broken")
    text = out.getvalue()
    assert ("\033[31mFAIL\033[0m" in text) == coloured and ("\033[" in text) == coloured
    assert text.replace("\033[31m", "").replace("\033[0m", "") == "    FAIL at regressions/x.yaml:3: broken\n"


def test_builds_nothing_left_to_run_needs_are_not_started(fake_repo, monkeypatch):
    """A run needs only its criteria's builds (was: the default build always, and each other build
    inside its first criterion). A resume needs them too: a kept result must have run on the same
    binaries (issue 35, High 3); a build whose inputs did not change does not start CMake."""
    import harness.verify as V

    fake_repo.criteria("criteria:\n  - {id: N1, title: stub only, kind: run, build: stub, runs: [{args: [selftest]}]}\n")
    started: list[str] = []
    real = V.build
    monkeypatch.setattr(V, "build", lambda cfg, name, **k: started.append(name) or real(cfg, name, **k))
    assert fake_repo.verify("--exploratory") == 0
    assert started == ["stub"]
    started.clear()
    assert fake_repo.verify("--exploratory", "--resume", str(fake_repo.newest())) == 0
    assert started == ["stub"]


def test_a_build_that_only_skipping_criteria_need_is_not_started(fake_repo, monkeypatch):
    """A GPU criterion on a machine without a GPU SKIPs without its build, even one that would fail
    (was: builds first built it, and its failure turned the SKIP into a FAIL: on CI, which has nvcc
    but no cuBLAS, llamacpp-cuda failed to configure and 10 GPU criteria of llama.cpp FAILed)."""
    import harness.verify as V

    fake_repo.criteria("criteria:\n"
                       "  - {id: N1, title: stub only, kind: run, build: stub, runs: [{args: [selftest]}]}\n"
                       "  - {id: N2, title: needs a GPU, kind: run, build: gpu, requires: [gpu],\n"
                       "     runs: [{args: [selftest]}]}\n")
    shutil.rmtree(fake_repo.root / "fakebin" / "gpu")  # the gpu build would fail
    started: list[str] = []
    real = V.build
    monkeypatch.setattr(V, "build", lambda cfg, name, **k: started.append(name) or real(cfg, name, **k))
    assert fake_repo.verify("--exploratory") == 0
    assert "gpu" not in started
    assert fake_repo.result("N2")["verdict"] == "SKIP" and fake_repo.result("N1")["verdict"] == "PASS"


# ---- install docs -------------------------------------------------------------------------------

def test_readme_install_runs_as_root_and_with_sudo():
    """The README's system packages command: apt-get update, -y, g++, a form that runs as root (no
    sudo there) and with sudo, the platform CI runs; the toy engine's README installs the harness
    from a checkout (was: sudo only, no update, no -y, no g++, Debian 12; `pip install kite-harness`,
    which no package index has). Exit statuses through nox are written down."""
    import re

    readme = (REPO / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    assert "apt-get update" in install and "install -y" in install and " g++ " in install, install
    assert '[ "$(id -u)" = 0 ] || echo sudo' in install and "sudo apt-get" not in install
    runs_on = set(re.findall(r"runs-on: ubuntu-(\d+\.\d+)", (REPO / ".github/workflows/kite.yml").read_text()))
    assert runs_on and all(f"Ubuntu {v}" in readme.split("## Install", 1)[1][:600] for v in runs_on)
    assert "Through nox every failure is exit status **1**" in readme
    toy = (REPO / "examples" / "toy-engine" / "README.md").read_text()
    assert "pip install kite-harness" not in toy and "pip install ." in toy


def test_other_hints_name_a_real_command(fake_repo, capsys):
    """`report` with no report yet and `ab` without an id: the command they suggest exists (was:
    `harness verify`, `harness ab ID`, and there is no command `harness`)."""
    from harness.cli import main

    assert main(["--root", str(fake_repo.root), "report"]) == 2
    assert main(["--root", str(fake_repo.root), "ab"]) == 2
    err = capsys.readouterr().err
    assert "`harness " not in err and ": harness ab" not in err, err
    assert err.count(" -m harness --root ") == 2 or err.count(" -m harness verify") + err.count(" -m harness ab") == 2
