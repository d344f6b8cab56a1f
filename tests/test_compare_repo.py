"""`harness compare` and `harness bisect` end to end on a temporary git repository of a small C
engine (tests/compare_repo.py): a refactor is an identical build (or equivalent when run), a
planted 12 % slowdown is regressed, a changed output value is "bytes changed", each with its exit
status; bisect over 9 commits finds the slowdown and the byte change and confirms each."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from tests.compare_repo import make_repo
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("cc") and shutil.which("git")),
                                reason="needs cmake, a C compiler and git")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare-repo")
    commits = make_repo(root / "repo")
    assert main(["--root", str(root / "repo"), "register", str(root / "repo" / "regressions" / "work.yaml")]) == 0
    return root / "repo", commits, root / "cache"


def compare(repo, cache, out, *args):
    rc = main(["--root", str(repo), "compare", *args, "--cache", str(cache), "--out", str(out)])
    return rc, json.loads((out / "report.json").read_text())


def test_refactor_is_an_identical_build(repo, tmp_path):
    path, c, cache = repo
    rc, doc = compare(path, cache, tmp_path / "r", c[0], c[1])
    w = doc["workloads"][0]
    assert (rc, w["speed"], w["bytes"], w["pairs"]) == (0, "identical build", "same", 0)
    assert doc["builds"]["default"]["changes"] == []
    for name in ("report.md", "junit.xml", "comment.md"):
        assert (tmp_path / "r" / name).is_file()
    assert (tmp_path / "r" / "report.md").read_text().startswith(f"# compare {c[0][:10]} → {c[1][:10]}: PASS\n\n| workload")


def test_refactor_run_anyway_is_equivalent(repo, tmp_path):
    path, c, cache = repo
    rc, doc = compare(path, cache, tmp_path / "r", c[0], c[1], "--no-short-circuit")
    w = doc["workloads"][0]
    assert (rc, w["speed"], w["bytes"], w["ratio"]) == (0, "equivalent", "same", 1.0)
    assert w["interval"] == [1.0, 1.0] and 0 < w["pairs"] < 64


def test_planted_slowdown_is_regressed(repo, tmp_path, capsys):
    path, c, cache = repo
    rc, doc = compare(path, cache, tmp_path / "r", c[2], c[3])
    w = doc["workloads"][0]
    assert (rc, w["speed"], w["bytes"]) == (1, "regressed", "same")
    assert w["ratio"] == pytest.approx(1.12) and w["interval"][0] > 1.02
    assert doc["builds"]["default"]["changes"][0].startswith("engine: ")
    err = capsys.readouterr().err
    assert "[W1] 4 pairs: ratio 1.1200, interval" in err  # progress while it runs
    assert "target [0.9804, 1.0200]" in err and "equivalent" not in err  # a target, not a verdict
    logs = sorted(x.name for x in (tmp_path / "r" / "logs" / "W1").iterdir())
    assert logs and all(".dump." in x for x in logs)  # the timed runs' logs are kept only when one fails
    junit = (tmp_path / "r" / "junit.xml").read_text()
    assert 'failures="1"' in junit and "regressed" in junit


def test_changed_value_is_bytes_changed(repo, tmp_path):
    path, c, cache = repo
    rc, doc = compare(path, cache, tmp_path / "r", c[4], c[5])
    w = doc["workloads"][0]
    assert (rc, w["bytes"], w["speed"]) == (1, "changed", "equivalent")  # faster or not: bytes fail it
    d = w["bytes_detail"][0]
    assert (d["first_index"], d["differing"], d["first_values"]) == (7, 1, [3.5, 4.5])
    assert d["max_ulp"] > 0 and d["nmse"] > 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "bytes changed (must stay the same)" in md and "first at index 7: base 3.5, head 4.5" in md


def test_fail_on_bytes_ignores_the_speed_verdict(repo, tmp_path):
    path, c, cache = repo
    rc, doc = compare(path, cache, tmp_path / "r", c[2], c[3], "--fail-on", "bytes")
    assert (rc, doc["workloads"][0]["speed"], doc["verdict"]) == (0, "regressed", "PASS")


def test_closed_pipes_keep_the_exit_status(repo, tmp_path):
    """`compare ... | head -1` under pipefail: stdout and stderr closed early, the regression still exits 1."""
    path, c, cache = repo
    p = subprocess.Popen([sys.executable, "-m", "harness", "--root", str(path), "compare", c[2], c[3], "--cache",
                          str(cache), "--out", str(tmp_path / "r")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=REPO)
    p.stdout.close()
    p.stderr.close()
    assert p.wait(timeout=300) == 1
    assert json.loads((tmp_path / "r" / "report.json").read_text())["workloads"][0]["speed"] == "regressed"


def test_out_must_be_a_new_folder(repo, tmp_path, capsys):
    path, c, cache = repo
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "work").symlink_to(tmp_path)
    rc = main(["--root", str(path), "compare", c[0], c[1], "--cache", str(cache), "--out", str(tmp_path / "used")])
    assert rc == 2 and "not an empty folder" in capsys.readouterr().err


def test_bad_revision_is_a_usage_error(repo, tmp_path, capsys):
    path, c, cache = repo
    rc = main(["--root", str(path), "compare", "no-such-rev", "--cache", str(cache), "--out", str(tmp_path / "r")])
    assert rc == 2 and "'no-such-rev' is not a commit" in capsys.readouterr().err


@pytest.mark.parametrize("good, bad, what, culprit", [(0, 8, "any", 3), (3, 8, "any", 5), (0, 8, "bytes", 5)])
def test_bisect_finds_the_first_bad_commit(repo, tmp_path, good, bad, what, culprit):
    path, c, cache = repo
    out = tmp_path / "b"
    rc = main(["--root", str(path), "bisect", c[good], c[bad], "--workload", "W1", "--what", what,
               "--cache", str(cache), "--out", str(out)])
    doc = json.loads((out / "bisect.json").read_text())
    assert (rc, doc["culprit"], doc["confirmed"]) == (0, c[culprit], True)
    roles = [s["role"] for s in doc["steps"]]
    assert roles[0] == "check" and roles[-1] == "confirm" and "midpoint" in roles
    rows = [ln for ln in (out / "report.md").read_text().splitlines() if ln.startswith("|") and c[culprit][:10] in ln]
    assert rows and rows[-1].split("|")[2].strip() == "confirm"  # every step has its row, the last confirms


def test_bisect_without_a_change_finds_nothing(repo, tmp_path):
    path, c, cache = repo
    out = tmp_path / "b"
    rc = main(["--root", str(path), "bisect", c[0], c[2], "--workload", "W1", "--cache", str(cache),
               "--out", str(out)])
    doc = json.loads((out / "bisect.json").read_text())
    assert (rc, doc["culprit"]) == (1, None) and "nothing to find" in doc["note"]


def test_worktree_head_with_uncommitted_change_is_labelled_dirty(repo, tmp_path):
    path, c, cache = repo
    eng = path / "src" / "eng.c"
    before = eng.read_text()
    try:
        eng.write_text(before.replace("#define WORK 112", "#define WORK 100"))
        rc, doc = compare(path, cache, tmp_path / "r", c[8])
    finally:
        eng.write_text(before)
    assert doc["head"]["dirty"] is True and doc["head"]["label"].endswith("+dirty")
    w = doc["workloads"][0]
    assert (rc, w["speed"]) == (0, "improved")
    assert not (path / "build").exists()  # nothing built in the user's tree


def test_killed_build_is_not_trusted(repo, tmp_path):
    """A build folder without its completion stamp (a killed build) is removed and built again."""
    from harness.compare.revisions import Cache, resolve  # noqa: PLC0415 - test-local

    path, c, _ = repo
    cache = Cache(tmp_path / "cache", path, lambda s: None)
    rev = resolve(path, c[0])
    src = cache.checkout(rev)
    junk = src / "build" / "default" / "bin" / "eng"
    junk.parent.mkdir(parents=True)
    junk.write_text("not a program")  # what a killed build could leave
    cfg, res = cache.build(rev, "default")
    assert res.engine.status == "built" and Path(res.engine_path).read_bytes()[:4] == b"\x7fELF"
    assert (tmp_path / "cache" / rev.tree / "build-default.json").is_file()
    cfg2, res2 = cache.build(rev, "default")  # the stamp: reused, not built again
    assert res2.engine.status == "built" and res2.engine_path == res.engine_path
    Path(res.engine_path).unlink()  # a stamp whose engine is gone is not trusted either
    cfg3, res3 = cache.build(rev, "default")
    assert res3.engine.status == "built" and Path(res3.engine_path).is_file()


def test_a_committed_link_cannot_send_the_build_outside(repo, tmp_path):
    """A revision whose build/ is a link out of its checkout is refused before anything is deleted."""
    from harness.compare.revisions import Cache, resolve  # noqa: PLC0415 - test-local
    from harness.errors import HarnessError  # noqa: PLC0415

    path, c, _ = repo
    cache = Cache(tmp_path / "cache", path, lambda s: None)
    rev = resolve(path, c[0])
    src = cache.checkout(rev)
    victim = tmp_path / "victim"
    (victim / "default").mkdir(parents=True)
    (victim / "default" / "keep").write_text("mine")
    (src / "build").symlink_to(victim, target_is_directory=True)
    with pytest.raises(HarnessError, match="outside the checkout"):
        cache.build(rev, "default")
    assert (victim / "default" / "keep").read_text() == "mine"


def test_bytes_only_bisect_times_nothing(repo, tmp_path):
    path, c, cache = repo
    out = tmp_path / "b"
    rc = main(["--root", str(path), "bisect", c[3], c[6], "--workload", "W1", "--what", "bytes",
               "--cache", str(cache), "--out", str(out)])
    doc = json.loads((out / "bisect.json").read_text())
    assert (rc, doc["culprit"]) == (0, c[5])
    speeds = {s["speed"] for s in doc["steps"]}
    assert all(s["pairs"] == 0 for s in doc["steps"]) and "not timed" in speeds
    assert speeds <= {"not timed", "identical build"}


def test_same_commit_under_two_names_says_so_and_builds_nothing(repo, tmp_path, capsys):
    path, c, _ = repo
    cache = tmp_path / "cache"  # empty: anything built would land here
    rc, doc = compare(path, cache, tmp_path / "r", c[0], "main~8")
    assert (rc, doc["same_commit"], doc["builds"]) == (0, True, {})
    assert "same source tree" in doc["workloads"][0]["reason"]
    assert "base and head are the same source tree" in capsys.readouterr().err
    assert not any(cache.glob("*/build-*.json"))


GPU_WORKLOAD = """version: 1
criteria:
  - id: W9
    title: on a GPU
    kind: compare
    requires: [gpu]
    args: [run, "10"]
    dumps: [values]
    bytes: same
    metric: {field: timings.work}
    margin: 0.02
    budget: {pairs: 8}
"""


def test_gpu_workload_skips_without_building_on_a_machine_without_gpu(repo, tmp_path, monkeypatch):
    """No GPU device: `requires: gpu` is unmet at once, and the GPU build is not built to ask."""
    from harness.compare import session  # noqa: PLC0415 - test-local

    monkeypatch.setattr(session, "gpu_device", lambda: False, raising=False)
    path, c, _ = repo
    f = tmp_path / "gpu.yaml"
    f.write_text(GPU_WORKLOAD)
    cache = tmp_path / "cache"
    rc, doc = compare(path, cache, tmp_path / "r", c[0], c[1], "--file", str(f), "--exploratory")
    w = doc["workloads"][0]
    assert (rc, w["speed"], doc["builds"]) == (0, "skipped", {})
    assert w["reason"].startswith("no GPU") and not any(cache.glob("*/build-*.json"))
