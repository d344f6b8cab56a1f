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
from harness.spec import inputs, schema, yamlsrc

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
