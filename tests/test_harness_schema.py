"""Schema: valid files load; each kind of mistake gives a message naming file, line, key and
what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract import schema
from harness.errors import SchemaErrors
from harness.contract import criteria as C

DATA = Path(__file__).parent / "data"
BUILDS = ["default", "stub", "gpu"]
DUMPS = ["h_out", "logits"]

GOOD = """\
criteria:
  - id: A1
    title: ok
    kind: equivalence
    args: [run, --model, "{model}"]
    variants:
      - {name: a}
      - {name: b, env: {KITE_CUDA_GRAPH: "0"}}
    compare: {dumps: [h_out]}
"""


def errors(text: str) -> list[str]:
    with pytest.raises(SchemaErrors) as ei:
        schema.load_text(text, "regressions/t.yaml", BUILDS, DUMPS)
    return ei.value.messages


def one_error(text: str) -> str:
    msgs = errors(text)
    assert len(msgs) == 1, msgs
    return msgs[0]


def test_example_suite_loads():
    crits = schema.load_file(DATA / "example_suite.yaml", DATA.parent.parent, BUILDS, DUMPS)
    assert [c.kind for c in crits] == ["equivalence", "equivalence", "ab_timing", "ab_timing", "run", "artifact"]
    x2 = crits[1]
    assert [c["steps"] for c in x2.cases] == ["1", "5", "17"]
    x3 = crits[2].spec
    assert (x3.pass_stat, x3.pass_op, x3.pass_value, x3.seed, x3.noise_floor) == ("ci_lower", ">=", 1.05, 7, True)


def test_good_minimal():
    (c,) = schema.load_text(GOOD, "regressions/t.yaml", BUILDS, DUMPS)
    assert c.spec.variants[1].env == {"KITE_CUDA_GRAPH": "0"}
    assert c.spec.variants[0].build == "default"


CASES = [
    # (name, text, fragments expected in the one message)
    ("yaml_syntax", "criteria:\n  - id: [unclosed\n", ["t.yaml:", "not valid YAML"]),
    ("top_not_mapping", "- 1\n- 2\n", ["t.yaml:1", "must be a mapping"]),
    ("unknown_top_key", GOOD + "extra: 1\n", ["t.yaml:10", "unknown key 'extra'", "allowed: version, description"]),
    ("missing_criteria", "version: 1\n", ["missing required key 'criteria'"]),
    ("bad_version", "version: 2\n" + GOOD, ["t.yaml:1", "version", "allowed: 1"]),
    ("missing_id", GOOD.replace("  - id: A1\n    title", "  - title"), ["t.yaml:2", "missing required key 'id'"]),
    ("bad_id", GOOD.replace("id: A1", "id: 1bad id"), ["t.yaml:2", "criteria[0] (1bad id).id", "not valid"]),
    ("unknown_kind", GOOD.replace("kind: equivalence", "kind: speed"),
     ["t.yaml:4", "'speed' is not allowed", "allowed: equivalence, ab_timing, run, artifact"]),
    ("unknown_key", GOOD.replace("    title: ok\n", "    title: ok\n    thresold: 3\n"),
     ["t.yaml:4", "criteria[0] (A1).thresold", "unknown key 'thresold'", "allowed: id, title, kind"]),
    ("one_variant", GOOD.replace("      - {name: b, env: {KITE_CUDA_GRAPH: \"0\"}}\n", ""),
     ["t.yaml:6", "variants", "at least 2"]),
    ("dup_variant", GOOD.replace("{name: b,", "{name: a,"), ["t.yaml:8", "duplicate variant name 'a'"]),
    ("unknown_build", GOOD.replace("{name: a}", "{name: a, build: cuda12}"),
     ["t.yaml:7", "unknown build 'cuda12'", "default, stub, gpu"]),
    ("unknown_requires", GOOD.replace("    title: ok\n", "    title: ok\n    requires: [gpu, tpu]\n"),
     ["t.yaml:4", "requires[1]", "'tpu' is not allowed", "gpu, no_gpu, nvcc, module_cc, host_cc"]),
    ("bad_precondition", GOOD.replace("{name: a}", "{name: a, preconditions: {counters.graph_replays: \">zero\"}}"),
     ["t.yaml:7", "preconditions.counters.graph_replays", "bad comparison"]),
    ("bad_mode", GOOD.replace("{dumps: [h_out]}", "{dumps: [h_out], mode: memcpy}"),
     ["t.yaml:9", "compare.mode", "'memcpy' is not allowed", "allowed: memcmp, tolerance"]),
    ("tolerance_in_memcmp", GOOD.replace("{dumps: [h_out]}", "{dumps: [h_out], max_ulp: 2}"),
     ["t.yaml:9", "max_ulp", "needs `mode: tolerance`"]),
    ("tolerance_without_bound", GOOD.replace("{dumps: [h_out]}", "{dumps: [h_out], mode: tolerance}"),
     ["t.yaml:9", "at least one of max_abs, max_ulp, nmse"]),
    ("unknown_dump", GOOD.replace("[h_out]", "[hidden]"), ["t.yaml:9", "unknown dump 'hidden'", "h_out, logits"]),
    ("shell_string_args", GOOD.replace('args: [run, --model, "{model}"]', 'args: "run --model x"'),
     ["t.yaml:5", "argv list", "shell command string is not allowed"]),
    ("unknown_placeholder", GOOD.replace('"{model}"', '"{modle}"'),
     ["t.yaml:5", "unknown placeholder {modle}", "{model}"]),
    ("env_bool", GOOD.replace('KITE_CUDA_GRAPH: "0"', "KITE_CUDA_GRAPH: false"),
     ["t.yaml:8", "env.KITE_CUDA_GRAPH", "quote it"]),
    ("bad_layout", GOOD.replace("{name: a}", "{name: a, layout: bare}"),
     ["t.yaml:7", "layout", "allowed: normal, engine_only"]),
    ("dup_key", GOOD.replace("    title: ok\n", "    title: ok\n    title: again\n"),
     ["t.yaml:4", "duplicate key 'title'"]),
    ("bad_regex", "criteria:\n  - id: R\n    title: t\n    kind: run\n    runs:\n"
                  "      - {args: [selftest], expect: {must_match: ['(unclosed']}}\n",
     ["t.yaml:6", "must_match[0]", "bad regular expression"]),
]

AB = """\
criteria:
  - id: B1
    title: ab
    kind: ab_timing
    args: [run]
    a: {name: off, env: {KITE_CUDA_GRAPH: "0"}}
    b: {name: on}
    pairs: 10
    pass_if: "ci_lower >= 1.05"
"""

CASES += [
    ("ab_pairs_type", AB.replace("pairs: 10", "pairs: ten"), ["t.yaml:8", "pairs", "must be an integer"]),
    ("ab_pairs_min", AB.replace("pairs: 10", "pairs: 1"), ["t.yaml:8", "must be >= 2"]),
    ("ab_order", AB + "    order: BAAB\n", ["t.yaml:10", "'BAAB' is not allowed", "allowed: ABBA, AB"]),
    ("ab_pass_if", AB.replace('"ci_lower >= 1.05"', '"faster by 5%"'),
     ["t.yaml:9", "pass_if", "ci_lower, ci_upper, median"]),
    ("ab_missing_b", AB.replace("    b: {name: on}\n", ""), ["missing required key 'b'", "same_run"]),
    ("ab_same_run_with_b", AB + "    same_run: true\n", ["`same_run: true`", "remove `b`"]),
    ("ab_cases", AB + "    cases: [{n: 1}]\n", ["t.yaml:10", "not supported for ab_timing"]),
    ("ab_reduce", AB + "    metric: {field: timings.request_ms, reduce: p99}\n",
     ["t.yaml:10", "'p99' is not allowed", "median, mean"]),
    ("ab_program_path", AB.replace("b: {name: on}", "b: {name: on, program: ../bin/llama-bench}"),
     ["t.yaml:7", "program", "a file name in the build's bin folder"]),
    ("ab_program_layout", AB.replace("b: {name: on}", "b: {name: on, program: llama-bench, layout: engine_only}"),
     ["t.yaml:7", "`program` runs from the build's bin folder"]),
    ("equivalence_program", GOOD.replace("{name: a", "{name: a, program: llama-bench", 1),
     ["program", "`program` is for `ab_timing` and `run`"]),
    ("ab_metric_scale", AB + "    metric_b: {field: 0.samples_ns, scale: 0}\n", ["t.yaml:10", "scale", "must be > 0"]),
    ("artifact_missing_files", "criteria:\n  - {id: F, title: t, kind: artifact}\n",
     ["t.yaml:2", "missing required key 'files'"]),
    ("run_exit_type", "criteria:\n  - id: R\n    title: t\n    kind: run\n    runs:\n"
                      "      - {args: [selftest], expect: {exit: zero}}\n", ["t.yaml:6", "exit", "integer"]),
    ("compare_same_without_dumps", "criteria:\n  - id: W\n    title: t\n    kind: compare\n    args: [run]\n"
                                   "    bytes: same\n    margin: 0.02\n    budget: {pairs: 8}\n",
     ["t.yaml:6", "`bytes: same` needs `dumps` (the dumps that must stay byte-identical)"]),
    ("compare_without_args", "criteria:\n  - id: W\n    title: t\n    kind: compare\n    args: []\n"
                             "    dumps: [h_out]\n    margin: 0.02\n    budget: {pairs: 8}\n",
     ["t.yaml:5: criteria[0] (W).args: no `args`: give the engine argv"]),
    ("compare_within_bad_ulp", "criteria:\n  - id: W\n    title: t\n    kind: compare\n    args: [run]\n"
                               "    dumps: [h_out]\n    bytes:\n      within:\n        max_ulp: -1\n"
                               "    margin: 0.02\n    budget: {pairs: 8}\n",
     ["t.yaml:9", "max_ulp"]),
    ("compare_margin_too_large", "criteria:\n  - id: W\n    title: t\n    kind: compare\n    args: [run]\n"
                                 "    dumps: [h_out]\n    margin: 0.9\n    budget: {pairs: 8}\n",
     ["t.yaml:7: criteria[0] (W).margin:"]),
]


@pytest.mark.parametrize("name,text,fragments", CASES, ids=[c[0] for c in CASES])
def test_schema_error(name, text, fragments):
    msgs = errors(text)
    joined = "\n".join(msgs)
    assert msgs[0].startswith("regressions/t.yaml:"), joined
    for f in fragments:
        assert f in joined, f"{f!r} not in:\n{joined}"


def test_at_least_15_distinct_errors():
    assert len({c[0] for c in CASES}) >= 15


def test_duplicate_id_across_files(tmp_path):
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text(GOOD)
    b.write_text("# another file\n" + GOOD)
    with pytest.raises(SchemaErrors) as ei:
        schema.load_many([a, b], tmp_path, BUILDS, DUMPS)
    assert "b.yaml:3: id 'A1' is already used at a.yaml:2" in ei.value.messages[0]


def test_duplicate_id_same_file():
    text = GOOD + GOOD.split("criteria:\n", 1)[1]
    msg = one_error(text)
    assert "t.yaml:10" in msg and "duplicate id 'A1' (first at line 2)" in msg


def test_several_errors_reported_together():
    text = GOOD.replace("kind: equivalence", "kind: equivalence\n    pairs: 3").replace("[h_out]", "[x]")
    assert len(errors(text)) == 2


def test_merge_keys_and_anchors():
    text = """\
definitions:
  base: &base {name: a, build: stub}
criteria:
  - id: M
    title: t
    kind: equivalence
    args: [run]
    variants:
      - *base
      - {<<: *base, name: b, env: {X: "1"}}
    compare: {dumps: [logits]}
"""
    (c,) = schema.load_text(text, "t.yaml", BUILDS, DUMPS)
    assert [(v.name, v.build) for v in c.spec.variants] == [("a", "stub"), ("b", "stub")]


# ---- exact messages and defaults (each pinned against a surviving mutant) -------------------

AB_T = """\
criteria:
  - id: T1
    title: t
    kind: ab_timing
    args: [run]
    a: {name: a}
    %s
    metric: {field: timings.request_ms}
    pairs: 3
    pass_if: "ci_lower >= 1.0"
"""

RUN_T = """\
criteria:
  - id: R1
    title: t
    kind: run
    runs:
%s
"""


@pytest.mark.parametrize("text,message", [
    (GOOD.replace("    compare:", "    cases: []\n    compare:"),
     "t.yaml:9: criteria[0] (A1).cases: must be a non-empty list of mappings (placeholder -> value)"),
    (AB_T % "same_run: true\n    b: {name: b}\n    metric_a: {field: x}\n    metric_b: {field: y}",
     "t.yaml:8: criteria[0] (T1).b: `same_run: true` reads A and B from one run of `a`; remove `b`"),
    (AB_T % "b: {name: b}\n    confidence: 0.2", "t.yaml:8: criteria[0] (T1).confidence: must be >= 0.5, not 0.2"),
    (AB_T % "b: {name: b}\n    bootstrap: {resamples: 5}",
     "t.yaml:8: criteria[0] (T1).bootstrap.resamples: must be >= 100, not 5"),
    (AB_T.replace("    args: [run]\n", "") % "b: {name: b, args: [run]}",
     "t.yaml:5: criteria[0] (T1).a: no `args`: give the engine argv at the criterion or variant level"),
    (AB_T.replace("    args: [run]\n", "").replace("a: {name: a}", "a: {name: a, args: [run]}") % "b: {env: {X: '1'}}",
     "t.yaml:6: criteria[0] (T1).b: no `args`: give the engine argv at the criterion or variant level"),
    (RUN_T % "      - 3", "t.yaml:6: criteria[0] (R1).runs[0]: a run must be a mapping, not an integer"),
    (RUN_T % "      - {name: x, args: [info]}\n      - {name: x, args: [info]}",
     "t.yaml:7: criteria[0] (R1).runs[1].name: duplicate run name 'x'"),
    (RUN_T % "      - {name: x, args: [info], expect: {must_match: [\"(\"]}}",
     "t.yaml:6: criteria[0] (R1).runs[0].expect.must_match[0]: bad regular expression '(': missing ), "
     "unterminated subpattern at position 0"),
    (RUN_T % "      - {name: x, args: [info], expect: {must_match: 3}}",
     "t.yaml:6: criteria[0] (R1).runs[0].expect.must_match: must be a list of regular expressions, not an integer"),
])
def test_exact_messages(text, message):
    assert one_error(text) == "regressions/" + message


def test_defaults_and_overrides():
    (c,) = schema.load_text(AB_T % "b: {env: {X: '1'}}\n    confidence: 0.9\n    bootstrap: {resamples: 500, seed: 4}",
                            "regressions/t.yaml", BUILDS, DUMPS)
    s = c.spec
    assert (s.b.name, s.confidence, s.resamples, s.seed, s.warmups, s.order) == ("B", 0.9, 500, 4, 1, "ABBA")
    (c,) = schema.load_text(AB_T % "b: {name: b}", "regressions/t.yaml", BUILDS, DUMPS)
    assert (c.spec.confidence, c.spec.resamples) == (0.95, 2000)
    (c,) = schema.load_text(RUN_T % "      - {args: [info]}\n      - {args: [selftest]}", "regressions/t.yaml",
                            BUILDS, DUMPS)
    assert [st.variant.name for st in c.spec.steps] == ["run1", "run2"]


def _g(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


@pytest.mark.parametrize("text,message", [
    (_g("{dumps: [h_out]}", "{dumps: [h_out], nope: 1}"),
     "t.yaml:9: criteria[0] (A1).compare.nope: unknown key 'nope' in compare; allowed: dumps, mode, max_abs, "
     "max_ulp, nmse, allow_nan"),
    (_g("{dumps: [h_out]}", "{dumps: [h_out], mode: tolerance, nmse: -1}"),
     "t.yaml:9: criteria[0] (A1).compare.nmse: must be >= 0, not -1"),
    (_g("    variants:", "    timeout_s: 0\n    variants:"), "t.yaml:6: criteria[0] (A1).timeout_s: must be > 0, not 0"),
    (_g("    variants:", "    description: 3\n    variants:"),
     "t.yaml:6: criteria[0] (A1).description: must be a string, not an integer"),
    (_g("- {name: a}", "- {name: a, place: {x.so: '{module}'}}"),
     "t.yaml:7: criteria[0] (A1).variants[0].place: `place` needs `layout: engine_only` (files are copied next "
     "to a copied engine)"),
    (_g("- {name: a}", "- {name: a, layout: engine_only, place: {a/x.so: '{module}'}}"),
     "t.yaml:7: criteria[0] (A1).variants[0].place.a/x.so: 'a/x.so' must be a plain file name"),
    (_g("- {name: a}", "- {name: a, wrapper: [env, '{nope}']}"),
     "t.yaml:7: criteria[0] (A1).variants[0].wrapper[1]: unknown placeholder {nope}; allowed: {bin}, {build}, "
     "{engine}, {engine_dir}, {model}, {module}, {nonexistent}, {root}, {testmods}, {work}"),
    (_g('KITE_CUDA_GRAPH: "0"', '1BAD: "0"'),
     "t.yaml:8: criteria[0] (A1).variants[1].env.1BAD: '1BAD' is not a valid environment variable name"),
    (_g('args: [run, --model, "{model}"]', 'args: "run --model x"'),
     "t.yaml:5: criteria[0] (A1).args: must be an argv list (YAML list of strings); a shell command string is "
     "not allowed"),
    (_g('args: [run, --model, "{model}"]', 'args: [run, [x]]'),
     "t.yaml:5: criteria[0] (A1).args[1]: must be a string, not a list"),
])
def test_exact_messages_common(text, message):
    assert one_error(text) == "regressions/" + message


def test_common_keys_loaded():
    def one(old, new):
        (c,) = schema.load_text(_g(old, new), "regressions/t.yaml", BUILDS, DUMPS)
        return c
    c = one("{dumps: [h_out]}", "{dumps: [h_out], allow_nan: true, mode: tolerance, nmse: 0.5}")
    assert (c.spec.compare.allow_nan, c.spec.compare.nmse, c.model, c.timeout_s, c.description) == \
        (True, 0.5, None, None, "")
    assert one("    variants:", "    model: tiny\n    variants:").model == {"recipe": "tiny", "qtype": None}
    assert one("    variants:", "    model: {recipe: tiny, qtype: q8_0}\n    variants:").model == \
        {"recipe": "tiny", "qtype": "q8_0"}
    assert one("    variants:", "    model: default\n    variants:").model is None
    c = one("    variants:", "    timeout_s: 7\n    description: why\n    variants:")
    assert (c.timeout_s, c.description) == (7, "why")
    c = one("- {name: a}", "- {name: a, layout: engine_only, place: {x.so: '{module}'}, wrapper: [env, '{work}']}")
    a = c.spec.variants[0]
    assert (a.layout, a.place, a.wrapper) == ("engine_only", {"x.so": "{module}"}, ["env", "{work}"])
    assert one('KITE_CUDA_GRAPH: "0"', 'lower_Ok: "0"').spec.variants[1].env == {"lower_Ok": "0"}


def test_every_duplicate_id_across_files_is_reported(tmp_path):
    two = GOOD + GOOD.replace("criteria:\n", "").replace("A1", "B1")
    (tmp_path / "one.yaml").write_text(two)
    (tmp_path / "two.yaml").write_text(two)
    with pytest.raises(SchemaErrors) as ei:
        schema.load_many([tmp_path / "one.yaml", tmp_path / "two.yaml"], tmp_path, BUILDS, DUMPS)
    assert ei.value.messages == ["two.yaml:2: id 'A1' is already used at one.yaml:2",
                                 "two.yaml:10: id 'B1' is already used at one.yaml:10"]


def test_unknown_kind_is_the_only_message():
    """Keys of every kind stay optional while the kind is unknown: one message, not a list of
    'missing required key'."""
    msg = one_error("criteria:\n  - {id: K1, title: t, kind: nope, args: [run]}\n")
    assert msg.startswith("regressions/t.yaml:2: criteria[0] (K1).kind: ") and "nope" in msg


def test_artifact_export_checks_loaded():
    (c,) = schema.load_text("criteria:\n  - id: F1\n    title: t\n    kind: artifact\n    files:\n"
                            "      - {path: '{module}', exports_exactly: [kcuda_a, kcuda_b], exports_match: '^kcuda_'}\n",
                            "regressions/t.yaml", BUILDS, DUMPS)
    fc = c.spec.files[0]
    assert (fc.exports_exactly, fc.exports_match) == (["kcuda_a", "kcuda_b"], "^kcuda_")


@pytest.mark.parametrize("text,message", [
    ("criteria:\n  - {id: F1, title: t, kind: artifact, files: []}\n",
     "t.yaml:2: criteria[0] (F1).files: must be a non-empty list of file checks"),
    ("criteria:\n  - {id: F1, title: t, kind: artifact, files: {a: 1}}\n",
     "t.yaml:2: criteria[0] (F1).files: must be a non-empty list of file checks"),
    (_g("- {name: a}", "- {name: a, layout: engine_only, place: {'.': '{module}'}}"),
     "t.yaml:7: criteria[0] (A1).variants[0].place..: '.' must be a plain file name"),
    (_g("- {name: a}", "- {name: a, layout: engine_only, place: {'..': '{module}'}}"),
     "t.yaml:7: criteria[0] (A1).variants[0].place...: '..' must be a plain file name"),
    (_g('args: [run, --model, "{model}"]', 'args: [run, {a: 1}]'),
     "t.yaml:5: criteria[0] (A1).args[1]: must be a string, not a mapping"),
])
def test_exact_messages_more(text, message):
    assert one_error(text) == "regressions/" + message


@pytest.mark.parametrize("text,message", [
    (AB_T % "b: {name: b, nope: 1}",
     "t.yaml:7: criteria[0] (T1).b.nope: unknown key 'nope' in variant b; allowed: name, build, layout, place, env, "
     "args, extra_args, preconditions, wrapper, program"),
    (AB_T.replace("{field: timings.request_ms}", "{field: 'a..b'}") % "b: {name: b}",
     "t.yaml:8: criteria[0] (T1).metric.field: 'a..b' is not valid: a dotted field of meta.json like "
     "timings.request_ms"),
    (_g("{dumps: [h_out]}", "{dumps: [h_out], mode: tolerance, max_abs: -1}"),
     "t.yaml:9: criteria[0] (A1).compare.max_abs: must be >= 0, not -1"),
    ("criteria:\n  - 3\n", "t.yaml:2: criteria[0]: a criterion must be a mapping, not an integer"),
])
def test_exact_messages_rebased(text, message):
    assert one_error(text) == "regressions/" + message


@pytest.mark.parametrize("text,message", [
    (_g("kind: equivalence", "kind: equivalence\n    build: nope"),
     "t.yaml:5: criteria[0] (A1).build: unknown build 'nope'; builds defined in configs/engine.yaml: default, stub, gpu"),
    (_g("- {name: a}", "- {name: a, layout: engine_only, place: {x.so: 3}}"),
     "t.yaml:7: criteria[0] (A1).variants[0].place.x.so: source must be a path string, not an integer"),
    ("criteria:\n  - {id: R1, title: t, kind: run, runs: [{name: x, args: [info], expect: {passes_min: -1}}]}\n",
     "t.yaml:2: criteria[0] (R1).runs[0].expect.passes_min: must be >= 0, not -1"),
])
def test_exact_messages_of_the_last_sample(text, message):
    assert one_error(text) == "regressions/" + message


def test_passes_min_zero_is_allowed():
    (c,) = schema.load_text("criteria:\n  - {id: R1, title: t, kind: run, runs: [{name: x, args: [info], "
                            "expect: {passes_min: 0}}]}\n", "regressions/t.yaml", BUILDS, DUMPS)
    assert c.spec.steps[0].expect.passes_min == 0


# ---- exactly: every message of a mistake, and the spec of each accepted form ----------------

F = "regressions/t.yaml"
PLACEHOLDERS = "{bin}, {build}, {engine}, {engine_dir}, {model}, {module}, {nonexistent}, {root}, {testmods}, {work}"
BAD_RE = "bad regular expression '(': missing ), unterminated subpattern at position 0"

AB_X = """\
criteria:
  - id: T
    title: t
    kind: ab_timing
    args: [run]
    a: {name: x}
    b: {name: y}
    pairs: 4
    pass_if: "median >= 1.0"
"""
RUN = "criteria:\n  - id: R\n    title: t\n    kind: run\n    runs:\n"
ART = "criteria:\n  - id: F\n    title: t\n    kind: artifact\n    files:\n"
EQ = """\
criteria:
  - id: Q
    title: t
    kind: equivalence
    args: [run]
    variants: [{name: a}, {name: b}]
    compare: {dumps: [h_out]}
"""


def load(text: str) -> list[C.Criterion]:
    return schema.load_text(text, F, BUILDS, DUMPS)


def messages(text: str) -> list[str]:
    with pytest.raises(SchemaErrors) as e:
        load(text)
    return e.value.messages


BAD = {
    "ab_same_run_not_bool": (AB_X + "    same_run: 1\n",
                             ["10: criteria[0] (T).same_run: must be true or false, not an integer"]),
    "ab_same_run_one_metric": (AB_X.replace("    b: {name: y}\n", "") + "    same_run: true\n    metric_a: timings.x\n",
                               ["9: criteria[0] (T).same_run: `same_run: true` needs `metric_a` and `metric_b`"]),
    "ab_a_missing": (AB_X.replace("    a: {name: x}\n", ""),
                     ["2: criteria[0] (T): missing required key 'a' in an ab_timing criterion"]),
    "ab_a_unknown_key": (AB_X.replace("a: {name: x}", "a: {name: x, nmae: 1}"),
                         ["6: criteria[0] (T).a.nmae: unknown key 'nmae' in variant a; allowed: name, build, layout, "
                          "place, env, args, extra_args, preconditions, wrapper, program"]),
    "ab_b_unknown_key": (AB_X.replace("b: {name: y}", "b: {name: y, nmae: 1}"),
                         ["7: criteria[0] (T).b.nmae: unknown key 'nmae' in variant b; allowed: name, build, layout, "
                          "place, env, args, extra_args, preconditions, wrapper, program"]),
    "ab_a_bad_name": (AB_X.replace("a: {name: x}", "a: {name: '-x'}"),
                      ["6: criteria[0] (T).a.name: '-x' is not valid: letters, digits, '_', '.', '-'"]),
    "ab_b_missing": (AB_X.replace("    b: {name: y}\n", ""),
                     ["2: criteria[0] (T): missing required key 'b' (or set `same_run: true`)"]),
    "ab_warmups_negative": (AB_X + "    warmups: -1\n", ["10: criteria[0] (T).warmups: must be >= 0, not -1"]),
    "ab_metric_a_bad": (AB_X + "    metric_a: {field: 'a b'}\n",
                        ["10: criteria[0] (T).metric_a.field: 'a b' is not valid: a dotted field of meta.json like "
                         "timings.request_ms"]),
    "ab_metric_b_bad": (AB_X + "    metric_b: {field: t, reduce: p99}\n",
                        ["10: criteria[0] (T).metric_b.reduce: 'p99' is not allowed; allowed: median, mean, min, max, "
                         "first, last, sum, rest_median"]),
    "ab_metric_unknown_key": (AB_X + "    metric: {field: t, reduction: min}\n",
                              ["10: criteria[0] (T).metric.reduction: unknown key 'reduction' in metric; "
                               "allowed: field, reduce, scale"]),
    "ab_metric_no_field": (AB_X + "    metric: {reduce: min}\n",
                           ["10: criteria[0] (T).metric: missing required key 'field' in metric"]),
    "ab_ratio_bad": (AB_X + "    ratio: a-b\n", ["10: criteria[0] (T).ratio: 'a-b' is not allowed; allowed: a/b, b/a"]),
    "ab_pass_if_number": (AB_X.replace('pass_if: "median >= 1.0"', "pass_if: 5"),
                          ["9: criteria[0] (T).pass_if: 5 is not allowed; write `<stat> <op> <number>` with stat one "
                           "of ci_lower, ci_upper, median and op one of >=, <=, >, <, e.g. \"ci_lower >= 1.05\""]),
    "ab_bootstrap_unknown": (AB_X + "    bootstrap: {resamples: 200, sed: 1}\n",
                             ["10: criteria[0] (T).bootstrap.sed: unknown key 'sed' in bootstrap; allowed: resamples, "
                              "seed"]),
    "ab_bootstrap_seed_negative": (AB_X + "    bootstrap: {seed: -1}\n",
                                   ["10: criteria[0] (T).bootstrap.seed: must be >= 0, not -1"]),
    "ab_bootstrap_seed_too_large": (AB_X + "    bootstrap: {seed: 9223372036854775808}\n",
                                    ["10: criteria[0] (T).bootstrap.seed: must be <= 9223372036854775807, "
                                     "not 9223372036854775808"]),
    "ab_noise_floor_not_bool": (AB_X + "    noise_floor: yes please\n",
                                ["10: criteria[0] (T).noise_floor: must be true or false, not a string"]),
    "ab_interval_bad": (AB_X + "    interval: student\n",
                        ["10: criteria[0] (T).interval: 'student' is not allowed; allowed: percentile, bca, order"]),
    "model_path_extra": (AB_X + "    model: {path: m.gguf, qtype: q4}\n",
                         ["10: criteria[0] (T).model.qtype: unknown key 'qtype' in model; allowed: path"]),
    "model_path_number": (AB_X + "    model: {path: 3}\n",
                          ["10: criteria[0] (T).model.path: must be a non-empty string, not an integer"]),
    "model_recipe_number": (AB_X + "    model: {recipe: 3, qtype: 4}\n",
                            ["10: criteria[0] (T).model.recipe: must be a non-empty string, not an integer",
                             "10: criteria[0] (T).model.qtype: must be a non-empty string, not an integer"]),
    "model_qtype_only": (AB_X + "    model: {qtype: q4}\n",
                         ["10: criteria[0] (T).model: missing required key 'recipe' in model"]),
    "env_not_mapping": (AB_X + "    env: [A]\n",
                        ["10: criteria[0] (T).env: must be a mapping of variable -> value, not a list"]),
    "env_two_bad_names": (AB_X + "    env: {1A: x, 'B-C': y}\n",
                          ["10: criteria[0] (T).env.1A: '1A' is not a valid environment variable name",
                           "10: criteria[0] (T).env.B-C: 'B-C' is not a valid environment variable name"]),
    "env_two_bad_values": (AB_X + "    env: {A: [1], B: null}\n",
                           ['10: criteria[0] (T).env.A: value must be a string or number (quote it: "0"), not a list',
                            '10: criteria[0] (T).env.B: value must be a string or number (quote it: "0"), not null']),
    "env_key_placeholder": (AB_X + "    env: {'{env.nope}': '1'}\n",
                            [f"10: criteria[0] (T).env.{{env.nope}}: unknown placeholder {{env.nope}}; allowed: "
                             f"{PLACEHOLDERS}"]),
    "env_value_placeholder": (AB_X + "    env: {A: '{nope}'}\n",
                              [f"10: criteria[0] (T).env.A: unknown placeholder {{nope}}; allowed: {PLACEHOLDERS}"]),
    "env_value_climbs": (AB_X + "    env: {A: '{work}/../x'}\n",
                         ["10: criteria[0] (T).env.A: '{work}/../x' climbs out of {work}: a path built from {work} "
                          "must stay inside it"]),
    "preconditions_not_mapping": (AB_X.replace("b: {name: y}", "b: {name: y, preconditions: [1]}"),
                                  ["7: criteria[0] (T).b.preconditions: must be a mapping of dotted field -> "
                                   "expectation, not a list"]),
    "preconditions_two_bad_keys": (AB_X.replace("b: {name: y}", "b: {name: y, preconditions: {'a b': 1, 'c..d': 2}}"),
                                   ["7: criteria[0] (T).b.preconditions.a b: 'a b' is not a dotted field path like "
                                    "counters.graph_replays",
                                    "7: criteria[0] (T).b.preconditions.c..d: 'c..d' is not a dotted field path like "
                                    "counters.graph_replays"]),
    "cases_not_mappings": (EQ + "    cases: [x, {}]\n",
                           ["8: criteria[0] (Q).cases[0]: a case must be a non-empty mapping, not a string",
                            "8: criteria[0] (Q).cases[1]: a case must be a non-empty mapping, not a mapping"]),
    "cases_two_bad_values": (EQ + "    cases: [{n: [1], m: true}]\n",
                             ["8: criteria[0] (Q).cases[0].n: case value must be a string or number, not a list",
                              "8: criteria[0] (Q).cases[0].m: case value must be a string or number, not a boolean"]),
    "cases_keys_differ": (EQ + "    cases: [{n: 1, m: 2}, {n: 3}]\n",
                          ["8: criteria[0] (Q).cases[1]: every case must have the same keys: m, n"]),
    "run_two_not_mappings": (RUN + "      - 1\n      - x\n",
                             ["6: criteria[0] (R).runs[0]: a run must be a mapping, not an integer",
                              "7: criteria[0] (R).runs[1]: a run must be a mapping, not a string"]),
    "run_unknown_key": (RUN + "      - {args: [x], nmae: y}\n",
                        ["6: criteria[0] (R).runs[0].nmae: unknown key 'nmae' in a run; allowed: name, build, layout, "
                         "place, env, args, extra_args, preconditions, wrapper, program"]),
    "run_bad_variant_then_good": (RUN + "      - {args: [x], layout: bare}\n      - {args: [y]}\n",
                                  ["6: criteria[0] (R).runs[0].layout: 'bare' is not allowed; allowed: normal, "
                                   "engine_only"]),
    "run_must_not_match_bad": (RUN + "      - {args: [x], expect: {must_not_match: ['(']}}\n",
                               [f"6: criteria[0] (R).runs[0].expect.must_not_match[0]: {BAD_RE}"]),
    "artifact_two_bad_files": (ART + "      - 1\n      - {path: x, nope: 1}\n",
                               ["6: criteria[0] (F).files[0]: a file check must be a mapping, not an integer",
                                "7: criteria[0] (F).files[1].nope: unknown key 'nope' in a file check; allowed: path, "
                                "exists, needed_match, needed_not_match, symbols_not_match, undefined_not_match, "
                                "exports_exactly, exports_match, text_match, text_not_match"]),
    "artifact_path_number": (ART + "      - {path: 3}\n",
                             ["6: criteria[0] (F).files[0].path: must be a non-empty string, not an integer"]),
    "artifact_path_placeholder": (ART + "      - {path: '{nope}/x'}\n",
                                  [f"6: criteria[0] (F).files[0].path: unknown placeholder {{nope}}; allowed: "
                                   f"{PLACEHOLDERS}"]),
    "artifact_lists_bad": (ART + "      - {path: x, needed_match: ['('], needed_not_match: ['('], "
                                 "symbols_not_match: ['('], undefined_not_match: ['('], text_match: ['('], "
                                 "text_not_match: ['(']}\n",
                           [f"6: criteria[0] (F).files[0].{k}[0]: {BAD_RE}" for k in (
                               "needed_match", "needed_not_match", "symbols_not_match", "undefined_not_match",
                               "text_match", "text_not_match")]),
    "artifact_exports_exactly_string": (ART + "      - {path: x, exports_exactly: kcuda_a}\n",
                                        ["6: criteria[0] (F).files[0].exports_exactly: must be a list of strings "
                                         "(YAML list), not a single string"]),
    "artifact_exports_match_bad": (ART + "      - {path: x, exports_match: '('}\n",
                                   [f"6: criteria[0] (F).files[0].exports_match[0]: {BAD_RE}"]),
    "artifact_exports_match_two": (ART + "      - {path: x, exports_match: [a, b]}\n",
                                   ["6: criteria[0] (F).files[0].exports_match: must be one regular expression"]),
    "artifact_exists_bad": (ART + "      - {path: x, exists: 1}\n",
                            ["6: criteria[0] (F).files[0].exists: must be true or false, not an integer"]),
    "args_not_a_list": (EQ.replace("args: [run]", "args: 3"),
                        ["5: criteria[0] (Q).args: must be a list of argv strings, not an integer"]),
    "no_args_and_bad_mode": (EQ.replace("    args: [run]\n", "").replace("{dumps: [h_out]}",
                                                                     "{dumps: [h_out], mode: fuzzy}"),
                             ["5: criteria[0] (Q).variants[0]: no `args`: give the engine argv at the criterion or "
                              "variant level",
                              "6: criteria[0] (Q).compare.mode: 'fuzzy' is not allowed; allowed: memcmp, tolerance"]),
    "variants_not_a_list": (EQ.replace("variants: [{name: a}, {name: b}]", "variants: 3"),
                            ["6: criteria[0] (Q).variants: must be a list of at least 2 variants (each compared with "
                             "the first)"]),
    "dumps_not_a_list": (EQ.replace("{dumps: [h_out]}", "{dumps: 3}"),
                         ["7: criteria[0] (Q).compare.dumps: must be a list of strings, not an integer"]),
    "allow_nan_not_bool": (EQ.replace("{dumps: [h_out]}", "{dumps: [h_out], allow_nan: 1}"),
                           ["7: criteria[0] (Q).compare.allow_nan: must be true or false, not an integer"]),
    "args_climb_out": (EQ.replace("args: [run]", "args: [run, '{work}/../x']"),
                       ["5: criteria[0] (Q).args[1]: '{work}/../x' climbs out of {work}: a path built from {work} must "
                        "stay inside it"]),
    "unknown_kind_and_key": (EQ.replace("kind: equivalence", "kind: speed\n    foo: 1"),
                             ["4: criteria[0] (Q).kind: 'speed' is not allowed; allowed: equivalence, ab_timing, run, "
                              "artifact, compare",
                              "5: criteria[0] (Q).foo: unknown key 'foo' in a criterion; allowed: id, title, kind, "
                              "requires, description, model, timeout_s, cases, build, env, args, variants, compare, a, "
                              "b, same_run, pairs, warmups, order, metric, metric_a, metric_b, ratio, pass_if, "
                              "confidence, bootstrap, noise_floor, interval, runs, files, dumps, bytes, margin, budget, "
                              "block, preconditions, tail"]),
    "artifact_unknown_key": ("criteria:\n  - {id: F, title: t, kind: artifact, files: [{path: x}], foo: 1}\n",
                             ["2: criteria[0] (F).foo: unknown key 'foo' in an artifact criterion; allowed: id, title, "
                              "kind, requires, description, model, timeout_s, cases, build, files"]),
    "variant_not_mapping": (EQ.replace("[{name: a}, {name: b}]", "[1, {name: b}]"),
                            ["6: criteria[0] (Q).variants[0]: a variant must be a mapping, not an integer"]),
    "place_names": (EQ.replace("[{name: a}, {name: b}]",
                               "[{name: a, layout: engine_only, place: {'a\\b.so': '{bin}/x', '': '{bin}/y'}}, "
                               "{name: b}]"),
                    ["6: criteria[0] (Q).variants[0].place.a\\b.so: 'a\\\\b.so' must be a plain file name",
                     "6: criteria[0] (Q).variants[0].place.: '' must be a plain file name"]),
    "place_placeholder": (EQ.replace("[{name: a}, {name: b}]",
                                     "[{name: a, layout: engine_only, place: {x.so: '{nope}/x'}}, {name: b}]"),
                          [f"6: criteria[0] (Q).variants[0].place.x.so: unknown placeholder {{nope}}; allowed: "
                           f"{PLACEHOLDERS}"]),
    "place_not_mapping": (EQ.replace("[{name: a}, {name: b}]", "[{name: a, layout: engine_only, place: [x]}, "
                                                               "{name: b}]"),
                          ["6: criteria[0] (Q).variants[0].place: must be a mapping of file name -> source path, "
                           "not a list"]),
    "extra_args_string": (EQ.replace("[{name: a}, {name: b}]", "[{name: a, extra_args: '--x'}, {name: b}]"),
                          ["6: criteria[0] (Q).variants[0].extra_args: must be an argv list (YAML list of strings); a "
                           "shell command string is not allowed"]),
    "bad_variant_is_not_compared_by_name": (EQ.replace("[{name: a}, {name: b}]", "[{name: b, env: [1]}, {name: b}]"),
                                            ["6: criteria[0] (Q).variants[0].env: must be a mapping of variable -> "
                                             "value, not a list"]),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_every_message_exact(name):
    text, want = BAD[name]
    assert messages(text) == [f"{F}:{m}" for m in want]


# ---- accepted forms and their defaults --------------------------------------------------------

def test_ab_defaults():
    (c,) = load(AB_X)
    assert c.spec == C.ABSpec(a=C.Variant("x", args=["run"]), b=C.Variant("y", args=["run"]), same_run=False,
                              pairs=4, warmups=1, order="ABBA", metric_a=C.Metric("timings.request_ms", "median"),
                              metric_b=C.Metric("timings.request_ms", "median"), ratio="a/b", pass_stat="median",
                              pass_op=">=", pass_value=1.0, confidence=0.95, resamples=2000, seed=12345,
                              noise_floor=False, interval="percentile")
    assert c.model is None


def test_ab_every_key_given():
    text = AB_X + ("    same_run: false\n    warmups: 0\n    order: AB\n    metric: {field: Timings.Total_MS, reduce: max}\n"
                 "    metric_b: {field: timings.b}\n    ratio: b/a\n    confidence: 0.9\n    bootstrap: {seed: 0}\n"
                 "    noise_floor: true\n    interval: order\n")
    (c,) = load(text)
    assert c.spec == C.ABSpec(a=C.Variant("x", args=["run"]), b=C.Variant("y", args=["run"]), same_run=False,
                              pairs=4, warmups=0, order="AB", metric_a=C.Metric("Timings.Total_MS", "max"),
                              metric_b=C.Metric("timings.b", "median"), ratio="b/a", pass_stat="median", pass_op=">=",
                              pass_value=1.0, confidence=0.9, resamples=2000, seed=0, noise_floor=True,
                              interval="order")
    (c,) = load(AB_X + "    bootstrap: {resamples: 300, seed: 9}\n    interval: bca\n")
    assert (c.spec.resamples, c.spec.seed, c.spec.interval) == (300, 9, "bca")
    (c,) = load(AB_X + "    bootstrap: {seed: 9223372036854775807}\n")  # the largest seed allowed
    assert c.spec.seed == 2**63 - 1


def test_same_run_loads_without_b():
    (c,) = load(AB_X.replace("    b: {name: y}\n", "") + "    same_run: true\n    metric_a: {field: t.a, reduce: first}\n"
                "    metric_b: t.b\n")
    assert (c.spec.same_run, c.spec.b, c.spec.metric_a, c.spec.metric_b) == (
        True, None, C.Metric("t.a", "first"), C.Metric("t.b", "median"))


@pytest.mark.parametrize("model, want", [
    ("tiny.gguf", {"path": "tiny.gguf"}), ("models/x.bin", {"path": "models/x.bin"}),
    ("qwen35", {"recipe": "qwen35", "qtype": None}), ("default", None),
    ("{path: m/x.gguf}", {"path": "m/x.gguf"}), ("{recipe: r}", {"recipe": "r", "qtype": None}),
    ("{recipe: r, qtype: q4_0}", {"recipe": "r", "qtype": "q4_0"}),
])
def test_model_forms(model, want):
    (c,) = load(AB_X + f"    model: {model}\n")
    assert c.model == want


def test_variant_env_preconditions_and_cases():
    text = EQ.replace("variants: [{name: a}, {name: b}]",
                      "env: {'{env.graph}': '1', A: 2}\n    variants: [{name: a, preconditions: {Counters.Steps: '>0'}}, "
                      "{name: b, env: {A: '{n}'}}]") + "    cases: [{N_1: x, n: 1}, {N_1: y, n: 2.5}]\n"
    (c,) = schema.load_text(text, F, BUILDS, DUMPS, env_names=["graph"])
    a, b = c.spec.variants
    assert a.env == {"{env.graph}": "1", "A": "2"} and a.preconditions == {"Counters.Steps": ">0"}
    assert b.env == {"{env.graph}": "1", "A": "{n}"}
    assert c.cases == [{"N_1": "x", "n": "1"}, {"N_1": "y", "n": "2.5"}]


def test_run_expect_forms():
    (c,) = load(RUN + "      - {args: [x]}\n      - {args: [y], expect: {exit: null, json: {a.b: 1}, "
                      "must_not_match: [err]}}\n")
    assert [s.expect for s in c.spec.steps] == [C.Expect(exit=0), C.Expect(exit=None, json={"a.b": 1},
                                                                             must_not_match=["err"])]


def test_artifact_file_forms():
    (c,) = load(ART + "      - {path: x}\n      - {path: y, exists: false, exports_match: ['^k_'], "
                      "exports_exactly: [k_a], needed_match: [a], needed_not_match: [b], symbols_not_match: [c], "
                      "undefined_not_match: [d], text_match: [e], text_not_match: [f]}\n")
    assert c.spec.files == [
        C.FileCheck(path="x", exists=True, exports_match=None),
        C.FileCheck(path="y", exists=False, needed_match=["a"], needed_not_match=["b"], symbols_not_match=["c"],
                    undefined_not_match=["d"], exports_exactly=["k_a"], exports_match="^k_", text_match=["e"],
                    text_not_match=["f"])]


def test_load_file_and_many_pass_env_names_and_place(tmp_path):
    root = tmp_path / "repo"
    (root / "regressions").mkdir(parents=True)
    text = EQ.replace("args: [run]", "args: [run]\n    env: {'{env.graph}': '1'}")
    inside = root / "regressions" / "g.yaml"
    inside.write_text(text)
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text(text)
    (c,) = schema.load_file(inside, root, BUILDS, DUMPS, ["graph"])
    assert (c.file, c.in_repository) == ("regressions/g.yaml", True)
    (o,) = schema.load_file(outside, root, BUILDS, DUMPS, ["graph"])
    assert o.in_repository is False
    assert [x.id for x in schema.load_many([inside], root, BUILDS, DUMPS, ["graph"])] == ["Q"]
    with pytest.raises(SchemaErrors) as e:
        schema.load_file(root / "regressions" / "none.yaml", root, BUILDS, DUMPS)
    assert e.value.messages == ["regressions/none.yaml: cannot read: no such file"]
    bad = root / "regressions" / "b.yaml"
    bad.write_text(EQ.replace("args: [run]", "args: 3"))
    with pytest.raises(SchemaErrors) as e:
        schema.load_many([bad, root / "regressions" / "none.yaml", inside], root, BUILDS, DUMPS)
    assert e.value.messages == ["regressions/b.yaml:5: criteria[0] (Q).args: must be a list of argv strings, not an "
                                "integer", "regressions/none.yaml: cannot read: no such file",
                                f"regressions/g.yaml:6: criteria[0] (Q).env.{{env.graph}}: unknown placeholder "
                                f"{{env.graph}}; allowed: {PLACEHOLDERS}"]


def test_extra_args_extend_the_args():
    text = EQ.replace("    args: [run]\n", "").replace(
        "[{name: a}, {name: b}]", "[{name: a, extra_args: ['{work}/x']}, {name: b, args: [run], extra_args: [--y]}]")
    (c,) = load(text)
    assert [v.args for v in c.spec.variants] == [["{work}/x"], ["run", "--y"]]


def test_criterion_fields_line_raw_cases_and_default_names():
    text = ("criteria:\n  - title: t\n    kind: ab_timing\n    args: [run]\n    id: T\n    a: {}\n    b: {}\n"
            "    pairs: 2\n    pass_if: 'median >= 1'\n")
    (c,) = load(text)
    assert (c.line, c.cases, c.in_repository) == (5, [], True)
    assert c.raw == {"title": "t", "kind": "ab_timing", "args": ["run"], "id": "T", "a": {}, "b": {}, "pairs": 2,
                     "pass_if": "median >= 1"}
    assert (c.spec.a.name, c.spec.b.name) == ("A", "B")
    (o,) = schema.load_text(text, F, BUILDS, DUMPS, in_repository=False)
    assert o.in_repository is False


def test_every_bad_criterion_and_duplicate_is_reported():
    text = EQ + "  - 1\n  - 2\n" + EQ.split("\n", 1)[1] + EQ.split("\n", 1)[1]
    assert messages(text) == [f"{F}:8: criteria[1]: a criterion must be a mapping, not an integer",
                              f"{F}:9: criteria[2]: a criterion must be a mapping, not an integer",
                              f"{F}:10: criteria[3] (Q).id: duplicate id 'Q' (first at line 2)",
                              f"{F}:16: criteria[4] (Q).id: duplicate id 'Q' (first at line 2)"]


def test_a_criterion_with_an_error_does_not_claim_its_id():
    text = EQ.replace("    title: t\n", "    title: t\n    foo: 1\n", 1) + EQ.split("\n", 1)[1]
    assert messages(text) == [f"{F}:4: criteria[0] (Q).foo: unknown key 'foo' in an equivalence criterion; allowed: "
                              "id, title, kind, requires, description, model, timeout_s, cases, build, env, args, "
                              "variants, compare"]


def _problems(text: str) -> list[str]:
    """The errors of a criteria text; [] when it loads."""
    try:
        schema.load_text(text, "regressions/t.yaml", BUILDS, DUMPS)
    except SchemaErrors as e:
        return e.messages
    return []


@pytest.mark.parametrize("extra, ok", [
    ("    bootstrap: {resamples: 2000}\n", True),
    ("    bootstrap: {resamples: 1000000}\n", True),  # 4 pairs: 4e6 cells
    ("    bootstrap: {resamples: 1000001}\n", False),
    ("    timeout_s: 604800\n", True),
    ("    timeout_s: 604800.5\n", False),
    ("    timeout_s: 1.0e300\n", False),
], ids=["resamples-default", "resamples-max", "resamples-over", "timeout-week", "timeout-over", "timeout-huge"])
def test_bounds_of_the_ab_numbers(extra, ok):
    """Each bound sits where schema.py says: at it, the file loads; just past it, it does not."""
    text = AB_X + extra
    assert (_problems(text) == []) == ok, _problems(text)


@pytest.mark.parametrize("pairs, resamples, ok", [
    (10_000, 2000, True), (10_001, 100, False), (20, 1_000_000, True), (21, 1_000_000, False)])
def test_pairs_and_bootstrap_cells_are_bounded(pairs, resamples, ok):
    """pairs <= 10000, and pairs x resamples <= 2e7: the bootstrap holds them all in memory."""
    text = AB_X.replace("pairs: 4", f"pairs: {pairs}") + f"    bootstrap: {{resamples: {resamples}}}\n"
    assert (_problems(text) == []) == ok, _problems(text)
