"""`harness history`'s store: reports of every kind read into it once, keyed by commit and machine;
its schema version checked; verify adding its own report when a store is configured."""

from __future__ import annotations

import json
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import HarnessError
from harness.history import store as store_mod
from harness.history.points import UNRECORDED, Machine, read_doc, read_reports
from harness.history.store import Store
from tests.history_reports import bytes_changed, compare_doc, identical, skipped, timed

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "docs" / "results"
# the H200 reports kept in the tree, and one kept as test data (the docs keep only the latest runs)
DEAD401 = REPO / "tests" / "data" / "history" / "h200-dead401"
# a merged report (the suites and llama.cpp's criteria, one machine, one commit), kept in
# docs/results until 3403e42 replaced it
MERGED = REPO / "tests" / "data" / "history" / "h200-01f72a1-merged" / "report.json"
# a real matrix report: `harness matrix linux-gcc-nocuda` on a 2-core CPU machine (its folders
# written <out> and <repo>)
MATRIX = REPO / "tests" / "data" / "history" / "cpu-matrix"
KEPT = sorted(RESULTS.glob("*/report.json")) + [DEAD401 / "report.json"]


def dump(store: Path) -> list[tuple]:
    db = sqlite3.connect(str(store))
    try:
        return [row for t in ("machines", "reports", "points", "verdicts")
                for row in db.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3")]
    finally:
        db.close()


def test_the_kept_reports_make_a_store(tmp_path, capsys):
    assert len(KEPT) >= 2
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(RESULTS), str(DEAD401)]) == 0
    with Store(store) as st:
        c = st.counts()
        # one machine a card named by nvidia-smi in the files themselves (the kept runs' cards vary)
        smi = {(d["system"]["cpu"], g["name"], g["driver"])
               for d in (json.loads(k.read_text()) for k in KEPT) for g in d["system"]["nvidia_smi"]["gpus"][:1]}
        assert c["reports"] == len(KEPT) and c["machines"] == len(smi)
        pts = st.series("E8b", "ratio")
        assert len(pts) == len(KEPT)
        assert {p.machine for p in pts} == {Machine(*m) for m in smi}
        assert "b.timings.decode_ms" in st.metrics("E8b") and "aa.ratio" in st.metrics("E8b")
        dead = json.loads((DEAD401 / "report.json").read_text())
        e8b = next(r for r in dead["results"] if r["id"] == "E8b")
        assert [p.value for p in pts if p.revision.startswith("dead401")] == [e8b["details"]["stats"]["median"]]
        verdicts = st.verdicts("F1")
        assert [v["verdict"] for v in verdicts if v["revision"].startswith("dead401")] == ["FAIL"]


def test_adding_the_same_report_twice_changes_nothing(tmp_path, capsys):
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(KEPT[0].parent)]) == 0
    before = dump(store)
    copy = tmp_path / "copy" / "report.json"  # the same content elsewhere, indented differently
    copy.parent.mkdir()
    copy.write_text(json.dumps(json.loads(KEPT[0].read_text())))
    assert main(["history", "--store", str(store), "add", str(KEPT[0]), str(copy)]) == 0
    assert dump(store) == before
    assert "0 added, 2 kept before" in capsys.readouterr().out


def test_ci_artifacts_folder_with_zips(tmp_path, capsys):
    art = tmp_path / "artifacts"
    (art / "report-merged").mkdir(parents=True)
    shutil.copy(KEPT[0], art / "report-merged" / "report.json")
    with zipfile.ZipFile(art / "report-gpu.zip", "w") as z:
        z.write(KEPT[1], "nested/report.json")
        z.writestr("nested/other.txt", "not a report")
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(art)]) == 0
    out = capsys.readouterr().out
    assert "report-gpu.zip!nested/report.json" in out
    with Store(store) as st:
        assert st.counts()["reports"] == 2


def test_show_prints_the_series(tmp_path, capsys):
    store = tmp_path / "h.sqlite"
    main(["history", "--store", str(store), "add", str(RESULTS), str(DEAD401)])
    capsys.readouterr()
    assert main(["history", "--store", str(store), "show", "E8b", "--metric", "b.timings.decode_ms"]) == 0
    out = capsys.readouterr().out
    assert "E8b b.timings.decode_ms on Intel(R) Xeon(R) Processor; NVIDIA H200, driver 580.159.04" in out
    assert out.count("| dead401") == 1 and "45.2328" in out
    assert main(["history", "--store", str(store), "show", "E8b", "--metric", "nope"]) == 2
    assert "E8b has no metric 'nope'" in capsys.readouterr().err
    assert main(["history", "--store", str(store), "show", "ZZ"]) == 2
    assert "no series 'ZZ'" in capsys.readouterr().err


def test_reports_that_cannot_go_in_say_why(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    doc = json.loads(KEPT[0].read_text())
    for change, needle in [({"git": {}}, "names no commit"), ({"status": "running"}, "still going"),
                           ({"schema": "other/1"}, "not a kite report"), ({"results": "x"}, "damaged")]:
        (bad / "report.json").write_text(json.dumps({**doc, **change}))
        assert main(["history", "--store", str(tmp_path / "h.sqlite"), "add", str(bad)]) == 2
        assert needle in capsys.readouterr().err
    (bad / "report.json").write_text("{")
    assert main(["history", "--store", str(tmp_path / "h.sqlite"), "add", str(bad)]) == 2
    assert "not JSON" in capsys.readouterr().err
    assert not (tmp_path / "h.sqlite").exists()  # nothing read, no store made
    assert main(["history", "--store", str(tmp_path / "none.sqlite"), "show", "E8b"]) == 2
    assert "no history store" in capsys.readouterr().err


# ---- the schema's version ---------------------------------------------------------------------

def test_a_newer_store_is_refused(tmp_path):
    p = tmp_path / "h.sqlite"
    Store(p).close()
    db = sqlite3.connect(str(p))
    db.execute(f"PRAGMA user_version = {store_mod.VERSION + 1}")
    db.close()
    with pytest.raises(HarnessError, match="newer than this harness reads"):
        Store(p)


def test_a_foreign_sqlite_file_is_refused(tmp_path):
    p = tmp_path / "other.sqlite"
    db = sqlite3.connect(str(p))
    db.execute("CREATE TABLE t (x)")
    db.close()
    with pytest.raises(HarnessError, match="not a kite history store"):
        Store(p)
    (tmp_path / "text.sqlite").write_text("not a database at all, just text " * 10)
    with pytest.raises(HarnessError, match="not a kite history store"):
        Store(tmp_path / "text.sqlite")


def test_an_older_store_is_migrated_or_refused(tmp_path, monkeypatch):
    p = tmp_path / "h.sqlite"
    with Store(p) as st:
        st.add(read_reports(KEPT[0])[0], "2026-12-01T00:00:00Z")
    monkeypatch.setattr(store_mod, "VERSION", store_mod.VERSION + 1)
    with pytest.raises(HarnessError, match=f"version {store_mod.VERSION - 1} cannot be migrated"):
        Store(p)  # no migration for it: refused, and left as it was
    monkeypatch.setitem(store_mod.MIGRATIONS, store_mod.VERSION - 1,
                        lambda db: db.execute("ALTER TABLE reports ADD COLUMN note TEXT"))
    with Store(p) as st:
        assert st.db.execute("PRAGMA user_version").fetchone()[0] == store_mod.VERSION
        assert st.counts()["reports"] == 1
        assert "note" in [r[1] for r in st.db.execute("PRAGMA table_info(reports)")]


# ---- compare reports, as compare's own writer makes them ------------------------------------

HEAD = "abc1234def"


def compare_folder(tmp_path: Path, name: str, doc: dict) -> Path:
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps(doc, indent=1))
    return d


def test_a_compare_report_goes_in_through_its_reader():
    doc = compare_doc(HEAD, [timed("CMP1", [1.05, 1.06, 1.04, 1.07] * 20), skipped("CMP3"), identical("CMP2"),
                             bytes_changed("CMP4")])
    rd = read_doc(doc, "compare/report.json")
    assert rd.kind == "compare" and rd.commit == HEAD and not rd.dirty
    assert rd.machine == UNRECORDED  # compare's report does not say (yet): not "no GPU"
    assert read_doc({**doc, "system": {"cpu": "Some CPU"}}, "x").machine == Machine("Some CPU", "no GPU", "")
    w = doc["workloads"][0]
    assert w["speed"] == "regressed"
    assert sorted(rd.points) == [("CMP1", "compare.ci_lower", w["interval"][0]),
                                 ("CMP1", "compare.ci_upper", w["interval"][1]), ("CMP1", "compare.ratio", w["ratio"])]
    verdicts = {v["series"]: v for v in rd.verdicts}
    assert {k: v["verdict"] for k, v in verdicts.items()} == {
        "CMP1": "regressed", "CMP3": "skipped", "CMP2": "identical", "CMP4": "bytes-changed"}
    assert verdicts["CMP1"]["detail"]["ratios"] == [p["ratio"] for p in w["pair_log"]]
    assert verdicts["CMP1"]["detail"]["band"] == [1 / 1.02, 1.02] and verdicts["CMP1"]["detail"]["pass_if"] is None
    assert verdicts["CMP3"]["detail"] is None and "no GPU" in verdicts["CMP3"]["reason"]
    assert verdicts["CMP1"]["title"] == "CMP1: decode of 64 steps"
    with pytest.raises(HarnessError, match="head.commit"):
        read_doc({**doc, "head": {}}, "x")


def test_a_compare_of_a_working_tree_is_its_head_marked_dirty():
    rd = read_doc(compare_doc(HEAD, [identical("CMP2")], dirty=True), "x")
    assert rd.commit == HEAD[:10] and rd.dirty  # not the snapshot commit, dated 2000-01-01 in the cache


def test_a_folder_of_every_report_kind_goes_in(tmp_path, capsys):
    """verify, matrix, merge and compare reports in one folder, as CI artifacts are downloaded; a timed
    compare among them (an internal error before) and a skip that plots nothing."""
    art = tmp_path / "artifacts"
    shutil.copytree(DEAD401, art / "report-verify")
    shutil.copytree(MERGED.parent, art / "report-merged")
    shutil.copytree(MATRIX, art / "report-matrix")
    shutil.copytree(TOY_COMPARE, art / "compare-toy")  # a real one, and one of compare's writer
    compare_folder(art, "compare", compare_doc(HEAD, [timed("CMP1", [1.0, 1.01, 0.99, 1.0] * 40), skipped("CMP3")]))
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(art)]) == 0
    out = capsys.readouterr().out
    assert "5 added, 0 kept before" in out, out
    with Store(store) as st:
        assert sorted({r[0] for r in st.db.execute("SELECT kind FROM reports")}) == ["compare", "matrix", "merged",
                                                                                    "verify"]
        assert st.metrics("CMP3") == [] and [v["verdict"] for v in st.verdicts("CMP3")] == ["skipped"]
        assert [v["verdict"] for v in st.verdicts("CMP1")] == ["equivalent"]
        assert len(st.series("CMP1", "compare.ratio")) == 1
        entry = json.loads((MATRIX / "report.json").read_text())["results"][0]
        assert [p.value for p in st.series(entry["id"], "build_seconds")] == [entry["details"]["build_seconds"]]
    assert main(["history", "--store", str(store), "show", "CMP1"]) == 0
    assert "CMP1 compare.ratio on" in capsys.readouterr().out


def test_a_skip_is_no_value_of_its_criterion():
    doc = json.loads((DEAD401 / "report.json").read_text())
    skips = [r["id"] for r in doc["results"] if r["verdict"] == "SKIP"]
    assert skips
    rd = read_doc(doc, "x")
    assert not [p for p in rd.points if p[0] in skips]
    assert {v["series"] for v in rd.verdicts} >= set(skips)


# ---- verify adds its own report when a store is configured -----------------------------------

AB = """\
criteria:
  - id: AB
    title: planted slowdown
    kind: ab_timing
    args: [run, --model, "{model}", --prompt, "1,2,3,4", --steps, "6", --iters, "3"]
    a: {name: slow, env: {KITE_DEBUG_STEP_DELAY_US: "3000", FAKE_NOISE: "0.02"}}
    b: {name: base, env: {FAKE_NOISE: "0.02"}}
    pairs: 4
    warmups: 0
    pass_if: "ci_lower >= 1.05"
"""


def test_verify_adds_its_report_to_the_configured_store(fake_repo, monkeypatch):
    fake_repo.register(fake_repo.criteria(AB))
    (fake_repo.root / "pyproject.toml").write_text('[tool.kite]\nhistory = "hist/kite.sqlite"\n')
    monkeypatch.delenv("KITE_HISTORY", raising=False)
    monkeypatch.setenv("KITE_GIT_COMMIT", "1234abc")
    messages: list[str] = []
    assert fake_repo.verify(messages=messages) == 0
    store = fake_repo.root / "hist" / "kite.sqlite"
    assert any(m == f"history: report added to {store}" for m in messages), messages
    with Store(store) as st:
        assert [p.revision for p in st.series("AB", "ratio")] == ["1234abc"]
    env_store = fake_repo.root / "env.sqlite"
    monkeypatch.setenv("KITE_HISTORY", str(env_store))  # the environment wins over pyproject.toml
    assert fake_repo.verify() == 0
    with Store(env_store) as st:
        assert st.counts()["reports"] == 1


def test_verify_without_a_store_keeps_none(fake_repo, monkeypatch):
    fake_repo.register(fake_repo.criteria(AB))
    monkeypatch.delenv("KITE_HISTORY", raising=False)
    messages: list[str] = []
    assert fake_repo.verify(messages=messages) == 0
    assert not any(m.startswith("history: report added") for m in messages)
    assert not list(fake_repo.root.rglob("*.sqlite"))


def test_tool_kite_history_must_be_a_path(fake_repo, monkeypatch, capsys):
    monkeypatch.delenv("KITE_HISTORY", raising=False)
    (fake_repo.root / "pyproject.toml").write_text("[tool.kite]\nhistory = 3\n")
    assert main(["--root", str(fake_repo.root), "history", "add", str(KEPT[0])]) == 2
    assert "[tool.kite] history must be a path" in capsys.readouterr().err


# ---- matrix and merged reports ---------------------------------------------------------------

def test_a_matrix_entrys_times_are_kept(tmp_path):
    doc = json.loads((DEAD401 / "report.json").read_text())
    entry = {**doc["results"][0], "id": "cpu-gcc", "kind": "matrix-entry", "duration_s": 42.0,
             "details": {"build_seconds": 30.5, "checks_seconds": 1.5, "criteria_seconds": 10.0, "builds": {}}}
    rd = read_doc({**doc, "kind": "matrix", "results": [entry]}, "matrix/report.json")
    assert rd.kind == "matrix"
    assert sorted(rd.points) == [("cpu-gcc", "build_seconds", 30.5), ("cpu-gcc", "checks_seconds", 1.5),
                                 ("cpu-gcc", "criteria_seconds", 10.0), ("cpu-gcc", "duration_s", 42.0)]


def test_a_merge_of_several_machines_is_passed_over_for_its_sources(tmp_path, capsys):
    doc = json.loads(MERGED.read_text())
    assert doc["kind"] == "merged" and len(doc["merged_from"]) == 2  # one machine, one commit: kept
    other = [doc["merged_from"][0], {**doc["merged_from"][1], "cpu": "Another CPU"}]
    art = tmp_path / "artifacts"
    for name, d in (("report-merged", {**doc, "merged_from": other}), ("report-gpu", json.loads(KEPT[1].read_text()))):
        (art / name).mkdir(parents=True)
        (art / name / "report.json").write_text(json.dumps(d))
    assert main(["history", "--store", str(tmp_path / "h.sqlite"), "add", str(art)]) == 0
    out = capsys.readouterr().out
    assert "skipped  " in out and "merged from reports of different commits or machines" in out
    assert "1 added, 0 kept before, 1 skipped" in out


def test_add_git_reads_each_kept_report_once(tmp_path, capsys):
    """A repository whose history adds two reports, then deletes one: both are found, once each."""
    import subprocess

    repo = tmp_path / "repo"
    (repo / "docs" / "results" / "a").mkdir(parents=True)

    def git(*argv: str) -> None:
        subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})

    git("init", "-q")
    shutil.copy(KEPT[0], repo / "docs" / "results" / "a" / "report.json")
    git("add", "-A")
    git("commit", "-qm", "one")
    (repo / "docs" / "results" / "b").mkdir()
    shutil.copy(KEPT[1], repo / "docs" / "results" / "b" / "report.json")
    (repo / "docs" / "results" / "b" / "notes.md").write_text("not a report")
    git("add", "-A")
    git("commit", "-qm", "two")
    git("rm", "-rq", "docs/results/a")
    git("commit", "-qm", "three")
    store = tmp_path / "h.sqlite"
    for _ in range(2):
        assert main(["history", "--store", str(store), "add-git", "docs/results", "--git", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "2 added, 0 kept before" in out and "0 added, 2 kept before" in out
    with Store(store) as st:
        assert st.counts()["reports"] == 2
    assert main(["history", "--store", str(store), "add-git", "docs/results", "--git", str(tmp_path)]) == 2
    assert "git log failed" in capsys.readouterr().err
    planted = tmp_path / "planted"
    for rev in (f"--output={planted}", "-p"):  # an option to git, not a revision (N26)
        assert main(["history", "--store", str(store), "add-git", "docs/results", "--git", str(repo),
                     f"--rev={rev}"]) == 2
        assert "not a revision (it starts with '-')" in capsys.readouterr().err
    assert not planted.exists()


def test_a_run_from_a_dirty_tree_is_marked(tmp_path, capsys):
    doc = json.loads((DEAD401 / "report.json").read_text())
    d = tmp_path / "r"
    d.mkdir()
    (d / "report.json").write_text(json.dumps({**doc, "git": {**doc["git"], "dirty": True}}))
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(d), str(DEAD401)]) == 0
    with Store(store) as st:
        assert [p.dirty for p in st.series("E8b", "ratio")] == [True, False]  # same commit and start: added order
    capsys.readouterr()
    main(["history", "--store", str(store), "show", "E8b"])
    assert capsys.readouterr().out.count("(dirty)") == 1


class FailingWrites:
    """A connection whose insert of a report fails, as on a full disk."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __getattr__(self, name):
        return getattr(self.db, name)

    def __enter__(self):
        return self.db.__enter__()

    def __exit__(self, *exc):
        return self.db.__exit__(*exc)

    def execute(self, sql, *a):
        if sql.startswith("INSERT INTO reports"):
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, *a)


def test_a_failed_write_leaves_the_store_as_it_was(tmp_path):
    p = tmp_path / "h.sqlite"
    with Store(p) as st:
        st.add(read_reports(KEPT[0])[0], "2026-12-01T00:00:00Z")
    before = dump(p)
    with Store(p) as st:
        st.db = FailingWrites(st.db)
        with pytest.raises(HarnessError, match="cannot write the history store: database or disk is full"):
            st.add(read_reports(KEPT[1])[0], "2026-12-01T00:00:00Z")
    assert dump(p) == before


def test_an_artifact_that_is_not_a_zip_is_named(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "report-x.zip").write_bytes(b"PK but not really a zip")
    assert main(["history", "--store", str(tmp_path / "h.sqlite"), "add", str(tmp_path / "a")]) == 2
    assert "report-x.zip: not a readable zip file" in capsys.readouterr().err


def test_ci_artifacts_count_each_run_once(tmp_path, capsys):
    """CI's artifacts as documented: each part's report and `harness merge`'s report of them. A value
    of a part, met again in the merge, is one value: none is counted twice (a false change point)."""
    doc = json.loads((DEAD401 / "report.json").read_text())
    e8b = next(r for r in doc["results"] if r["id"] == "E8b")
    art = tmp_path / "artifacts"
    shutil.copytree(DEAD401, art / "report-a")
    same = next(r for r in doc["results"] if r["verdict"] == "PASS" and r["kind"] != "ab_timing")
    compare_folder(art, "report-b", {**doc, "started": "2026-12-01T23:00:00Z", "results": [{**e8b, "id": "E9"}, same],
                                     "summary": {"total": 2, "passed": 2, "failed": 0, "skipped": 0,
                                                 "exploratory": 0}})
    main(["--root", str(REPO), "merge", str(art / "report-a"), str(art / "report-b"), "-o", str(art / "report-merged")])
    assert json.loads((art / "report-merged" / "report.json").read_text())["kind"] == "merged"
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(art)]) == 0
    assert "3 added" in capsys.readouterr().out
    with Store(store) as st:
        assert [p.value for p in st.series("E8b", "ratio")] == [e8b["details"]["stats"]["median"]]
        assert len(st.series("E9", "ratio")) == 1
        assert len(st.verdicts("E8b")) == 1 and len(st.verdicts("E9")) == 1
        # the same outcome in both parts: merge names both sources; each part's run counts once
        assert len(st.series(same["id"], "duration_s")) == 2 and len(st.verdicts(same["id"])) == 2


V1 = """
ALTER TABLE points DROP COLUMN run;
ALTER TABLE verdicts DROP COLUMN run;
ALTER TABLE verdicts DROP COLUMN title;
INSERT INTO machines VALUES (1, 'cpu', 'no GPU', '');
INSERT INTO reports VALUES (1, 'sha256:x', 'r', 'verify', 'abc1234', '2026-12-01T00:00:00Z', 0,
                            '2026-12-01T01:00:00Z', 1, '2026-12-01T02:00:00Z');
INSERT INTO points VALUES (1, 'A1', 'ratio', 1.5);
INSERT INTO verdicts VALUES (1, 'A1', 'ab_timing', 'PASS', 'ok', NULL);
PRAGMA user_version = 1;
"""  # a version-1 store: today's schema less what version 2 added, with one report


def test_a_version_1_store_is_migrated(tmp_path):
    p = tmp_path / "h.sqlite"
    Store(p).close()
    db = sqlite3.connect(str(p))
    db.executescript(V1)
    db.close()
    with Store(p) as st:
        assert st.db.execute("PRAGMA user_version").fetchone()[0] == store_mod.VERSION
        assert [(x.value, x.started) for x in st.series("A1", "ratio")] == [(1.5, "2026-12-01T01:00:00Z")]
        assert [v["verdict"] for v in st.verdicts("A1")] == ["PASS"]


@pytest.mark.parametrize("drop", ["DROP TABLE verdicts", "DROP TABLE points", "ALTER TABLE points DROP COLUMN run"])
def test_a_store_missing_a_table_is_named_damaged(tmp_path, capsys, drop):
    p = tmp_path / "h.sqlite"
    with Store(p) as st:
        st.add(read_reports(KEPT[0])[0], "2026-12-01T00:00:00Z")
    db = sqlite3.connect(str(p))
    db.execute(drop)
    db.commit()
    db.close()
    for argv in (["show", "E8b"], ["changes"], ["add", str(KEPT[0])]):
        assert main(["history", "--store", str(p), *argv]) == 2
        assert "a damaged history store" in capsys.readouterr().err


def test_a_huge_integer_is_no_value_or_a_damaged_report(tmp_path, capsys):
    """JSON has no limit on an integer; a float has. A compare report's huge ratio is no value; a
    verify report showing one cannot be rendered and is named damaged. No internal error."""
    doc = compare_doc(HEAD, [timed("CMP1", [1.0, 1.01, 0.99, 1.0] * 40)])
    doc["workloads"][0]["ratio"] = 10 ** 400
    d = compare_folder(tmp_path, "compare", doc)
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(d)]) == 0
    with Store(store) as st:
        assert st.metrics("CMP1") == ["compare.ci_lower", "compare.ci_upper"]
    doc = json.loads((DEAD401 / "report.json").read_text())
    doc["results"][0]["duration_s"] = 10 ** 400
    d = compare_folder(tmp_path, "verify", doc)
    assert main(["history", "--store", str(store), "add", str(d)]) == 2
    err = capsys.readouterr().err
    assert "is damaged" in err and "internal error" not in err


# a real compare report: `kite-harness compare HEAD --no-short-circuit` of examples/toy-engine as a
# repository of its own (an A/A run of TC1, inconclusive at its 60-pair budget on a shared machine)
TOY_COMPARE = REPO / "tests" / "data" / "history" / "toy-compare"


def test_a_real_compare_report_goes_in(tmp_path, capsys):
    doc = json.loads((TOY_COMPARE / "report.json").read_text())
    (w,) = doc["workloads"]
    store = tmp_path / "h.sqlite"
    assert main(["history", "--store", str(store), "add", str(TOY_COMPARE)]) == 0
    assert "1 added" in capsys.readouterr().out
    with Store(store) as st:
        assert [p.value for p in st.series("TC1", "compare.ratio")] == [w["ratio"]]
        (v,) = st.verdicts("TC1")
        assert v["verdict"] == w["speed"] and v["title"] == w["title"] and v["machine"] == UNRECORDED
        assert v["detail"]["ratios"] == [p["ratio"] for p in w["pair_log"]]


def test_both_compare_report_versions_go_in(tmp_path):
    # kite-compare/1 (the kept toy report, `detectable`) and /2 (today's writer, `half_width`)
    old = json.loads((TOY_COMPARE / "report.json").read_text())
    new = compare_doc(HEAD, [timed("CMP1", [1.0, 1.01, 0.99, 1.0] * 40)])
    assert (old["schema"], new["schema"]) == ("kite-compare/1", "kite-compare/2")
    assert "half_width" in new["workloads"][0] and "detectable" in old["workloads"][0]
    assert [r.kind for r in (read_doc(old, "old"), read_doc(new, "new"))] == ["compare", "compare"]
