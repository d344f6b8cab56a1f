"""The matrix reads an engine's dumps through the reader verify and compare use
(harness/run/dumps.py): the same caps, a dump never empty and exactly its meta.json shape's size,
NaNs failing a memcmp. Was: the `dump` check hashed whatever bytes were there and the cross
criteria compared them with their own reads, so two engines that both wrote an empty logits.f32
PASSed the dump check and the cross criterion, where verify refused the same files as vacuous.

The engine's dump runs are planted in-process (EntryRunner.run replaced): no build, milliseconds."""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from pathlib import Path

import pytest

from harness.contract import inputs
from harness.contract.config import DumpSpec, load_config
from harness.matrix import cross as X
from harness.matrix import spec as M
from harness.matrix.cross import merge_reports
from harness.matrix.entry import CheckFail, EntryRun, EntryRunner
from harness.process import ProcResult
from harness.run import dumps
from test_merge_reports import MATRIX, floats, make_report

ROOT = Path(__file__).resolve().parent.parent
SPECS = {n: DumpSpec(n, f"{n}.f32", "f32", f"shapes.{n}") for n in ("h_out", "logits")}
NAN = struct.pack("<f", math.nan)


def _runner(tmp_path: Path, written: dict[str, bytes], meta: dict | None) -> EntryRunner:
    """An entry whose engine, asked for dumps, writes `written` (and meta.json) and exits 0."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    mx = M.load_matrix(tmp_path / "matrix.yaml", ROOT)
    r = EntryRunner(load_config(ROOT), mx, mx.entries["a-gcc"], tmp_path / "report", lambda: tmp_path / "m.gguf",
                    progress=lambda s: None)
    r.broot = tmp_path / "build"  # never the project's build folder

    def run(exe, args, env, log):
        out = Path(args[args.index("--dump") + 1])
        out.mkdir(parents=True)
        for name, data in written.items():
            (out / name).write_bytes(data)
        if meta is not None:
            (out / "meta.json").write_text(json.dumps(meta))
        return ProcResult(args, {}, 0, None, False, 0.01, None, None, None, None)

    r.run = run  # type: ignore[method-assign]
    return r


def _check(tmp_path: Path, written: dict[str, bytes], meta: dict | None) -> tuple[str, str, EntryRun]:
    """The dump check's verdict and reason, as EntryRunner.execute records them."""
    run = EntryRun("a-gcc", "PASS", "")
    try:
        res = _runner(tmp_path, written, meta).check_dump(tmp_path / "kite", run)
    except CheckFail as e:
        return "FAIL", str(e), run
    return res.verdict, res.reason, run


def test_the_dump_check_refuses_an_empty_dump_as_verify_does(tmp_path):
    """Was: PASS, with the SHA-256 of no bytes recorded as the entry's logits."""
    v, why, run = _check(tmp_path, {"h_out.f32": floats(1.0), "logits.f32": b""}, {"shapes": {}})
    assert v == "FAIL" and why.startswith("vacuous: ") and "dump logits.f32 is empty" in why, why
    assert run.dumps == {}  # nothing recorded for a cross criterion to compare
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "logits.f32").write_bytes(b"")
    with pytest.raises(dumps.DumpRefused, match="vacuous: dump logits.f32 is empty"):  # verify's reader
        dumps.locate(tmp_path / "v", "logits.f32", "f32", None)


def test_the_dump_check_refuses_a_dump_the_size_of_no_shape(tmp_path):
    """Was: PASS for a logits.f32 of 2 floats whose meta.json shape [1, 3] needs 3."""
    meta = {"shapes": {"h_out": [1, 1], "logits": [1, 3]}}
    v, why, _ = _check(tmp_path, {"h_out.f32": floats(1.0), "logits.f32": floats(1.0, 2.0)}, meta)
    assert v == "FAIL" and "dump logits.f32: 8 bytes but meta.json shape [1, 3] of f32 needs 12" in why, why
    meta["shapes"]["logits"] = "three"
    v, why, _ = _check(tmp_path, {"h_out.f32": floats(1.0), "logits.f32": floats(1.0, 2.0)}, meta)
    assert v == "FAIL" and "meta.json shapes.logits = three is not a list of non-negative integers" in why, why


def test_the_dump_check_records_each_dump_hashed_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "CHUNK", 8)  # many pieces, and a last one shorter
    logits = floats(*range(11))
    meta = {"shapes": {"h_out": [1, 2], "logits": [1, 11]}}
    v, why, run = _check(tmp_path, {"h_out.f32": floats(1.0, 2.0), "logits.f32": logits}, meta)
    assert v == "PASS", why
    rec = run.dumps["cpu"]["files"]["logits"]
    assert rec == {"file": "logits.f32", "bytes": 44, "sha256": hashlib.sha256(logits).hexdigest(), "shape": [1, 11]}
    assert why == f"cpu: {rec['sha256'][:12]}"  # the check's reason as before
    assert run.dumps["cpu"]["files"]["h_out"]["sha256"] == hashlib.sha256(floats(1.0, 2.0)).hexdigest()


def test_the_dump_check_caps_a_dump_as_verify_does(tmp_path, monkeypatch):
    """Was: the cap of a dump without a shape (2 GiB) for every dump, so F5's 3 GB logits, whose
    shape verify reads them by (up to 16 GiB), were refused by the matrix. Here the caps shrunk."""
    monkeypatch.setattr(inputs, "MAX_DUMP", 16)
    logits = floats(*range(5))  # 20 bytes: over the cap of a dump without a shape
    meta = {"shapes": {"h_out": [1, 1], "logits": [1, 5]}}
    v, why, _ = _check(tmp_path / "shaped", {"h_out.f32": floats(1.0), "logits.f32": logits}, meta)
    assert v == "PASS", why
    v, why, _ = _check(tmp_path / "unshaped", {"h_out.f32": floats(1.0), "logits.f32": logits}, {"shapes": {}})
    assert (v, why) == ("FAIL", "`kite run --dump`: dump logits.f32: 20 bytes, over the 16 bytes allowed for this file")


def test_the_dump_check_still_names_a_missing_dump(tmp_path):
    v, why, _ = _check(tmp_path, {"h_out.f32": floats(1.0)}, None)
    assert (v, why) == ("FAIL", "`kite run --dump` wrote no logits.f32")


def _sources(tmp_path: Path, a: bytes, b: bytes, shape: list[int] | None = None,
             digests_only: bool = False) -> dict[tuple[str, str], X.DumpSource]:
    out = {}
    for entry, data in (("a", a), ("b", b)):
        d = tmp_path / entry / "cpu"
        d.mkdir(parents=True)
        (d / "logits.f32").write_bytes(data)
        info = {"file": "logits.f32", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        out[(entry, "cpu")] = X.DumpSource(entry, "cpu", None if digests_only else d,
                                           {"logits": {**info, **({"shape": shape} if shape else {})}})
    return out


CROSS = M.Cross("X1", "t", (("a", "cpu"), ("b", "cpu")), ("logits",))


def test_cross_refuses_two_empty_dumps(tmp_path):
    """Was: PASS "1 dumps identical across 2" for two empty logits.f32."""
    v, why, det = X.evaluate_cross(CROSS, _sources(tmp_path, b"", b""), {}, SPECS)
    assert v == "FAIL" and "a:cpu vs b:cpu logits: vacuous: dump logits.f32 is empty" in why, why
    assert det["comparisons"][0]["identical"] is False


def test_cross_refuses_two_empty_dumps_known_by_their_digests_alone(tmp_path):
    """Was: PASS "identical bytes (SHA-256)": the digests of no bytes are equal."""
    v, why, det = X.evaluate_cross(CROSS, _sources(tmp_path, b"", b"", digests_only=True), {}, SPECS)
    assert v == "FAIL" and "vacuous: dump logits.f32 is empty" in why, why
    assert det["comparisons"][0]["how"] == "sha256"
    v, why, _ = X.evaluate_cross(CROSS, _sources(tmp_path / "x", floats(1.0), floats(1.0), digests_only=True), {},
                                 SPECS)
    assert v == "PASS", why


def test_cross_fails_identical_nans_as_a_memcmp_in_verify_does(tmp_path):
    """Was: PASS: the two entries' bytes were identical, NaN and all."""
    v, why, det = X.evaluate_cross(CROSS, _sources(tmp_path, floats(1.0) + NAN, floats(1.0) + NAN), {}, SPECS)
    assert v == "FAIL" and "NaN in A and B" in why, why
    assert det["comparisons"][0]["identical"] is True  # the bytes are; the verdict is not


def test_cross_checks_each_dump_against_its_recorded_shape(tmp_path):
    """Was: PASS for two identical dumps of 2 floats recorded with the shape [1, 3]."""
    v, why, _ = X.evaluate_cross(CROSS, _sources(tmp_path, floats(1.0, 2.0), floats(1.0, 2.0), [1, 3]), {}, SPECS)
    assert v == "FAIL" and "8 bytes but meta.json shape [1, 3] of f32 needs 12" in why, why
    v, why, det = X.evaluate_cross(CROSS, _sources(tmp_path / "x", floats(1.0, 2.0), floats(1.0, 2.0), [1, 2]), {},
                                   SPECS)
    assert v == "PASS" and det["comparisons"][0]["how"] == "memcmp", why


def test_cross_compares_in_the_dump_dtype(tmp_path):
    """bf16 dumps of 3 elements (6 bytes): a whole number of bf16, one ULP apart in bf16."""
    bf = {"logits": DumpSpec("logits", "logits.f32", "bf16", "shapes.logits")}
    v, why, _ = X.evaluate_cross(CROSS, _sources(tmp_path, b"\x80\x3f" * 3, b"\x80\x3f" * 2 + b"\x81\x3f"), {}, bf)
    assert v == "FAIL" and "1 of 3 elements differ" in why and "max ULP 1" in why, why


def test_merge_of_two_reports_with_empty_dumps_fails_the_cross_criterion(tmp_path):
    """The same rule where `harness merge` recomputes a cross criterion from two reports."""
    matrix_file = tmp_path / "matrix.yaml"
    matrix_file.write_text(MATRIX)
    empty = {"h_out": floats(1.0), "logits": b""}
    a = make_report(tmp_path / "a", "a-gcc", [("dump", "PASS")], empty)
    b = make_report(tmp_path / "b", "b-mingw", [("dump", "PASS")], dict(empty))
    rc, rep = merge_reports([a, b], tmp_path / "m", root=ROOT, matrix_path=matrix_file)
    x1 = rep.result_for("X1")
    assert rc == 1 and x1["verdict"] == "FAIL" and "vacuous: dump logits.f32 is empty" in x1["reason"], x1


@pytest.mark.parametrize("info", [{"file": "logits.f32", "bytes": 0, "sha256": "0" * 64},
                                  {"file": "logits.f32", "sha256": dumps.EMPTY_SHA256}],
                         ids=["no bytes", "the digest of no bytes"])
def test_a_dump_recorded_empty_is_refused_by_either_fact(info):
    """An older report may lack `bytes`; either fact alone names an empty dump."""
    with pytest.raises(dumps.DumpRefused, match=r"^vacuous: dump logits.f32 is empty: no element to compare$"):
        dumps.check_recorded(info)
    dumps.check_recorded({"file": "logits.f32", "bytes": 4, "sha256": "0" * 64})
    with pytest.raises(dumps.DumpRefused, match=r"^vacuous: dump \? is empty: no element to compare$"):
        dumps.check_recorded({"bytes": 0})  # a record without its file name


def test_the_loader_check_compares_its_dumps_as_verify_does(tmp_path):
    """The fake-bound and module-absent dumps (loader-fake) through the same reader: identical
    bytes holding a NaN are not "output unchanged"."""
    meta = {"shapes": {"h_out": [1, 2], "logits": [1, 2]}}
    r = _runner(tmp_path, {}, None)
    for side, logits in (("a", floats(1.0, 2.0)), ("b", floats(1.0, 2.0))):
        (tmp_path / side).mkdir()
        (tmp_path / side / "h_out.f32").write_bytes(floats(1.0) + NAN)
        (tmp_path / side / "logits.f32").write_bytes(logits)
        (tmp_path / side / "meta.json").write_text(json.dumps(meta))
    rows = {row["dump"]: row for row in r.compare_dirs(tmp_path / "a", tmp_path / "b", "module-absent", "fake-bound")}
    assert rows["h_out"]["identical"] and not rows["h_out"]["ok"] and "NaN in A and B" in rows["h_out"]["reason"]
    assert rows["logits"]["identical"] and rows["logits"]["ok"]
    (tmp_path / "b" / "logits.f32").write_bytes(b"")
    with pytest.raises(CheckFail, match=re.escape("dump logits.f32: 0 bytes but meta.json shape [1, 2] of f32")):
        r.compare_dirs(tmp_path / "a", tmp_path / "b", "module-absent", "fake-bound")
