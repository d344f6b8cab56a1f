"""The documents say what the code does.

Every ```yaml example in README.md and docs/CRITERIA.md loads through the harness's criteria
validator (with the builds and dumps of configs/engine.yaml); the export count and names the docs
state are the `kcuda_` entry points of native/include/kite_cuda.h; README.md stays short;
docs/results/ keeps only a few cited files, none of them experiment patches or scratch sources,
and every results path a document names exists (a `git show HASH:path` names history).
"""

from __future__ import annotations

import re

import pytest

from engine_build import REPO, abi_names

# The criteria loader and the engine configuration: imported here only, so that a move of the
# harness's modules changes one block.
from harness.contract import schema as criteria_loader
from harness.contract.config import load_config

DOCS = REPO / "docs"
EXAMPLE_DOCS = ["README.md", "docs/CRITERIA.md"]
STATED_DOCS = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in DOCS.glob("*.md"))]
README_MAX_LINES = 130
RESULTS_MAX_FILES = 20
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)
# "16 `kcuda_` entry points", "exactly the 16 kcuda_ exports", ...
STATED_COUNT = re.compile(r"\b(\d+)\s+`?kcuda_`?\s+(?:entry points|entries|exports)")


def yaml_examples(doc: str) -> list[tuple[int, str]]:
    """(line of the block's first YAML line, text) for each ```yaml block of a document."""
    text = (REPO / doc).read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in YAML_BLOCK.finditer(text)]


def load_example(doc: str, line: int, text: str) -> list:
    cfg = load_config(REPO)
    # Blank lines in front keep the loader's line numbers those of the document.
    return criteria_loader.load_text("\n" * (line - 1) + text, doc, list(cfg.builds), list(cfg.dumps),
                                     list(cfg.env_names))


@pytest.mark.parametrize("doc", EXAMPLE_DOCS)
def test_yaml_examples_load_through_the_criteria_validator(doc):
    examples = yaml_examples(doc)
    assert examples, f"{doc} has no ```yaml example"
    for line, text in examples:
        assert load_example(doc, line, text), f"{doc}:{line}: example holds no criterion"


def test_example_ids_cannot_collide_with_registered_ids():
    """Issue 34: a copied example must not meet a registered id (ids are unique for good). The
    reference's examples use `doc-` ids; no example id of the docs is in the registry."""
    from harness.contract import registry

    registered = {e.id for e in registry.load(REPO / "regressions" / "registry.lock")}
    for doc in EXAMPLE_DOCS:
        for line, text in yaml_examples(doc):
            for c in load_example(doc, line, text):
                assert c.id not in registered, f"{doc}:{c.line}: example id {c.id} is registered"
                assert doc != "docs/CRITERIA.md" or c.id.startswith("doc-"), f"{doc}:{c.line}: {c.id}"


def criteria_reference_examples() -> list:
    return [c for line, text in yaml_examples("docs/CRITERIA.md") for c in load_example("docs/CRITERIA.md", line, text)]


def test_criteria_reference_shows_every_kind():
    assert {c.kind for c in criteria_reference_examples()} == set(criteria_loader.KIND_KEYS)


def test_criteria_reference_lists_the_abi_exports():
    artifacts = [c for c in criteria_reference_examples() if c.kind == "artifact"]
    listed = [name for c in artifacts for f in c.spec.files for name in f.exports_exactly or []]
    assert listed, "docs/CRITERIA.md has no artifact example with exports_exactly"
    assert sorted(listed) == sorted(abi_names())


@pytest.mark.parametrize("doc", STATED_DOCS)
def test_stated_export_counts_match_the_abi_header(doc):
    text = (REPO / doc).read_text(encoding="utf-8")
    for m in STATED_COUNT.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        assert int(m.group(1)) == len(abi_names()), f"{doc}:{line}: {m.group(0)!r}"


def test_export_count_is_stated_in_the_criteria_reference():
    assert STATED_COUNT.search((DOCS / "CRITERIA.md").read_text(encoding="utf-8"))


def test_readme_is_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_results_keep_only_a_few_cited_files():
    files = sorted(p for p in (DOCS / "results").rglob("*") if p.is_file())
    assert len(files) <= RESULTS_MAX_FILES, f"docs/results holds {len(files)} files"
    scratch = [p.name for p in files if p.suffix in (".patch", ".diff", ".cu", ".cpp", ".c")]
    assert not scratch, f"experiment patches or scratch sources in docs/results: {scratch}"


@pytest.mark.parametrize("doc", STATED_DOCS)
def test_named_results_exist(doc):
    text = (REPO / doc).read_text(encoding="utf-8")
    for m in re.finditer(r"(?<![:\w])docs/results/[\w./-]*\w/?", text):  # not `git show HASH:path`
        assert (REPO / m.group(0)).exists(), f"{doc} names {m.group(0)}, which does not exist"


# The verdict words that reports and pull-request comments link to (docs/GLOSSARY.md#WORD): each
# has its fixed anchor, and so does every verdict compare's sequential test can give.
GLOSSARY_ANCHORS = ["pass", "fail", "skip", "error", "identical", "bytes-changed", "regressed", "improved",
                    "equivalent", "inconclusive", "skipped", "compare-error", "first-bad-commit", "change-point"]


def test_the_glossary_anchors_every_verdict():
    from harness.compare.sequential import VERDICTS

    text = (DOCS / "GLOSSARY.md").read_text(encoding="utf-8")
    anchors = re.findall(r'<a id="([a-z-]+)"></a>', text)
    assert len(anchors) == len(set(anchors)), "an anchor named twice"
    missing = [a for a in [*GLOSSARY_ANCHORS, *VERDICTS] if a not in anchors]
    assert not missing, f"docs/GLOSSARY.md has no anchor for {missing}"
    for a in re.findall(r"\]\(#([a-z-]+)\)", text):
        assert a in anchors, f"docs/GLOSSARY.md links to #{a}, which it does not have"


# A page under docs/ as the documents, the configuration, the harness and its tests name it; native/ and
# bench/ are kept by others (their names are listed in the report of the change that renamed one)
NAMED_DOC = re.compile(r"\bdocs/([A-Z][A-Z0-9-]*\.md)\b")
NAMING = ["README.md", "docs/*.md", "configs/*.yaml", "harness/**/*.py", "tests/*.py", "examples/**/*.md"]


def test_every_named_document_exists():
    for pattern in NAMING:
        for path in sorted(REPO.glob(pattern)):
            for m in NAMED_DOC.finditer(path.read_text(encoding="utf-8")):
                assert (DOCS / m.group(1)).is_file(), f"{path.relative_to(REPO)} names docs/{m.group(1)}: no such file"
