"""Faults during a run, each with the verdict it must give and proof that no finished result is
lost: the engine killed mid-run (SIGKILL from outside), hanging (timeout), writing a truncated
dump; the report folder not writable (EROFS at the start, ENOSPC in the middle); the harness
itself killed with SIGKILL between criteria and at staged moments (resume keeps what was
finished; report.json is never half-written).

These use the fake engine (tests/fake_engine.py) through a throw-away repository (conftest's
fake_repo), so they take a few seconds.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import alive
from harness.report import document as report_mod
from harness.errors import HarnessError

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX signals and process groups")

RUN = 'args: [run, --model, "{model}", --prompt, "1,2,3", --steps, "2"]'


def _suite(*crits: str) -> str:
    return "criteria:\n" + "".join(crits)


def _pass(cid: str) -> str:
    return f"""
  - id: {cid}
    title: two identical runs
    kind: equivalence
    {RUN}
    variants: [{{name: a}}, {{name: b}}]
    compare: {{dumps: [h_out, logits]}}
"""


def _faulty(cid: str, env: str, timeout: str = "") -> str:
    return f"""
  - id: {cid}
    title: one run misbehaves
    kind: equivalence
    {RUN}
    {timeout}
    variants: [{{name: good}}, {{name: bad, env: {env}}}]
    compare: {{dumps: [h_out, logits]}}
"""


def _pids_running(marker: str) -> list[int]:
    """Our own fake engine processes: their command line names this test's folder."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and "fake" in cmd and state != "Z":
            out.append(int(d.name))
    return out


def _kill_ours(marker: str) -> None:
    for pid in _pids_running(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# ---- the engine misbehaves ---------------------------------------------------------------------

def test_engine_killed_mid_run(fake_repo):
    """The engine hangs in a run; something outside (the OOM killer, a user) sends SIGKILL.
    The criterion is FAIL naming the signal; the criteria before and after still PASS."""
    f = fake_repo.criteria(_suite(_pass("K0"), _faulty("K1", "{FAKE_HANG: '1'}", "timeout_s: 60"), _pass("K2")))
    fake_repo.register(f)
    marker = str(fake_repo.root / "fakebin")
    killed: list[int] = []

    def killer():
        deadline = time.time() + 30
        while time.time() < deadline and not killed:
            for pid in _pids_running(marker):
                try:  # a process listed a moment ago may have exited since (the passing runs)
                    cmd = Path(f"/proc/{pid}/environ").read_bytes()
                except OSError:
                    continue
                if b"FAKE_HANG=1" in cmd:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    break
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    t0 = time.time()
    rc = fake_repo.verify()
    t.join()
    assert killed, "the hanging engine was never seen"
    assert time.time() - t0 < 30
    assert rc == 1
    assert fake_repo.result("K1")["verdict"] == "FAIL"
    assert "SIGKILL" in fake_repo.result("K1")["reason"]
    assert [fake_repo.result(c)["verdict"] for c in ("K0", "K2")] == ["PASS", "PASS"]
    assert fake_repo.report()["status"] == "complete"


def test_engine_hanging_times_out(fake_repo):
    """A hanging engine is killed at the criterion's timeout (its whole process group), FAIL
    'timed out'; the run goes on."""
    f = fake_repo.criteria(_suite(_faulty("H1", "{FAKE_HANG: '1'}", "timeout_s: 2"), _pass("H2")))
    fake_repo.register(f)
    t0 = time.time()
    rc = fake_repo.verify()
    assert time.time() - t0 < 20
    assert rc == 1
    r = fake_repo.result("H1")
    assert r["verdict"] == "FAIL" and "timed out" in r["reason"], r["reason"]
    assert fake_repo.result("H2")["verdict"] == "PASS"
    time.sleep(0.2)
    assert not _pids_running(str(fake_repo.root / "fakebin")), "the hung engine outlived its timeout"


@pytest.mark.parametrize("which", ["h_out", "logits"])
def test_engine_writes_truncated_dump(fake_repo, which):
    """A dump cut to half its size: FAIL naming the truncation, never a comparison of what is
    there (which would be a prefix and could match)."""
    f = fake_repo.criteria(_suite(_faulty("T1", f"{{FAKE_TRUNCATE: {which}}}"), _pass("T2")))
    fake_repo.register(f)
    assert fake_repo.verify() == 1
    r = fake_repo.result("T1")
    assert r["verdict"] == "FAIL"
    assert "truncated" in r["reason"] and which in r["reason"], r["reason"]
    assert fake_repo.result("T2")["verdict"] == "PASS"
    # the evidence is kept in the report
    assert (fake_repo.reports / "latest" / "failed" / "T1").is_dir()


def test_engine_crashes_and_writes_no_meta(fake_repo):
    f = fake_repo.criteria(_suite(_faulty("C1", "{FAKE_CRASH: SIGSEGV}"), _faulty("C2", "{FAKE_NO_META: '1'}"),
                                  _pass("C3")))
    fake_repo.register(f)
    assert fake_repo.verify() == 1
    assert "SIGSEGV" in fake_repo.result("C1")["reason"]
    assert "meta.json missing" in fake_repo.result("C2")["reason"]
    assert fake_repo.result("C3")["verdict"] == "PASS"


# ---- the report folder is not writable -------------------------------------------------------------

def _run_cli(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run([sys.executable, "-m", "harness", "--root", str(root), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_report_folder_read_only_at_start(fake_repo, monkeypatch):
    """EROFS when the report folder is created: exit 2 with a one-line error, no traceback."""
    f = fake_repo.criteria(_suite(_pass("W1")))
    fake_repo.register(f)
    real_mkdir = Path.mkdir

    def erofs(self, *a, **k):
        if str(self).startswith(str(fake_repo.reports)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", erofs)
    from harness.cli import main

    rc = main(["--root", str(fake_repo.root), "verify"])
    assert rc == 2


def test_report_folder_read_only_cli(fake_repo):
    """The same through the command line, with a real unwritable place: a regular file where the
    reports folder should be (root ignores permission bits, so chmod would not do)."""
    f = fake_repo.criteria(_suite(_pass("W1")))
    fake_repo.register(f)
    fake_repo.reports.write_text("not a folder")
    r = _run_cli(fake_repo.root, "verify")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "harness: error: cannot create a report folder" in r.stderr, r.stderr


def test_disk_full_mid_run_loses_nothing(fake_repo, monkeypatch):
    """ENOSPC after the first criterion's result is written: verify stops with a clear error,
    report.json still holds the finished result (whole, valid JSON), no temporary file is left;
    `verify --resume` once there is room keeps that result and runs the rest."""
    f = fake_repo.criteria(_suite(_pass("D1"), _pass("D2"), _pass("D3")))
    fake_repo.register(f)
    real = report_mod.atomic_write
    state = {"full": False}

    def writer(path, text):
        if state["full"]:
            # what a full disk does: the temporary file is created, the write fails
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
            tmp.write_text(text[: len(text) // 3])
            try:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))
            finally:
                tmp.unlink()
        real(path, text)
        if path.name == "junit.xml" and json.loads((path.parent / "report.json").read_text())["results"]:
            state["full"] = True

    monkeypatch.setattr(report_mod, "atomic_write", writer)
    from harness.cli import main

    rc = main(["--root", str(fake_repo.root), "verify"])
    assert rc == 2
    latest = fake_repo.newest()
    doc = json.loads((latest / "report.json").read_text())
    assert [r["id"] for r in doc["results"]] == ["D1"]
    assert doc["results"][0]["verdict"] == "PASS"
    d1_finished = doc["results"][0]["finished"]
    assert not [p for p in latest.iterdir() if ".tmp" in p.name]

    monkeypatch.setattr(report_mod, "atomic_write", real)
    log = fake_repo.root / "engine.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    assert main(["--root", str(fake_repo.root), "verify", "--resume"]) == 0
    doc = json.loads((latest / "report.json").read_text())
    assert [(r["id"], r["verdict"]) for r in doc["results"]] == [("D1", "PASS"), ("D2", "PASS"), ("D3", "PASS")]
    assert doc["results"][0]["finished"] == d1_finished  # kept, not re-run
    assert doc["status"] == "complete" and doc["resumed"]
    assert len(log.read_text().splitlines()) == 4 + 1  # D2 and D3: two runs each, plus one `info`


def test_report_write_error_is_harness_error(tmp_path, monkeypatch):
    rep = report_mod.Report(tmp_path / "r")
    rep.write()

    def boom(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(report_mod, "atomic_write", boom)
    with pytest.raises(HarnessError, match="No space left"):
        rep.write()
    assert json.loads((tmp_path / "r" / "report.json").read_text())["schema"] == report_mod.SCHEMA


def test_atomic_write_leaves_old_file_and_no_temporary(tmp_path, monkeypatch):
    p = tmp_path / "report.json"
    report_mod.atomic_write(p, '{"old": true}\n')

    def bad_replace(a, b):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(report_mod.os, "replace", bad_replace)
    with pytest.raises(OSError):
        report_mod.atomic_write(p, '{"new": true}\n')
    assert json.loads(p.read_text()) == {"old": True}
    assert [x.name for x in tmp_path.iterdir()] == ["report.json"]


# ---- the harness itself is killed ----------------------------------------------------------------

def _start_verify(root: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", "--root", str(root), "verify"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **env},
                            start_new_session=True)


def _read_report(root: Path) -> dict | None:
    """The newest report (reports/latest moves only when a full run has finished)."""
    folders = sorted(d for d in (root / "reports").glob("2*") if not d.is_symlink()) if (root / "reports").is_dir() else []
    try:
        text = (folders[-1] / "report.json").read_text()
    except (FileNotFoundError, IndexError):
        return None
    return json.loads(text)  # must always parse: never half-written


def test_harness_sigkill_between_criteria_then_resume(fake_repo):
    """SIGKILL to the harness while its second criterion runs: report.json holds the first
    result, status 'running'; `verify --resume` keeps it (not re-run) and finishes the rest."""
    f = fake_repo.criteria(_suite(_pass("S1"), _faulty("S2", "{FAKE_HANG_IF_MARK: '1'}", "timeout_s: 120"),
                                  _pass("S3")))
    fake_repo.register(f)
    marker = str(fake_repo.root / "fakebin")
    p = _start_verify(fake_repo.root, {"FAKE_SLEEP_MARK": "1"})
    try:
        deadline = time.time() + 60
        doc = None
        while time.time() < deadline:
            doc = _read_report(fake_repo.root)
            if doc and doc["results"] and _pids_running(marker):
                break
            time.sleep(0.05)
        assert doc and [r["id"] for r in doc["results"]] == ["S1"], doc
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        _kill_ours(marker)  # the engine runs in its own session: SIGKILL to the harness cannot reach it
    doc = _read_report(fake_repo.root)
    assert doc["status"] == "running"
    assert [(r["id"], r["verdict"]) for r in doc["results"]] == [("S1", "PASS")]
    s1 = doc["results"][0]

    log = fake_repo.root / "engine.log"
    r = _run_cli(fake_repo.root, "verify", "--resume", env={"FAKE_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    assert "S1: PASS (kept from the interrupted run)" in r.stderr
    doc = _read_report(fake_repo.root)
    assert doc["status"] == "complete"
    assert [(x["id"], x["verdict"]) for x in doc["results"]] == [("S1", "PASS"), ("S2", "PASS"), ("S3", "PASS")]
    assert doc["results"][0] == s1
    runs = [ln for ln in log.read_text().splitlines() if ln.startswith("run")]
    assert len(runs) == 4  # S2 and S3 only


def test_harness_sigkill_at_staged_moments(fake_repo):
    """Kill the harness at staged moments, resume each time: report.json always parses, finished
    results are never lost or changed, and the last resume completes the suite.

    Each attempt holds the harness at a known point: the fake engine hangs on its k-th run of that
    attempt (the GPU probe, a first or a second variant, so before, inside and between criteria).
    The kill comes once that run has started, so every kill lands, on every machine."""
    ids = [f"R{i}" for i in range(6)]
    f = fake_repo.criteria(_suite(*(_pass(i) for i in ids)))
    fake_repo.register(f)
    marker = str(fake_repo.root / "fakebin")
    seen: dict[str, dict] = {}
    kills = 0
    stages = [1, 2, 3, 4, 5]
    for k in stages:
        log = fake_repo.root / f"engine-{k}.log"
        args = ["verify"] + (["--resume"] if _read_report(fake_repo.root) else [])
        p = subprocess.Popen([sys.executable, "-m", "harness", "--root", str(fake_repo.root), *args], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                             env={**os.environ, "FAKE_LOG": str(log), "FAKE_HANG_AT": str(k)})
        try:
            deadline = time.time() + 60
            while time.time() < deadline and p.poll() is None:
                if log.exists() and len(log.read_text().splitlines()) >= k and _pids_running(marker):
                    break
                time.sleep(0.02)
            assert p.poll() is None, f"stage {k}: the harness ended before its engine run {k} hung"
            assert len(log.read_text().splitlines()) == k, f"stage {k}: the harness went past the hung run"
            os.killpg(p.pid, signal.SIGKILL)
            kills += 1
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            _kill_ours(marker)
        doc = _read_report(fake_repo.root)
        if doc is None:
            continue
        assert doc["status"] == "running"
        got = {r["id"]: r for r in doc["results"]}
        for cid, old in seen.items():
            assert got.get(cid) == old, f"{cid} lost or changed after a kill"
        seen = got
    assert 0 < len(seen) < len(ids), "the kills landed both before and after some criteria finished"
    r = _run_cli(fake_repo.root, "verify", "--resume")
    assert r.returncode == 0, r.stderr
    doc = _read_report(fake_repo.root)
    assert doc["status"] == "complete"
    assert [x["id"] for x in doc["results"]] == ids
    for cid, old in seen.items():
        assert doc["results"][ids.index(cid)] == old
    assert kills == len(stages)


_BUILD_LIKE = """
import os, subprocess, sys, time
# a build driver: it starts a worker (as cmake starts ninja) and waits for it
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "fake-worker"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {worker.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
worker.wait()
"""


def _guard_of(pid: int) -> bool:
    """The process pid runs under a tree guard (its parent is one)."""
    try:
        ppid = (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        return b"kite-tree-guard" in Path(f"/proc/{ppid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("guarded", [True, False], ids=["guard_group", "no_guard"])
def test_harness_death_ends_a_builds_own_children(tmp_path, guarded):
    """SIGKILL to the harness while a build-like command runs: PR_SET_PDEATHSIG ends the command,
    and with guard_group (how builds run) its own worker goes too; without it the worker is left
    running, which is what the guard is for."""
    script, ready = tmp_path / "driver.py", tmp_path / "pids"
    script.write_text(_BUILD_LIKE)
    call = (f"import sys; from harness.process import run_process; "
            f"run_process([sys.executable, {str(script)!r}, {str(ready)!r}], timeout=120, guard_group={guarded})")
    harness = subprocess.Popen([sys.executable, "-c", call], cwd=REPO, start_new_session=True)
    worker = 0
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not ready.exists():
            assert harness.poll() is None, "the harness ended before the command started its worker"
            time.sleep(0.02)
        driver, worker = map(int, ready.read_text().split())
        while guarded and time.time() < deadline and not _guard_of(driver):
            time.sleep(0.02)
        assert _guard_of(driver) == guarded
        os.killpg(harness.pid, signal.SIGKILL)
        harness.wait(timeout=10)
        deadline = time.time() + 20
        while time.time() < deadline and (alive(driver) or (guarded and alive(worker))):
            time.sleep(0.05)
        assert not alive(driver), "PR_SET_PDEATHSIG did not end the command"
        assert alive(worker) != guarded
    finally:
        if harness.poll() is None:
            os.killpg(harness.pid, signal.SIGKILL)
        if worker and alive(worker):
            os.kill(worker, signal.SIGKILL)


def _children() -> list[bytes]:
    """The command lines of this process's living children."""
    me, out = str(os.getpid()), []
    for d in Path("/proc").iterdir():
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[1] == me and fields[0] != "Z":
                out.append((d / "cmdline").read_bytes())
        except (OSError, IndexError):
            continue
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_group_guard_leaves_a_finished_command_alone(tmp_path):
    """A command that ends by itself: its result is as without the guard, and no guard is left."""
    from harness.process import run_process

    r = run_process([sys.executable, "-c", "print('done')"], timeout=60, guard_group=True)
    assert r.ok and r.stdout.strip() == "done", r.describe()
    assert not [p for p in _children() if b"kite-tree-guard" in p], "a tree guard outlived its command"
