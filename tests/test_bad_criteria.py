"""The regression corpus of bad criteria files (tests/data/bad_criteria/): each gives exactly its
expected first error line (file:line where there is one), through the loader and through
`harness verify FILE` with exit status 2, never an internal error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import SchemaErrors
from harness.contract import schema

CORPUS = Path(__file__).resolve().parent / "data" / "bad_criteria"


def _expected() -> dict[str, str]:
    out = {}
    for line in (CORPUS / "expected.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, message = line.split("\t", 1)
            out[name] = message
    return out


EXPECTED = _expected()


def test_corpus_is_complete():
    files = {p.name for p in CORPUS.glob("*.yaml")}
    assert files == set(EXPECTED), (files ^ set(EXPECTED))
    assert len(files) >= 50


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_loader_gives_the_expected_error(name, fake_repo):
    dst = fake_repo.root / "regressions" / name
    shutil.copyfile(CORPUS / name, dst)
    with pytest.raises(SchemaErrors) as e:
        schema.load_file(dst, fake_repo.root, ["default", "stub", "gpu"], ["h_out", "logits"])
    assert e.value.messages[0] == EXPECTED[name].replace("{file}", f"regressions/{name}")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cli_exits_2_with_the_expected_error(name, fake_repo, capsys):
    dst = fake_repo.root / "regressions" / name
    shutil.copyfile(CORPUS / name, dst)
    assert main(["--root", str(fake_repo.root), "verify", "--no-build", str(dst)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == EXPECTED[name].replace("{file}", f"regressions/{name}")
    assert lines[-1].startswith("harness: error: ") and lines[-1].endswith("in the criteria")
    assert not any("internal error" in ln or "Traceback" in ln for ln in lines)
