"""CI smoke of the criteria-loader fuzz campaign (harness/tools/fuzz_criteria.py): every strategy
for a few dozen derandomized examples (seconds), plus the campaign's findings pinned as examples.
The long campaign: python -m harness.tools.fuzz_criteria --seconds 600 (docs/RELIABILITY.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402

from harness.tools import fuzz_criteria as F  # noqa: E402

SMOKE = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))


@SMOKE
@given(F.criteria_documents())
# found by the campaign (any text, seed 2029): PyYAML's float constructor indexes an empty value
@example("!!float")
@example("a: 2026-13-45")  # read as a date: ValueError from datetime
# found by the campaign: case keys of mixed types made the "same keys" message sort int with str
@example("criteria:\n- id: F0\n  title: t\n  kind: equivalence\n  cases:\n  - 0: null\n  - a: null\n")
# found: a repetition count too large for re (OverflowError) in must_match or a "~regex" expectation
@example("criteria:\n- {id: F0, title: t, kind: run, runs: [{args: [x], expect: {must_match: ['a{4294967296}']}}]}\n")
@example("criteria:\n- {id: F0, title: t, kind: run, runs: [{args: [x], expect: {json: {a: '~a{4294967296}'}}}]}\n")
def test_documents(text):
    F.check_text(text)


@SMOKE
@given(F.anchored_yaml())
def test_anchors_and_aliases(text):
    F.check_text(text)


@SMOKE
@given(F.mutated_file())
def test_mutated_real_files(text):
    F.check_text(text)


@SMOKE
@given(F.mutated_bytes())
def test_mutated_bytes_through_a_file(tmp_path_factory, data):
    F.check_bytes(data, tmp_path_factory.mktemp("fz"))


def test_seed_files_are_the_real_criteria():
    assert {"suite.yaml", "determinism.yaml", "example_suite.yaml"} <= set(F.SEEDS)


def test_property_catches_an_internal_error(monkeypatch):
    """The property can fail: a loader that raises anything but SchemaErrors is a finding."""
    def boom(*a, **k):
        raise KeyError("planted")

    monkeypatch.setattr(F.schema, "load_text", boom)
    with pytest.raises(KeyError):
        F.check_text("criteria: []")


def test_campaign_records_a_finding(monkeypatch, tmp_path):
    def boom(*a, **k):
        raise KeyError("planted")

    monkeypatch.setattr(F.schema, "load_text", boom)
    monkeypatch.setattr(F.schema, "load_file", boom)
    s = F.campaign(0.001, 3, tmp_path, examples=2, say=lambda s: None, shrink=False)
    assert s.total >= 5 and {f.strategy for f in s.findings} == set(F.TEXT_STRATEGIES) | {"mutated-bytes"}
    assert all("KeyError: 'planted'" in f.error for f in s.findings)
