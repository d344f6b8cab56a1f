"""Every file the harness reads fails cleanly whatever it is: a directory, a FIFO (never opened, so
never a hang), binary data, a file over its size cap; YAML that would expand without bound
(recursive anchors, alias bombs, deep nesting) is refused with its line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import SchemaErrors
from harness.contract import inputs, schema, yamlsrc

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(REPO))
BUILDS, DUMPS = ["default"], ["h_out", "logits"]

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9))


def _cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The harness in a child: a regression that opens a FIFO blocks, and the timeout says so."""
    return subprocess.run([sys.executable, "-m", "harness", *argv], capture_output=True, text=True, env=ENV,
                          cwd=REPO, timeout=timeout)


# ---- YAML expansion ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, line, pattern", [
    ("a: &a [*a]\n", 1, r"recursive alias \*a: it is used inside its own anchor &a"),
    ("x: 1\nb: &b\n  c: *b\n", 3, r"recursive alias \*b"),
    ("x: 1\nm: &m {<<: *m}\n", 2, r"recursive alias \*m"),
    ("x: 1\ny: 2\nl: &l [1, [2, [*l]]]\n", 3, r"recursive alias \*l"),
    (BOMB, 3, r"more than 1000 aliases expanded \(here \*b\): an alias bomb\?"),
    ("a: " + "[" * 100 + "]" * 100 + "\n", 1, r"nested deeper than 64 levels"),
    ("a: &a [[[[[[[[1]]]]]]]]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [[[[[[[[*{chr(97 + i)}]]]]]]]]\n"
                                           for i in range(9)), 1, r"nested deeper than 64 levels once aliases"),
    ("s: &s " + "x" * 200_000 + "\nl: [" + ", ".join(["*s"] * 100) + "]\n", 2,
     r"more than 16777216 characters of values"),
], ids=["self", "mapping-self", "merge-self", "nested-self", "bomb", "deep", "deep-by-aliases", "long-strings"])
def test_unbounded_yaml_is_refused_with_its_line(text, line, pattern):
    with pytest.raises(yamlsrc.YamlLimitError, match=pattern) as e:
        yamlsrc.load(text)
    assert e.value.line == line


def test_alias_bomb_is_cheap_to_refuse():
    # before the caps: 59 s and 2.8 GB, then MemoryError
    tracemalloc.start()
    t0 = time.process_time()
    with pytest.raises(yamlsrc.YamlLimitError):
        yamlsrc.load(BOMB)
    cpu = time.process_time() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20, peak
    assert cpu < 20, cpu  # a generous bound: the refusal takes well under a second


def test_ordinary_aliases_and_merges_still_load():
    loc = yamlsrc.load("d: &d {a: 1, b: [1, 2]}\ne: {<<: *d, c: 3}\nf: [*d, *d]\n")
    assert loc.value["e"] == {"a": 1, "b": [1, 2], "c": 3} and loc.value["f"][1]["b"] == [1, 2]
    # the shipped criteria files use aliases: they still load
    for f in sorted((REPO / "regressions").glob("*.yaml")):
        yamlsrc.load(f.read_text(encoding="utf-8"))


def test_recursive_anchor_through_the_cli(fake_repo, capsys):
    p = fake_repo.criteria("criteria:\n  - &c\n    id: R1\n    title: t\n    kind: run\n    runs: [*c]\n")
    assert main(["--root", str(fake_repo.root), "verify", str(p)]) == 2
    err = capsys.readouterr().err
    assert "regressions/suite.yaml:6: YAML refused: recursive alias *c" in err
    assert "internal error" not in err


def test_alias_bomb_through_the_cli(fake_repo, capsys):
    p = fake_repo.criteria(BOMB)
    assert main(["--root", str(fake_repo.root), "verify", str(p)]) == 2
    err = capsys.readouterr().err
    assert "regressions/suite.yaml:3: YAML refused: more than 1000 aliases expanded (here *b)" in err


# ---- file types and sizes ---------------------------------------------------------------------

def _make(kind: str, path: Path) -> Path:
    if kind == "directory":
        path.mkdir(parents=True)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "binary":
        path.write_bytes(b"\x7fELF\x02\x01\x01\0\0\0" + bytes(range(256)))
    elif kind == "huge":
        with open(path, "wb") as f:  # sparse: the cap is checked before a byte is read
            f.truncate(inputs.MAX_REPORT + 1)
    return path


KINDS = {"directory": r"is a directory, not a regular file", "fifo": r"is a FIFO \(named pipe\), not a regular file",
         "binary": r"binary data \(NUL byte at offset 7\), not text|not UTF-8 text",
         "huge": r"\d+ bytes, over the \d+ MiB allowed for this file"}

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


@pytest.mark.parametrize("kind", list(KINDS))
def test_read_text_refuses(kind, tmp_path):
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    p = _make(kind, tmp_path / "f")
    cap = inputs.MAX_REPORT if kind == "huge" else inputs.MAX_CRITERIA
    with pytest.raises(inputs.FileRefused, match=rf"^{tmp_path / 'f'}: ({KINDS[kind]})"):
        inputs.read_text(p, cap)


def test_read_text_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        inputs.read_text(tmp_path / "nope", 10)


@pytest.mark.parametrize("kind", list(KINDS))
def test_criteria_file_of_every_kind(kind, fake_repo):
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    p = _make(kind, fake_repo.root / "regressions" / "odd.yaml")
    if kind == "huge":
        os.truncate(p, inputs.MAX_CRITERIA + 1)
    with pytest.raises(SchemaErrors) as e:
        schema.load_file(p, fake_repo.root, BUILDS, DUMPS)
    assert len(e.value.messages) == 1
    assert e.value.messages[0].startswith("regressions/odd.yaml: ")


@needs_fifo
@pytest.mark.parametrize("which", ["criteria", "registry", "config", "report", "latest"])
def test_fifo_never_blocks_the_cli(which, fake_repo):
    root = fake_repo.root
    args = ["--root", str(root)]
    if which == "criteria":
        os.mkfifo(root / "regressions" / "pipe.yaml")
        args += ["verify", str(root / "regressions" / "pipe.yaml")]
        want = "regressions/pipe.yaml: is a FIFO (named pipe), not a regular file"
    elif which == "registry":
        fake_repo.criteria("criteria:\n  - {id: S, title: t, kind: run, runs: [{args: [selftest]}]}\n")
        os.mkfifo(fake_repo.registry)
        args += ["verify", "--no-build"]
        want = "harness: error: registry.lock: is a FIFO (named pipe), not a regular file"
    elif which == "config":
        os.mkfifo(root / "configs" / "pipe.yaml")
        args += ["--config", str(root / "configs" / "pipe.yaml"), "verify"]
        want = "pipe.yaml: is a FIFO (named pipe), not a regular file"
    elif which == "report":
        (root / "reports" / "r1").mkdir(parents=True)
        os.mkfifo(root / "reports" / "r1" / "report.json")
        args += ["report", str(root / "reports" / "r1")]
        want = "report.json: is a FIFO (named pipe), not a regular file"
    else:
        (root / "reports").mkdir()
        os.mkfifo(root / "reports" / "LATEST")
        args += ["report"]
        want = "LATEST: is a FIFO (named pipe), not a regular file"
    r = _cli(*args, timeout=30)
    assert r.returncode == 2, r.stderr
    assert want in r.stderr and "internal error" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("kind", ["directory", "binary", "huge"])
def test_registry_lock_of_every_kind(kind, fake_repo, capsys):
    fake_repo.criteria("criteria:\n  - {id: S, title: t, kind: run, runs: [{args: [selftest]}]}\n")
    p = _make(kind, fake_repo.registry)
    if kind == "huge":
        os.truncate(p, inputs.MAX_REGISTRY + 1)
    for argv in (["verify", "--no-build"], ["register", str(fake_repo.root / "regressions" / "suite.yaml")]):
        assert main(["--root", str(fake_repo.root), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("harness: error: registry.lock: "), err
        assert "internal error" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", ["directory", "binary", "huge"])
def test_engine_yaml_of_every_kind(kind, tmp_path, capsys):
    p = _make(kind, tmp_path / "engine.yaml")
    if kind == "huge":
        os.truncate(p, inputs.MAX_CONFIG + 1)
    assert main(["--root", str(tmp_path), "--config", str(p), "verify"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"harness: error: {p}: ") and "internal error" not in err


def test_engine_yaml_recursive_anchor_has_its_line(tmp_path, capsys):
    p = tmp_path / "engine.yaml"
    p.write_text("engine: {}\nbuilds: &b\n  x: *b\n")
    assert main(["--root", str(tmp_path), "--config", str(p), "verify"]) == 2
    assert f"harness: error: {p}:3: YAML refused: recursive alias *b" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["directory", "binary", "huge"])
def test_report_json_of_every_kind(kind, tmp_path, capsys):
    d = tmp_path / "r1"
    d.mkdir()
    _make(kind, d / "report.json")
    assert main(["report", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"harness: error: {d / 'report.json'}: ") and "internal error" not in err
    assert main(["merge", str(d), str(d), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert f"{d / 'report.json'}" in err and "internal error" not in err


def test_deeply_nested_report_json(tmp_path, capsys):
    d = tmp_path / "r1"
    d.mkdir()
    (d / "report.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["report", str(d)]) == 2
    err = capsys.readouterr().err
    assert "JSON nested too deeply" in err and "internal error" not in err


@pytest.mark.parametrize("kind", ["directory", "binary", "huge"])
def test_matrix_yaml_of_every_kind(kind, tmp_path):
    from harness.matrix.spec import MatrixError, load_matrix

    p = _make(kind, tmp_path / "matrix.yaml")
    if kind == "huge":
        os.truncate(p, inputs.MAX_CONFIG + 1)
    with pytest.raises(MatrixError, match=rf"^{p}: "):
        load_matrix(p, None)


@pytest.mark.parametrize("kind", ["directory", "fifo", "binary", "deep"])
def test_meta_json_of_every_kind_fails_the_criterion(kind, fake_repo):
    """The fake engine writes meta.json; FAKE_META_AS turns it into another kind of file."""
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    p = fake_repo.criteria("""\
        criteria:
          - id: Q
            title: t
            kind: equivalence
            args: [run, --model, "{model}"]
            variants: [{name: a}, {name: b, env: {FAKE_META_AS: %s}}]
            compare: {dumps: [h_out]}
        """ % kind)
    fake_repo.register(p)
    assert fake_repo.verify("--no-build") == 1
    r = fake_repo.result("Q")
    assert r["verdict"] == "FAIL" and "internal error" not in r["reason"], r["reason"]
    want = {"directory": "meta.json: is a directory, not a regular file",
            "fifo": "meta.json: is a FIFO (named pipe), not a regular file",
            "binary": "meta.json: binary data (NUL byte at offset 0), not text",
            "deep": "meta.json is not valid JSON (JSON nested too deeply)"}[kind]
    assert want in r["reason"]


def test_json_loads_turns_deep_nesting_into_value_error():
    with pytest.raises(ValueError, match="nested too deeply"):
        inputs.json_loads("[" * 100_000)
    assert inputs.json_loads(json.dumps({"a": [1]})) == {"a": [1]}


def test_criteria_cap_is_far_above_the_real_files():
    biggest = max(f.stat().st_size for f in (REPO / "regressions").glob("*"))
    assert biggest * 20 < inputs.MAX_CRITERIA


# ---- values no file should hold: found by a hostile-input audit (each was an internal error, a
# hang, or a silent pass) ------------------------------------------------------------------------

def _criterion(kind: str) -> str:
    """The first lines of a one-criterion file of that kind; the rest follows."""
    return ("criteria:\n  - id: C1\n    title: t\n    kind: " + kind
            + '\n    args: [run, --model, "{model}", --prompt, "1,2", --steps, "1"]\n')


_TOL = _criterion("equivalence") + "    variants: [{name: a}, {name: b}]\n" \
    "    compare: {dumps: [logits], mode: tolerance, %s}\n"
_AB = _criterion("ab_timing") + '    a: {name: a}\n    b: {name: b}\n    pass_if: "ci_lower >= 1.05"\n    %s\n'
_RUN = """\
criteria:
  - id: R1
    title: %s
    kind: run
    %s
    runs: [{name: r, args: [%s]}]
"""


@pytest.mark.parametrize("text, message", [
    (_TOL % "max_abs: .nan", "max_abs: must be a finite number, not nan"),
    (_TOL % "nmse: .inf", "nmse: must be a finite number, not inf"),
    (_TOL % ("max_abs: 1" + "0" * 400), "max_abs: must be a finite number"),
    (_AB % "confidence: .nan", "confidence: must be a finite number, not nan"),
    (_AB % "bootstrap: {resamples: 99999999999999999999999999999}", "resamples: must be <= 1000000"),
    (_AB % "pairs: 10000\n    bootstrap: {resamples: 1000000}", "resamples x pairs is 10000000000"),
    (_RUN % ("t", "timeout_s: .inf", "info"), "timeout_s: must be a finite number, not inf"),
    (_RUN % ("t", "timeout_s: 99999999999999999999999", "info"), "timeout_s: must be <= 604800"),
    (_RUN % ("t", "", '"a\\0b"'), "holds a NUL character"),
    (_RUN % ('"a\\ud800b"', "", "info"), "holds a lone surrogate"),
], ids=["nan-tolerance", "inf-nmse", "huge-int-tolerance", "nan-confidence", "huge-resamples", "bootstrap-cells", "inf-timeout",
        "huge-timeout", "nul-arg", "surrogate-title"])
def test_values_no_criterion_can_use_are_refused(text, message, fake_repo, capsys):
    p = fake_repo.criteria(text)
    assert main(["--root", str(fake_repo.root), "verify", str(p)]) == 2
    err = capsys.readouterr().err
    assert message in err and "regressions/suite.yaml:" in err, err
    assert "internal error" not in err


@pytest.mark.parametrize("value", [".inf", ".nan", "99999999999999999999999", "-1"])
def test_engine_yaml_timeout_must_be_finite_and_positive(value, fake_repo, capsys):
    cfg = fake_repo.root / "configs" / "engine.yaml"
    cfg.write_text(cfg.read_text() + f"timeouts: {{run: {value}}}\n")
    assert main(["--root", str(fake_repo.root), "verify"]) == 2
    err = capsys.readouterr().err
    assert "engine.yaml:" in err and "timeouts.run" in err and "internal error" not in err, err


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1"])
def test_run_timeout_must_be_finite_and_positive(value, fake_repo, capsys):
    assert main(["--root", str(fake_repo.root), "run", "--no-build", "--timeout", value, "--", "info"]) == 2
    assert "--timeout must be more than 0" in capsys.readouterr().err


def test_run_names_an_unknown_placeholder(fake_repo, capsys):
    assert main(["--root", str(fake_repo.root), "run", "--no-build", "--", "{nope}"]) == 2
    err = capsys.readouterr().err
    assert "unknown placeholder {nope}; known: " in err and "internal error" not in err, err


def test_symbolic_link_loops_are_named(fake_repo, capsys):
    a, b = fake_repo.root / "regressions" / "a.yaml", fake_repo.root / "regressions" / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    assert main(["--root", str(fake_repo.root), "verify"]) == 2
    err = capsys.readouterr().err
    assert "a.yaml" in err and "internal error" not in err, err
    loop = fake_repo.root.parent / "loop"
    loop.symlink_to(loop)
    for argv in (["--root", str(loop), "verify"], ["--root", str(fake_repo.root), "--config", str(loop), "verify"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "a loop of symbolic links" in err and "internal error" not in err, err


def test_root_that_is_a_file_is_named(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    for cmd in (["verify"], ["fuzz", "--replay-only"]):
        assert main(["--root", str(f), *cmd]) == 2
        err = capsys.readouterr().err
        assert f"--root {f}: not a folder" in err and "internal error" not in err, err


def test_pyproject_fifo_and_deep_toml_never_hang(tmp_path):
    """The project is found by reading pyproject.toml files above the working directory: a FIFO
    there is refused unopened, TOML nested too deeply is named."""
    fifo = tmp_path / "fifo"
    (fifo / "sub").mkdir(parents=True)
    os.mkfifo(fifo / "pyproject.toml")
    deep = tmp_path / "deep"
    (deep / "sub").mkdir(parents=True)
    (deep / "pyproject.toml").write_text("# kite\na = " + "[" * 100_000 + "]" * 100_000 + "\n")
    for folder, message in ((fifo, "is a FIFO (named pipe), not a regular file"), (deep, "nested too deeply")):
        r = subprocess.run([sys.executable, "-m", "harness", "verify"], capture_output=True, text=True,
                           env=ENV, cwd=folder / "sub", timeout=60)
        assert r.returncode == 2 and message in r.stderr and "internal error" not in r.stderr, r.stderr


def test_register_onto_a_registry_without_a_final_newline(fake_repo, capsys):
    """The tool ends every line it writes: a last line without its line end is a torn write or a
    hand edit, named as such; nothing is appended to it."""
    p = fake_repo.criteria(_RUN % ("t", "", "info"))
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 0
    lock = fake_repo.root / "regressions" / "registry.lock"
    lock.write_bytes(lock.read_bytes().rstrip(b"\n"))
    before = lock.read_bytes()
    p2 = fake_repo.criteria(_RUN.replace("R1", "R2") % ("t", "", "info"), "second.yaml")
    capsys.readouterr()
    assert main(["--root", str(fake_repo.root), "register", str(p2)]) == 2
    assert "registry.lock:4: the last line has no line end" in capsys.readouterr().err
    assert lock.read_bytes() == before


def test_junit_stays_well_formed_with_control_characters():
    import xml.etree.ElementTree as ET

    from harness.report.document import render_junit

    doc = {"summary": {"total": 1, "failed": 1}, "results": [
        {"file": "regressions/x.yaml", "id": "C1", "title": "a\x0cb\x1b[31m", "verdict": "FAIL", "kind": "run",
         "reason": "engine said \x00\x07", "digest": "sha256:0"}]}
    text = render_junit(doc)
    root = ET.fromstring(text.split("\n", 1)[1])
    case = root.find("testcase")
    assert case is not None and case.get("name") == "C1: a\\x0cb\\x1b[31m"


def test_register_only_an_unknown_id_is_an_error(fake_repo, capsys):
    p = fake_repo.criteria(_RUN % ("t", "", "info"))
    assert main(["--root", str(fake_repo.root), "register", str(p), "--only", "NOPE"]) == 2
    assert "--only: NOPE not in the given file(s)" in capsys.readouterr().err
    assert not (fake_repo.root / "regressions" / "registry.lock").exists()


def test_a_named_registry_must_exist(fake_repo, capsys):
    assert main(["--root", str(fake_repo.root), "verify", "--registry", str(fake_repo.root / "typo.lock")]) == 2
    assert "typo.lock: no such file" in capsys.readouterr().err


def test_register_names_a_registry_time_that_is_not_a_time(fake_repo, capsys):
    p = fake_repo.criteria(_RUN % ("t", "", "info"))
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 0
    lock = fake_repo.root / "regressions" / "registry.lock"
    lines = lock.read_text().splitlines(keepends=True)
    fields = lines[-1].split("\t")
    fields[3] = "zzzz"
    lock.write_text("".join(lines[:-1]) + "\t".join(fields))
    capsys.readouterr()
    p2 = fake_repo.criteria(_RUN.replace("R1", "R2") % ("t", "", "info"), "second.yaml")
    assert main(["--root", str(fake_repo.root), "register", str(p2)]) == 2
    err = capsys.readouterr().err
    assert "time 'zzzz' is not in the format" in err and "later than now" not in err, err


@pytest.mark.parametrize("kind", ["dangling-link", "two-lines", "names-nothing"])
def test_latest_that_points_nowhere_is_named(kind, tmp_path, capsys):
    reports = tmp_path / "reports"
    reports.mkdir()
    if kind == "dangling-link":
        (reports / "latest").symlink_to(reports / "gone")
        want = "points at"
    else:
        (reports / "LATEST").write_text("a\nb\n" if kind == "two-lines" else "gone\n")
        want = "must hold one report folder's name" if kind == "two-lines" else "names gone, which does not exist"
    assert main(["--root", str(REPO), "report", "--reports", str(reports)]) == 2
    err = capsys.readouterr().err
    assert want in err and "missing" not in err, err


def test_matrix_check_resolves_criteria_references(tmp_path, capsys):
    text = (REPO / "configs" / "matrix.yaml").read_text()
    assert "regressions/suite.yaml#E3]" in text
    bad = tmp_path / "matrix.yaml"
    bad.write_text(text.replace("regressions/suite.yaml#E3]", "regressions/suite.yaml#NOPE]", 1))
    assert main(["--root", str(REPO), "matrix", "--check", "--matrix", str(bad)]) == 2
    assert "regressions/suite.yaml has no criterion NOPE" in capsys.readouterr().err
    assert main(["--root", str(REPO), "matrix", "--check", "nope"]) == 2
    assert "no entry 'nope'" in capsys.readouterr().err


def test_models_commands_name_the_file_they_cannot_read(tmp_path, capsys):
    from harness.models.gen import generate
    from harness.models.recipes import load_recipe

    good = generate(load_recipe("tiny"), tmp_path / "tiny.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[:3000])
    binary = tmp_path / "recipe.yaml"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    for argv, want in ((["models", "info", str(cut)], f"{cut}: not a readable GGUF file"),
                       (["models", "gen", str(binary)], f"{binary}: binary data")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert want in err and "internal error" not in err, err


def test_a_title_with_control_characters_is_refused(fake_repo, capsys):
    p = fake_repo.criteria(_RUN % ('"red \\e[31m title"', "", "info"))
    assert main(["--root", str(fake_repo.root), "verify", str(p)]) == 2
    err = capsys.readouterr().err
    assert "regressions/suite.yaml:" in err and "holds the control character '\\x1b'" in err, err


def test_registry_reason_nested_too_deeply_is_named(fake_repo, capsys):
    p = fake_repo.criteria(_RUN % ("t", "", "info"))
    assert main(["--root", str(fake_repo.root), "register", str(p)]) == 0
    lock = fake_repo.root / "regressions" / "registry.lock"
    lines = lock.read_text().splitlines(keepends=True)
    fields = lines[-1].rstrip("\n").split("\t")
    fields[5] = "[" * 100_000 + "]" * 100_000
    lock.write_text("".join(lines[:-1]) + "\t".join(fields) + "\n")
    capsys.readouterr()
    assert main(["--root", str(fake_repo.root), "verify"]) == 2
    err = capsys.readouterr().err
    assert f"registry.lock:{len(lines)}: reason is not a JSON string" in err and "internal error" not in err, err
