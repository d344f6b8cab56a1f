"""report.json's `criteria_files`: each criteria file's ids, matched by exact path (issue 35, Low)."""

from __future__ import annotations


def test_criteria_files_are_matched_by_exact_path(fake_repo):
    """report.json's criteria_files: a.yaml's criteria are not also xa.yaml's or sub/a.yaml's
    (they were matched by name suffix)."""
    def one(cid: str) -> str:
        return f"criteria:\n  - id: {cid}\n    title: t\n    kind: run\n    runs: [{{name: one, args: [info]}}]\n"

    (fake_repo.root / "regressions" / "sub").mkdir()
    files = [fake_repo.criteria(one("A1"), "a.yaml"), fake_repo.criteria(one("B1"), "xa.yaml"),
             fake_repo.criteria(one("C1"), "sub/a.yaml")]
    fake_repo.register(*files)
    assert fake_repo.verify(*map(str, files)) == 0
    assert fake_repo.report()["criteria_files"] == {str(files[0]): ["A1"], str(files[1]): ["B1"],
                                                    str(files[2]): ["C1"]}
