"""One digest, one meaning: two spellings of a value that digest alike must reach the engine as the
same text (argv, environment, case values) and judge alike (json expectations). Issue 35, High 2:
`KITE_THREADS: 1.0` digested as `1` but the engine got "1.0"."""

from __future__ import annotations

import itertools
import math

import pytest

from harness.contract import criteria as C
from harness.contract import registry, schema

BUILDS = ["default"]
# YAML spellings of numbers and of their text; PyYAML reads some alike (.5 and 0.5, 0x7 and 7)
SPELLINGS = ["1", "1.0", '"1"', '"1.0"', "-0.0", "0", "0.0", '"0"', ".nan", '"nan"', ".inf", '"inf"', "-.inf",
             '"-inf"', "!!float 7", "7", "7.0", '"7"', "0x7", "07", "1.0e3", "1.0e+3", "1000.0", "1000", "1e3", ".5", "0.5",
             "0.50", "!!int 7", "!!str 7"]


def _run_criterion(value: str, where: str) -> str:
    """A run criterion with `value` in the environment, the argv or a case."""
    env = f"    env: {{KITE_THREADS: {value}}}\n" if where == "env" else ""
    args = f"[info, {value}]" if where == "args" else "[info, '{n}']" if where == "case" else "[info]"
    cases = f"    cases: [{{n: {value}}}]\n" if where == "case" else ""
    return (f"criteria:\n  - id: R1\n    title: t\n    kind: run\n{env}{cases}    args: {args}\n"
            "    runs: [{name: one}]\n")


def _engine_sees(c: C.Criterion) -> tuple:
    """The argv and environment each run gets (placeholders of the cases filled in)."""
    out = []
    for case in c.cases or [{}]:
        for v in c.variants():
            out.append(([C.substitute(a, case) for a in v.args], sorted(v.env.items())))
    return tuple(map(repr, out))


@pytest.mark.parametrize("where", ["env", "args", "case"])
def test_one_digest_is_one_argv_and_environment(where):
    seen: dict[str, tuple[str, tuple]] = {}
    for s in SPELLINGS:
        (c,) = schema.load_text(_run_criterion(s, where), "regressions/r.yaml", BUILDS, [])
        got = _engine_sees(c)
        first = seen.setdefault(c.digest, (s, got))
        assert first[1] == got, f"{first[0]} and {s} digest alike but the engine gets {first[1]} and {got}"


@pytest.mark.parametrize("a,b", [("1", "1.0"), ("0", "-0.0"), ("0", "0.0"), ("7", "!!float 7"), ("1000", "1.0e+3")])
def test_spellings_the_engine_tells_apart_digest_apart(a, b):
    for where in ("env", "args", "case"):
        (ca,) = schema.load_text(_run_criterion(a, where), "regressions/r.yaml", BUILDS, [])
        (cb,) = schema.load_text(_run_criterion(b, where), "regressions/r.yaml", BUILDS, [])
        assert _engine_sees(ca) != _engine_sees(cb)
        assert ca.digest != cb.digest, (a, b, where)


def _expecting(value: str) -> str:
    return ("criteria:\n  - id: R1\n    title: t\n    kind: run\n    args: [info, --json]\n"
            f"    runs: [{{name: one, expect: {{json: {{x: {value}}}}}}}]\n")


def test_one_digest_is_one_json_expectation():
    """`.nan` (the value NaN) and "nan" (the text) judge differently, so they digest apart."""
    actuals = [{"x": v} for v in (float("nan"), "nan", float("inf"), "inf", 1, 1.0, "1", 0, -0.0, 7, "7", None)]
    seen: dict[str, tuple[str, list]] = {}
    for s in SPELLINGS:
        (c,) = schema.load_text(_expecting(s), "regressions/r.yaml", BUILDS, [])
        want = c.spec.steps[0].expect.json["x"]
        verdicts = [C.check_expectation(doc, "x", want) is None for doc in actuals]
        first = seen.setdefault(c.digest, (s, verdicts))
        assert first[1] == verdicts, f"{first[0]} and {s} digest alike but judge differently"
    assert math.isnan(schema.load_text(_expecting(".nan"), "r.yaml", BUILDS, [])[0].spec.steps[0].expect.json["x"])


def test_registered_thread_count_edited_to_a_float_is_not_as_registered(tmp_path):
    """The attack of the issue: a registered `KITE_THREADS: 1` edited to `1.0` must not stay registered."""
    reg = tmp_path / "registry.lock"
    (c1,) = schema.load_text(_run_criterion("1", "env"), "regressions/r.yaml", BUILDS, [])
    registry.append(reg, [(c1, "register", "")])
    for edited in ("1.0", "!!float 1", "1.0e+0"):
        (c2,) = schema.load_text(_run_criterion(edited, "env"), "regressions/r.yaml", BUILDS, [])
        assert c2.variants()[0].env == {"KITE_THREADS": "1.0"}  # what the engine would get
        assert registry.status(registry.load(reg), c2).state == "changed", edited


def test_non_string_keys_are_refused_with_their_line():
    for key in ("1", "true", "null", "1.0"):
        text = _run_criterion("1", "env").replace("KITE_THREADS", key)
        with pytest.raises(Exception) as e:
            schema.load_text(text, "regressions/r.yaml", BUILDS, [])
        assert "regressions/r.yaml:5:" in str(e.value), str(e.value)


def test_all_spellings_load():
    """Every spelling above is a valid value in each place (no test above is vacuous)."""
    for s, where in itertools.product(SPELLINGS, ("env", "args", "case")):
        schema.load_text(_run_criterion(s, where), "regressions/r.yaml", BUILDS, [])
