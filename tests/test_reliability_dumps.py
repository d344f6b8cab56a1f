"""What an engine leaves in its dump folder is read as a hostile file (harness/contract/inputs.py,
read_inside): a FIFO, a folder, a link out of the folder (to a file both variants share, to
/dev/zero), a huge sparse file, an empty dump, a dump folder that is itself a link. Each must end
the criterion with FAIL and a reason naming it, without blocking, without reading what is not the
engine's own file, and never with a vacuous PASS (issue 35, medium 5).

The engine's runs are planted in-process (runner.run_process replaced), so these take
milliseconds; a FIFO that would block is guarded by a thread and unblocked if it does."""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import planted_context
from harness.process import ProcResult
from harness.run import runner
from harness.contract import inputs, schema
from harness.contract.config import DumpSpec

EQ = """\
criteria:
  - id: Q1
    title: two variants give the same bytes
    kind: equivalence
    args: [run, --model, "{model}"]
    variants: [{name: a, env: {SIDE: a}}, {name: b, env: {SIDE: b}}]
    compare: {dumps: [h_out]}
"""
H = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
SHAPED = {"shapes": {"h_out": [2, 3]}}


def _evaluate(tmp: Path, monkeypatch, plant: Callable[[Path, str], None], meta: dict | None = None) -> runner.Outcome:
    """Each variant writes meta.json and h_out.f32 (H), then plant(dump folder, side) changes it."""
    def engine(argv, env=None, *, timeout=120.0, log_prefix=None, **kw):
        d = Path(argv[argv.index("--dump") + 1])
        d.mkdir(parents=True, exist_ok=True)
        (d / "meta.json").write_text(json.dumps(SHAPED if meta is None else meta))
        (d / "h_out.f32").write_bytes(H)
        plant(d, env["SIDE"])
        return ProcResult(list(argv), dict(env or {}), 0, None, False, 0.01, 0.01, 1.0, None, None)

    monkeypatch.setattr(runner, "run_process", engine)
    (crit,) = schema.load_text(EQ, "regressions/t.yaml", ["default"], ["h_out", "logits"])
    return runner.evaluate(planted_context(tmp), crit)


def _replace(d: Path, make: Callable[[Path], None], name: str = "h_out.f32") -> None:
    (d / name).unlink()
    make(d / name)


def test_a_fifo_dump_fails_without_blocking(tmp_path, monkeypatch):
    """Before: the read blocked for ever, outside the engine's timeout."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    fifos: list[Path] = []

    def plant(d: Path, side: str) -> None:
        if side == "b":
            _replace(d, os.mkfifo)
            fifos.append(d / "h_out.f32")

    got: list[runner.Outcome] = []
    t = threading.Thread(target=lambda: got.append(_evaluate(tmp_path, monkeypatch, plant)), daemon=True)
    t.start()
    t.join(60)  # a guard, not a timing assert: the fixed reader never opens the FIFO blocking
    if t.is_alive():  # blocked in open(): give it a writer so that the thread ends, then fail
        fd = os.open(fifos[0], os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join()
        pytest.fail("reading a FIFO dump blocked")
    (out,) = got
    assert out.verdict == "FAIL"
    assert out.reason == "variant b: dump h_out.f32: is a FIFO (named pipe), not a regular file", out.reason


def test_a_folder_as_dump_fails_without_internal_error(tmp_path, monkeypatch):
    out = _evaluate(tmp_path, monkeypatch, lambda d, side: _replace(d, Path.mkdir) if side == "a" else None)
    assert out.verdict == "FAIL"
    assert out.reason == "variant a: dump h_out.f32: is a directory, not a regular file", out.reason


def test_a_link_to_a_file_shared_by_both_variants_fails(tmp_path, monkeypatch):
    """Before: both dumps read the same outside file, so any computation PASSed."""
    shared = tmp_path / "shared.f32"
    shared.write_bytes(H)
    out = _evaluate(tmp_path, monkeypatch, lambda d, side: _replace(d, lambda p: p.symlink_to(shared)))
    assert out.verdict == "FAIL"
    assert out.reason == f"variant a: dump h_out.f32: a link out of its folder (to {shared.resolve()}); it must be " \
                         "a file the engine wrote there", out.reason


def test_a_relative_link_climbing_out_fails(tmp_path, monkeypatch):
    shared = tmp_path / "report" / "shared.f32"

    def plant(d: Path, side: str) -> None:
        shared.write_bytes(H)
        _replace(d, lambda p: p.symlink_to(os.path.relpath(shared, d)))
    out = _evaluate(tmp_path, monkeypatch, plant)
    assert out.verdict == "FAIL" and "a link out of its folder" in out.reason, out.reason


def test_a_link_inside_the_folder_is_read(tmp_path, monkeypatch):
    """A link that stays in its own dump folder names the engine's own file: no reason to refuse."""
    def plant(d: Path, side: str) -> None:
        (d / "h_out.f32").rename(d / "h.bin")
        (d / "h_out.f32").symlink_to("h.bin")
    out = _evaluate(tmp_path, monkeypatch, plant)
    assert out.verdict == "PASS", out.reason


def test_a_link_to_dev_zero_fails_unread(tmp_path, monkeypatch):
    """Before: read until memory ran out."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    out = _evaluate(tmp_path, monkeypatch, lambda d, side: _replace(d, lambda p: p.symlink_to("/dev/zero")))
    assert out.verdict == "FAIL"
    assert out.reason == "variant a: dump h_out.f32: a link out of its folder (to /dev/zero); it must be a file the " \
                         "engine wrote there", out.reason


def test_a_huge_sparse_dump_with_a_shape_fails_unread(tmp_path, monkeypatch):
    """The size is checked against the shape before a byte is read."""
    reads: list[int] = []
    real = inputs._read_fd
    monkeypatch.setattr(inputs, "_read_fd", lambda fd, name, size, *a, **k: reads.append(size) or real(fd, name, size,
                                                                                                        *a, **k))
    out = _evaluate(tmp_path, monkeypatch, lambda d, side: os.truncate(d / "h_out.f32", 1 << 40) if side == "b" else None)
    assert out.verdict == "FAIL"
    assert out.reason == ("variant b: dump h_out.f32: 1099511627776 bytes but meta.json shape [2, 3] of f32 needs 24 "
                          "(truncated or stale dump)"), out.reason
    assert 1 << 40 not in reads


def test_a_huge_sparse_dump_without_a_shape_is_capped(tmp_path, monkeypatch):
    """Without a shape in meta.json the dumps are compared by length, up to inputs.MAX_DUMP each
    (made small here; the file is sparse: no disk is used)."""
    monkeypatch.setattr(inputs, "MAX_DUMP", 1 << 20, raising=False)
    out = _evaluate(tmp_path, monkeypatch, lambda d, side: os.truncate(d / "h_out.f32", 64 << 20), meta={})
    assert out.verdict == "FAIL"
    assert out.reason == "variant a: dump h_out.f32: 67108864 bytes, over the 1 MiB allowed for this file", out.reason


def test_a_shaped_dump_over_the_plain_cap_is_read(tmp_path, monkeypatch):
    """Before: F5's 3 GB logits (3000 positions, shape in meta.json) failed the 2 GiB cap meant for
    dumps of unknown size. A dump of exactly its shape's size is read up to MAX_SHAPED_DUMP (both
    caps made small here: the shape [2, 3] of f32 is 24 bytes)."""
    monkeypatch.setattr(inputs, "MAX_DUMP", 16, raising=False)
    assert _evaluate(tmp_path / "read", monkeypatch, lambda d, side: None).verdict == "PASS"
    monkeypatch.setattr(inputs, "MAX_SHAPED_DUMP", 16, raising=False)
    out = _evaluate(tmp_path / "capped", monkeypatch, lambda d, side: None)
    assert out.verdict == "FAIL"
    assert out.reason == "variant a: dump h_out.f32: 24 bytes, over the 16 bytes allowed for this file", out.reason


@pytest.mark.parametrize("meta", [{}, {"shapes": {"h_out": [0, 3]}}], ids=["no shape", "shape [0, 3]"])
def test_empty_dumps_in_both_variants_are_vacuous(tmp_path, monkeypatch, meta):
    """Before: PASS, "1 comparison: identical bytes", with no element compared."""
    out = _evaluate(tmp_path, monkeypatch, lambda d, side: (d / "h_out.f32").write_bytes(b""), meta=meta)
    assert out.verdict == "FAIL"
    shape = " (meta.json shape [0, 3])" if meta else ""
    assert out.reason == f"vacuous: variant a: dump h_out.f32 is empty{shape}: no element to compare", out.reason


def test_a_dump_folder_that_is_a_link_fails(tmp_path, monkeypatch):
    """The engine replaces its dump folder by a link to a folder both variants share."""
    elsewhere = tmp_path / "elsewhere"

    def plant(d: Path, side: str) -> None:
        if not elsewhere.exists():
            d.rename(elsewhere)
        else:
            for f in d.iterdir():
                f.unlink()
            d.rmdir()
        d.symlink_to(elsewhere, target_is_directory=True)
    out = _evaluate(tmp_path, monkeypatch, plant)
    assert out.verdict == "FAIL"
    assert out.reason == f"variant a: meta.json: its folder dump is a symbolic link (to {elsewhere})", out.reason


def test_meta_json_linked_out_of_its_folder_fails(tmp_path, monkeypatch):
    shared = tmp_path / "meta.json"
    shared.write_text(json.dumps(SHAPED))
    out = _evaluate(tmp_path, monkeypatch, lambda d, side: _replace(d, lambda p: p.symlink_to(shared), "meta.json"))
    assert out.verdict == "FAIL" and out.reason.startswith("variant a: meta.json: a link out of its folder"), out.reason


# ---- the reader itself -----------------------------------------------------------------------------

def test_read_inside_ends_a_stalled_read(tmp_path, monkeypatch):
    """A read that makes no headway within READ_SECONDS ends with a FileRefused (a planted clock:
    each call is a minute later)."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"\1" * 4096)
    ticks = iter(range(0, 10**6, 60))
    monkeypatch.setattr(inputs, "clock", lambda: next(ticks), raising=False)
    monkeypatch.setattr(inputs, "CHUNK", 1024, raising=False)
    monkeypatch.setattr(inputs, "READ_SECONDS", 150.0, raising=False)
    with pytest.raises(inputs.FileRefused, match=r"^x: not read within 150 s \(2048 of 4096 bytes\)"):
        inputs.read_inside(tmp_path / "d", "x", 1 << 20)


def test_read_inside_refuses_a_file_that_grows_while_read(tmp_path, monkeypatch):
    (tmp_path / "d").mkdir()
    p = tmp_path / "d" / "x"
    p.write_bytes(b"\1" * 4096)
    monkeypatch.setattr(inputs, "CHUNK", 1024, raising=False)
    real = os.fstat

    def fstat_then_grow(fd):  # the fstat sees 4096 bytes; the file then grows by one
        st = real(fd)
        with open(p, "ab") as f:
            f.write(b"\2")
        return st
    monkeypatch.setattr(inputs.os, "fstat", fstat_then_grow)
    with pytest.raises(inputs.FileRefused, match=r"^x: grew while it was read \(4096 bytes, then more\)$"):
        inputs.read_inside(tmp_path / "d", "x", 1 << 20)


def test_read_inside_passes_a_missing_file_through(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(FileNotFoundError):
        inputs.read_inside(tmp_path / "d", "x", 10)
    with pytest.raises(FileNotFoundError):
        inputs.read_inside(tmp_path / "nowhere", "x", 10)


# ---- the build matrix's cross-entry comparisons read their copies the same way ----------------------

@pytest.mark.parametrize("plant", ["shared link", "folder"])
def test_cross_entry_dumps_read_inside_their_folders(tmp_path, plant):
    """Before: two links to one outside file gave PASS; a folder raised IsADirectoryError."""
    from harness.matrix import cross, spec

    shared = tmp_path / "shared.f32"
    shared.write_bytes(H)
    sources = {}
    for entry in ("a", "b"):
        d = tmp_path / entry / "cpu"
        d.mkdir(parents=True)
        if plant == "shared link":
            (d / "h_out.f32").symlink_to(shared)
        elif entry == "b":
            (d / "h_out.f32").mkdir()
        else:
            (d / "h_out.f32").write_bytes(H)
        sources[(entry, "cpu")] = cross.DumpSource(entry, "cpu", d, {"h_out": {"file": "h_out.f32"}})
    c = spec.Cross("X1", "t", (("a", "cpu"), ("b", "cpu")), ("h_out",))
    h_out = DumpSpec("h_out", "h_out.f32", "f32", "shapes.h_out")
    verdict, why, _ = cross.evaluate_cross(c, sources, {}, {"h_out": h_out})
    assert verdict == "FAIL"
    assert ("a link out of its folder" if plant == "shared link" else "h_out.f32: is a directory") in why, why


def test_a_shape_whose_element_count_overflows_int64_is_no_empty_dump(tmp_path, monkeypatch):
    """[2**32, 2**32] has 2**64 elements: numpy's int64 product wrapped to 0, so two empty dumps
    matched the shape and PASSed. The size is now Python's exact product."""
    out = _evaluate(tmp_path, monkeypatch, lambda d, side: (d / "h_out.f32").write_bytes(b""),
                    meta={"shapes": {"h_out": [2**32, 2**32]}})
    assert out.verdict == "FAIL"
    assert out.reason == (f"variant a: dump h_out.f32: 0 bytes but meta.json shape [{2**32}, {2**32}] of f32 needs "
                          f"{2**66} (truncated or stale dump)"), out.reason


# ---- an artifact criterion's built files ---------------------------------------------------------

@pytest.mark.parametrize("kind", ["folder", "fifo"])
@pytest.mark.parametrize("check", ["text", "binary"])
def test_an_artifact_that_is_no_regular_file_is_named_unopened(tmp_path, kind, check):
    """Before: a folder raised IsADirectoryError (an internal error); a FIFO blocked the read."""
    from harness.contract.criteria import FileCheck

    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    p = tmp_path / "libkite_cuda.so"
    p.mkdir() if kind == "folder" else os.mkfifo(p)
    fc = FileCheck(path="x", text_match=["^x"]) if check == "text" else FileCheck(path="x", needed_match=["c"])
    got: list[tuple[list[str], list[str]]] = []
    t = threading.Thread(target=lambda: got.append(runner.check_file(fc, p, [])), daemon=True)
    t.start()
    t.join(60)  # a guard, not a timing assert: the fixed check never opens it
    if t.is_alive():
        os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))  # a writer: the blocked open returns
        t.join()
        pytest.fail("checking a FIFO blocked")
    what = "a directory" if kind == "folder" else "a FIFO (named pipe)"
    assert got == [([f"libkite_cuda.so: is {what}, not a regular file"], [])]
