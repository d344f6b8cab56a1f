"""compare's cache of revisions, attacked (issue 44, N05, N08, N09, N16, N23): a killed checkout,
a stamp that names another engine, a linked entry, the cache's own files failing, a prebuilt
engine outside the revision."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import git
from harness.cli import main
from harness.compare import revisions
from harness.errors import HarnessError

pytestmark = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("cc") and shutil.which("git")),
                                reason="needs cmake, a C compiler and git")


@pytest.fixture
def repo(tmp_path):
    from tests.compare_repo import make_repo

    commits = make_repo(tmp_path / "repo")
    return tmp_path / "repo", commits


def _cache(tmp_path: Path, repo: Path) -> revisions.Cache:
    return revisions.Cache(tmp_path / "cache", repo, lambda s: None)


def test_a_checkout_killed_inside_worktree_add_is_redone(repo, tmp_path):
    """e338b56 (N05): a `worktree add` killed half-way leaves git's record of the worktree locked
    ("initializing"); `worktree prune` keeps a locked one, and every later compare of that
    revision failed."""
    path, c = repo
    cache = _cache(tmp_path, path)
    rev = revisions.resolve(path, c[0])
    src = cache.dir / rev.tree / "src"
    src.parent.mkdir(parents=True)
    git(path, "worktree", "add", "--detach", str(src), rev.commit)
    git(path, "worktree", "lock", "--reason", "initializing", str(src))
    shutil.rmtree(src)  # the kill: no files, no checkout.done, git's record locked
    assert cache.checkout(rev) == src
    assert (src / "src" / "eng.c").is_file() and (cache.dir / rev.tree / "checkout.done").is_file()


def test_git_runs_under_the_tree_guard(monkeypatch, repo):
    """e338b56 (N05): after a SIGKILL of the harness, git's checkout went on writing: every git
    command of compare now runs under the guard that ends its tree with the harness."""
    path, c = repo
    seen = []
    real = revisions.run_process

    def spy(argv, *args, **kwargs):
        seen.append(kwargs.get("guard_group", False))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(revisions, "run_process", spy)
    revisions.git(path, "status", "--short")
    assert seen == [True]


def test_a_stamp_that_names_another_engine_is_not_trusted(repo, tmp_path):
    """e338b56 (N08): a build stamp was trusted whatever it named: an engine outside the cache
    entry, or one whose bytes changed since it was written."""
    path, c = repo
    cache = _cache(tmp_path, path)
    rev = revisions.resolve(path, c[0])
    _, first = cache.build(rev, "default")
    stamp = cache.dir / rev.tree / "build-default.json"
    doc = json.loads(stamp.read_text())
    outside = tmp_path / "outside-eng"
    shutil.copy(first.engine_path, outside)
    doc["engine_path"] = str(outside)
    stamp.write_text(json.dumps(doc))
    _, again = cache.build(rev, "default")
    assert again.engine_path == first.engine_path and Path(again.engine_path).is_relative_to(cache.dir)
    Path(first.engine_path).write_bytes(b"#!/bin/sh\necho planted\n")  # the stamped engine replaced
    _, third = cache.build(rev, "default")
    assert b"planted" not in Path(third.engine_path).read_bytes()


def test_a_linked_src_is_never_built_in(repo, tmp_path):
    """e338b56 (N09): a cache entry whose `src` links elsewhere was used: the build deleted and
    wrote in the link's target."""
    path, c = repo
    cache = _cache(tmp_path, path)
    rev = revisions.resolve(path, c[0])
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(path, elsewhere, ignore=shutil.ignore_patterns(".git"))
    (elsewhere / ".git").write_text("gitdir: /nowhere\n")
    (elsewhere / "build" / "default").mkdir(parents=True)
    (elsewhere / "build" / "default" / "keep").write_text("mine")
    entry = cache.dir / rev.tree
    entry.mkdir(parents=True)
    (entry / "src").symlink_to(elsewhere)
    (entry / "checkout.done").write_text(rev.commit + "\n")
    _, res = cache.build(rev, "default")
    assert (elsewhere / "build" / "default" / "keep").read_text() == "mine"
    assert not (entry / "src").is_symlink() and Path(res.engine_path).is_relative_to(entry)


@pytest.mark.parametrize("what", ["cache-is-a-file", "linked-lock"])
def test_the_cache_failing_is_named_not_an_internal_error(repo, tmp_path, capsys, what):
    """e338b56 (N16): the cache as a file, or a linked lock, ended compare as "internal error"."""
    path, c = repo
    cache = tmp_path / "cache"
    if what == "cache-is-a-file":
        cache.write_text("not a folder")
    else:
        cache.mkdir()
        tree = revisions.resolve(path, c[0]).tree
        (cache / f"{tree}.lock").symlink_to(tmp_path / "elsewhere.lock")
    assert main(["--root", str(path), "register", str(path / "regressions" / "work.yaml")]) == 0
    rc = main(["--root", str(path), "compare", c[0], c[1], "--cache", str(cache), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert "internal error" not in err
    w = json.loads((tmp_path / "o" / "report.json").read_text())["workloads"][0]
    assert rc == 1 and w["speed"] == "error" and w["reason"].startswith(f"compare cache {cache}"), w
    assert not (tmp_path / "elsewhere.lock").exists()


def test_a_prebuilt_engine_outside_the_revision_is_refused(repo, tmp_path):
    """e338b56 (N23): a revision's engine.yaml with `prebuilt: /some/folder` made compare run an
    engine outside its checkout."""
    path, c = repo
    eng = path / "configs" / "engine.yaml"
    outside = tmp_path / "bin"
    outside.mkdir()
    eng.write_text(eng.read_text().replace("builds:\n", f"builds:\n  other:\n    prebuilt: {outside}\n"))
    git(path, "commit", "-q", "-am", "a prebuilt build outside")
    rev = revisions.resolve(path, "HEAD")
    with pytest.raises(HarnessError, match="outside the checkout"):
        _cache(tmp_path, path).build(rev, "default")


def test_a_revision_is_checked_out_with_its_submodules(repo, tmp_path, monkeypatch):
    """e338b56 (N25): compare's worktrees lacked the revision's submodules."""
    path, c = repo
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")  # git refuses a local submodule unless told, for the test
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.file.allow")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "always")
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "part.c").write_text("int part(void) { return 1; }\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "part")
    git(path, "submodule", "-q", "add", str(sub), "third_party/sub")
    git(path, "commit", "-q", "-m", "add a submodule")
    rev = revisions.resolve(path, "HEAD")
    src = _cache(tmp_path, path).checkout(rev)
    assert (src / "third_party" / "sub" / "part.c").read_text() == "int part(void) { return 1; }\n"


def test_bisect_passes_over_a_commit_whose_engine_crashes(repo, tmp_path):
    """e338b56 (N18): a commit between GOOD and BAD whose engine crashes ended bisect with exit 2
    and no report. It is now skipped like `git bisect skip`, and named in the report."""
    from tests import compare_repo as CR

    path, c = repo
    git(path, "checkout", "-q", "-b", "crash", c[0])
    base = CR.SOURCE.replace("@WORK@", "100").replace("@N@", "n")
    steps = [("crash", base.replace("int main(int argc, char **argv) {",
                                     "int main(int argc, char **argv) {\n    if (argc > 1) abort();")
              .replace("@CHANGE@", "")),
             ("fixed", base.replace("@CHANGE@", "")),
             ("value", base.replace("@CHANGE@", " + (i == 7 ? 1.0f : 0.0f)"))]
    made = []
    for subject, text in steps:
        (path / "src" / "eng.c").write_text(text)
        (path / "NOTES").write_text(subject + "\n")
        git(path, "commit", "-q", "-am", subject)
        made.append(git(path, "rev-parse", "HEAD"))
    assert main(["--root", str(path), "register", str(path / "regressions" / "work.yaml")]) == 0
    out = tmp_path / "b"
    rc = main(["--root", str(path), "bisect", c[0], made[-1], "--workload", "W1", "--what", "bytes",
               "--cache", str(tmp_path / "cache"), "--out", str(out), "--max-pairs", "4"])
    doc = json.loads((out / "bisect.json").read_text())
    assert (rc, doc["culprit"], doc["confirmed"]) == (0, made[2], True), doc["note"]
    assert f"not judged: {made[0][:10]}" in doc["note"] and "engine" in doc["note"]
    assert [s["speed"] for s in doc["steps"] if s["head"] == made[0]] == ["error"]


def _capped_text() -> str:
    from test_compare_parts import GOOD

    return GOOD.replace("seconds: 60}", "seconds: 600}\n    block: 16\n    warmups: 10\n    noise_floor: 20")


def _capped_run(max_pairs=None, max_seconds=None, clock=None):
    from harness.compare import session
    from harness.compare.workload import Outcome, sequential
    from test_compare_parts import FakeRun, load

    (c,) = load(_capped_text())
    capped = session._capped(c, session.Options(base="x", max_pairs=max_pairs, max_seconds=max_seconds))
    run = FakeRun(capped.spec)
    out = Outcome("W", "t", "f", 1, "same", margin=0.02)
    kw = {"clock": clock} if clock else {}
    seq = sequential(run, out, 0.05, lambda s: None, **kw)  # type: ignore[arg-type]
    return run, seq, out


def test_max_pairs_caps_warmups_the_floor_and_a_block():
    """e338b56 (N17): --max-pairs 4 capped the timed pairs only: 10 warm-ups, 20 A/A pairs and a
    first block of 16 pairs still ran (92 runs)."""
    run, seq, out = _capped_run(max_pairs=4)
    assert seq.pairs == 4 and out.noise_floor["pairs"] == 4
    assert run.n == 2 * 4 + 2 * 4 + 2 * 4  # warm-ups, floor, one block: each at most 4 pairs


def test_max_seconds_counts_from_the_first_warmup():
    """e338b56 (N17): --max-seconds started counting after the warm-ups and the A/A floor."""
    ticks = iter(range(0, 10_000, 25))  # 25 s a clock reading
    run, seq, out = _capped_run(max_seconds=60, clock=lambda: float(next(ticks)))
    # warm-ups at 25, 50 s go on, 75 s stops them; the floor keeps its 2 pairs; one block of 16
    assert out.noise_floor["pairs"] == 2 and seq.pairs == 16
    assert run.n == 2 * 3 + 2 * 2 + 2 * 16


def test_a_dirty_tree_leaves_nothing_in_the_users_object_database(repo, tmp_path):
    """e338b56 (N24): each compare of a dirty working tree wrote its changed and untracked files
    into the user's object database."""
    path, c = repo
    assert main(["--root", str(path), "register", str(path / "regressions" / "work.yaml")]) == 0
    (path / "UNTRACKED.txt").write_text("planted, unique to this test\n")
    blob = git(path, "hash-object", "UNTRACKED.txt")
    rc = main(["--root", str(path), "compare", "HEAD", "--cache", str(tmp_path / "cache"), "--out",
               str(tmp_path / "o"), "--max-pairs", "4"])
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rc == 0 and doc["head"]["dirty"] and doc["workloads"][0]["bytes"] == "same", doc["workloads"][0]
    snap = tmp_path / "cache" / doc["head"]["tree"] / "src"
    assert (snap / "UNTRACKED.txt").read_text() == "planted, unique to this test\n"
    assert not revisions.run_process(["git", "-C", str(path), "cat-file", "-e", blob]).ok  # only in the cache
    assert "?? UNTRACKED.txt" in git(path, "status", "--porcelain")


def test_a_full_disk_in_the_cache_is_named(repo, tmp_path, monkeypatch, capsys):
    """e338b56 (N16): a full disk while the cache wrote its own files was an internal error."""
    import errno

    path, c = repo
    assert main(["--root", str(path), "register", str(path / "regressions" / "work.yaml")]) == 0

    def full(self, rev):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.dir / rev.tree / "checkout.done"))

    monkeypatch.setattr(revisions.Cache, "checkout", full)
    rc = main(["--root", str(path), "compare", c[0], c[1], "--cache", str(tmp_path / "cache"),
               "--out", str(tmp_path / "o")])
    assert "internal error" not in capsys.readouterr().err
    w = json.loads((tmp_path / "o" / "report.json").read_text())["workloads"][0]
    assert rc == 1 and w["speed"] == "error"
    assert w["reason"].startswith(f"compare cache {tmp_path / 'cache'}: ") and "No space left on device" in w["reason"]
