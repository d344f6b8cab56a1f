"""Digests: the canonical form of each kind of value, and the properties a registered digest
needs (stable under key order and comments; changed by any value, and by a number's type, since the
engine gets each value's text)."""

from __future__ import annotations

import datetime
import hashlib
import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.contract import schema
from harness.contract.digest import canonical_json, criterion_digest, file_sha256, normalize


@pytest.mark.parametrize("value,canonical", [
    (1.0, "1.0"), (-2.0, "-2.0"), (0.0, "0.0"), (-0.0, "-0.0"), (1, "1"), (1.5, "1.5"), (-0.25, "-0.25"),
    (1e-7, "1e-07"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity"), (float("nan"), "NaN"),
    (float(2**53 - 1), "9007199254740991.0"), (float(2**53), "9007199254740992.0"), (float(-2**53), "-9007199254740992.0"),
    (2**70, str(2**70)), (True, "true"), (False, "false"), (None, "null"), ("1.5", '"1.5"'),
    ("é", '"é"'), ((1, 2.0), "[1,2.0]"), (datetime.date(2026, 1, 2), '"2026-01-02"')])
def test_canonical_form_of_each_value(value, canonical):
    assert canonical_json({"x": value}) == '{"x":' + canonical + "}"


def test_canonical_keys_and_nesting():
    assert canonical_json({"b": {"2": "z", "a": [{"d": 1.0, "c": None}]}, "a": ()}) == \
        '{"a":[],"b":{"2":"z","a":[{"c":null,"d":1.0}]}}'
    assert normalize({1: (2.0, [3.5])}) == {"\x001": [2.0, [3.5]]}
    assert type(normalize(True)) is bool and type(normalize(3.0)) is float and type(normalize(3)) is int


def test_numbers_and_their_text_digest_apart():
    for number, text in ((1.5, "1.5"), (float("inf"), "Infinity"), (2, "2"), (True, "true"), (None, "null")):
        assert criterion_digest({"x": number}) != criterion_digest({"x": text}), (number, text)
    assert criterion_digest({"x": 0.1 + 0.2}) != criterion_digest({"x": 0.3})
    assert criterion_digest({"x": 0.5}) == criterion_digest({"x": 0.50})  # one float, one text: "0.5"


def test_digest_is_the_sha256_of_the_canonical_text():
    doc = {"id": "A1", "title": "é"}
    want = hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()
    assert criterion_digest(doc) == "sha256:" + want


def test_file_sha256(tmp_path):
    big = bytes(range(256)) * 5000  # more than one 1 MiB chunk
    p = tmp_path / "f.bin"
    p.write_bytes(big)
    assert file_sha256(p) == hashlib.sha256(big).hexdigest()
    assert file_sha256(str(p)) == hashlib.sha256(big).hexdigest()
    (tmp_path / "e").write_bytes(b"")
    assert file_sha256(tmp_path / "e") == hashlib.sha256(b"").hexdigest()
    assert file_sha256(tmp_path / "missing") is None
    assert file_sha256(tmp_path) is None  # a folder is not a file
    assert file_sha256("") is None
    assert file_sha256(None) is None  # type: ignore[arg-type]  # an optional path left unset


# ---- properties of a registered criterion's digest ---------------------------------------------

BUILDS = ["default", "stub", "gpu"]
DUMPS = ["h_out", "logits"]

words = st.text(alphabet="abcxyz019_-.,", min_size=1, max_size=8)


@st.composite
def criteria(draw):
    """A valid equivalence criterion as a mapping, with generated names, arguments and limits."""
    env_b = draw(st.dictionaries(st.sampled_from(["KITE_A", "KITE_B", "KITE_C"]), words, min_size=1, max_size=3))
    return {"id": "P1", "title": draw(words), "kind": "equivalence",
            "args": ["run", "--model", "{model}", *draw(st.lists(words, max_size=4))],
            "variants": [{"name": "a"}, {"name": "b", "env": env_b}],
            "compare": {"dumps": draw(st.sampled_from([["h_out"], ["logits"], ["h_out", "logits"]])),
                        "mode": "tolerance", "max_abs": draw(st.floats(0.0, 10.0)),
                        "max_ulp": draw(st.integers(0, 1000))}}


def _yaml(crit: dict, order: list[int], comment: str) -> str:
    """The criterion as YAML with its keys in the given order and a comment on each line."""
    keys = list(crit)
    keys = [keys[i % len(keys)] for i in order] + keys
    body = {k: crit[k] for k in dict.fromkeys(keys)}
    text = yaml.safe_dump({"criteria": [body]}, sort_keys=False, allow_unicode=True)
    return "\n".join(f"{line}  # {comment}" if line.strip() and not line.rstrip().endswith("|") else line
                     for line in text.splitlines()) + "\n"


def _digest(text: str) -> str:
    (c,) = schema.load_text(text, "regressions/p.yaml", BUILDS, DUMPS)
    return c.digest


@settings(max_examples=40, deadline=None, derandomize=True)
@given(criteria(), st.permutations(range(7)), st.sampled_from(["note", "a: b", "- x", "é"]))
def test_digest_stable_under_key_order_and_comments(crit, order, comment):
    plain = yaml.safe_dump({"criteria": [crit]}, sort_keys=True)
    assert _digest(_yaml(crit, list(order), comment)) == _digest(plain)


def _leaves(doc, path=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, path + (i,))
    else:
        yield path, doc


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.5 if math.isfinite(value) else 0.0
    return value + "x"


@settings(max_examples=25, deadline=None, derandomize=True)
@given(criteria(), st.data())
def test_digest_changes_with_any_value(crit, data):
    base = _digest(yaml.safe_dump({"criteria": [crit]}))
    fixed = {("kind",), ("compare", "mode")}  # values the schema allows only from a list
    leaves = [(p, v) for p, v in _leaves(crit) if p not in fixed and p[:2] != ("compare", "dumps")]
    path, value = data.draw(st.sampled_from(leaves))
    node = crit
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = _changed(value)
    assert _digest(yaml.safe_dump({"criteria": [crit]})) != base, path
