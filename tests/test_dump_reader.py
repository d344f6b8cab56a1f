"""The one dump reader of verify and compare (issue 44, N06, N07): the same confinement and caps on
both, and identical dumps compared in bounded chunks, never held whole."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from conftest import git
from harness.cli import main
from harness.contract import inputs


def _pair(tmp_path: Path, data_a: bytes, data_b: bytes) -> tuple[Path, Path]:
    for side, data in (("a", data_a), ("b", data_b)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "logits.f32").write_bytes(data)
    return tmp_path / "a", tmp_path / "b"


def test_identical_dumps_are_compared_in_bounded_memory(tmp_path):
    from harness.run import dumps

    n = 12 * 1024 * 1024  # 48 MiB of float32 per dump
    data = np.arange(n, dtype="<f4").tobytes()
    a, b = _pair(tmp_path, data, data)
    del data
    tracemalloc.start()
    try:
        da, db = (dumps.locate(x, "logits.f32", "f32", [n // 1024, 1024]) for x in (a, b))
        d = dumps.compare(da, db)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert d.identical and d.ok and d.elements == n and d.row_len == 1024
    assert peak < 8 * inputs.CHUNK, peak  # a few chunks and their values, not two 48 MiB dumps


@pytest.mark.parametrize("chunk", [3, 4, 6, 12, 4096])  # 3 and 6: pieces that split an element
def test_a_difference_or_a_nan_gets_the_full_account(tmp_path, monkeypatch, chunk):
    from harness.run import dumps

    monkeypatch.setattr(inputs, "CHUNK", chunk)
    xs = [float(i) for i in range(100)]
    ys = list(xs)
    ys[77] = 77.5
    a, b = _pair(tmp_path, struct.pack("<100f", *xs), struct.pack("<100f", *ys))
    d = dumps.compare(dumps.locate(a, "logits.f32", "f32", [10, 10]), dumps.locate(b, "logits.f32", "f32", [10, 10]))
    assert (d.identical, d.ok, d.differing, d.first_index, d.first_position, d.first_element) == \
        (False, False, 1, 77, 7, 7)
    nan = struct.pack("<100f", *xs[:50], float("nan"), *xs[51:])
    (a / "logits.f32").write_bytes(nan)
    (b / "logits.f32").write_bytes(nan)
    d = dumps.compare(dumps.locate(a, "logits.f32", "f32", [10, 10]), dumps.locate(b, "logits.f32", "f32", [10, 10]))
    assert d.identical and not d.ok and d.nan_a == 1  # identical bytes, but a NaN fails unless allowed



@pytest.mark.parametrize("dtype, inf, nan", [("f16", 0x7C00, 0x7E00), ("bf16", 0x7F80, 0x7FC0)],
                         ids=["f16", "bf16"])
def test_identical_half_dumps_with_an_infinity_or_a_nan_get_the_full_account(tmp_path, dtype, inf, nan):
    """The chunked memcmp reads f16 and bf16 as their own floats: an infinity or a NaN in identical
    bytes is found there, and the full account says where (a NaN fails a memcmp)."""
    from harness.run import dumps

    one, minus_two = (0x3C00, 0xC000) if dtype == "f16" else (0x3F80, 0xC000)
    cases = [((one, minus_two, one, one), True, 0, 0), ((one, inf, minus_two, one), True, 0, 1),
             ((one, minus_two, nan, one), False, 1, 0)]
    for i, (bits, ok, nans, infs) in enumerate(cases):
        data = struct.pack("<4H", *bits)
        (tmp_path / str(i)).mkdir()
        a, b = _pair(tmp_path / str(i), data, data)
        d = dumps.compare(*(dumps.locate(x, "logits.f32", dtype, [2, 2]) for x in (a, b)))
        assert (d.identical, d.ok, d.nan_a, d.inf_a, d.elements, d.row_len) == (True, ok, nans, infs, 4, 2), d
        assert d.reason.endswith("identical bytes") and (d.reason == "identical bytes") == (not nans and not infs), d


@pytest.mark.parametrize("shapes", [([2, 4], [2, 4]), ([2, 4], None), (None, [2, 4]), (None, None)])
def test_the_chunked_memcmp_records_what_the_full_account_does(tmp_path, shapes):
    """Identical finite dumps, with a shape on both sides, one or none: the chunked memcmp's
    record is the full account's (compare_bytes, as tolerance mode runs it), to the JSON."""
    from harness.run import dumps

    data = struct.pack("<8f", *range(8))
    a, b = _pair(tmp_path, data, data)
    da, db = (dumps.locate(x, "logits.f32", "f32", s) for x, s in zip((a, b), shapes, strict=True))
    streamed, full = dumps.compare(da, db), dumps.compare(da, db, mode="tolerance", max_abs=0.0)
    assert (streamed.identical, streamed.ok, streamed.reason, streamed.elements) == (True, True, "identical bytes", 8)
    assert streamed.row_len == (4 if shapes[0] else 8)
    assert json.dumps(streamed.to_json()) == json.dumps(full.to_json())  # 8 elements, not 8.0


def test_identical_bytes_of_two_shapes_are_a_shape_mismatch(tmp_path):
    from harness.run import dumps

    data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    a, b = _pair(tmp_path, data, data)
    d = dumps.compare(dumps.locate(a, "logits.f32", "f32", [2, 2]), dumps.locate(b, "logits.f32", "f32", [1, 4]))
    assert (d.identical, d.ok, d.reason) == (False, False, "shape mismatch: A [2, 2] vs B [1, 4]")


def test_a_dump_changed_after_it_was_located_is_refused_by_its_name(tmp_path):
    """Truncated between locate and the read: the hash, the chunked memcmp and the whole read
    (tolerance mode) each refuse it, naming the dump as locate showed it."""
    from harness.run import dumps

    data = struct.pack("<8f", *range(8))
    a, b = _pair(tmp_path, data, data)
    da, db = (dumps.locate(x, "logits.f32", "f32", [2, 4]) for x in (a, b))
    (b / "logits.f32").write_bytes(data[:16])
    why = r"^dump logits\.f32: 16 bytes but 32 expected$"
    with pytest.raises(dumps.DumpRefused, match=why):
        dumps.digest(db)
    with pytest.raises(dumps.DumpRefused, match=why):
        dumps.compare(da, db)
    with pytest.raises(dumps.DumpRefused, match=why):
        dumps.compare(da, db, mode="tolerance", max_abs=1.0)
    assert dumps.digest(da) == hashlib.sha256(data).hexdigest()


def test_a_dump_that_grows_while_it_is_compared_is_refused(tmp_path, monkeypatch):
    """B is still being written: bytes appended once A's last piece is read make B longer than
    located. The chunked memcmp reads B to its end, so it is refused, not found identical."""
    from harness.run import dumps

    data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    a, b = _pair(tmp_path, data, data)
    da, db = (dumps.locate(x, "logits.f32", "f32", [4]) for x in (a, b))
    real = inputs.chunks_inside

    def chunks(folder, name, size, shown=None):
        yield from real(folder, name, size, shown)
        if folder == a:
            with open(b / "logits.f32", "ab") as f:
                f.write(data)

    monkeypatch.setattr(inputs, "chunks_inside", chunks)
    with pytest.raises(dumps.DumpRefused, match=r"^dump logits\.f32: grew while it was read \(16 bytes, then more\)$"):
        dumps.compare(da, db)

def test_one_cap_for_verify_and_compare(tmp_path):
    """e338b56: compare capped a dump without a shape at 64 MiB where verify allowed 2 GiB, and a
    shaped one by its size alone, where verify stopped at 16 GiB."""
    from harness.run import dumps

    big = tmp_path / "d" / "logits.f32"
    big.parent.mkdir()
    with open(big, "wb") as f:
        f.truncate(inputs.MAX_DUMP + 4)  # sparse
    with pytest.raises(dumps.DumpRefused, match="over the 2048 MiB"):
        dumps.locate(big.parent, "logits.f32", "f32", None)
    with open(big, "wb") as f:
        f.truncate(inputs.MAX_SHAPED_DUMP + 4)  # sparse, of the size its shape gives
    with pytest.raises(dumps.DumpRefused, match="over the 16384 MiB"):
        dumps.locate(big.parent, "logits.f32", "f32", [inputs.MAX_SHAPED_DUMP // 4 + 1])


LINKED = ('        FILE *f = fopen(path, "wb");\n'
          '        if (!f || fwrite(values, sizeof(float), (size_t)@N@, f) != (size_t)@N@ || fclose(f)) return 1;\n')


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("cc") and shutil.which("git")),
                    reason="needs cmake, a C compiler and git")
def test_compare_refuses_dumps_linked_out_of_their_folder(tmp_path):
    """e338b56 (N06): both revisions' engines link values.f32 to one file outside the dump folder:
    compare read it twice and said "bytes same"."""
    from tests import compare_repo as CR

    repo = tmp_path / "repo"
    c = CR.make_repo(repo)
    shared = tmp_path / "shared.f32"
    shared.write_bytes(struct.pack("<1000f", *range(1000)))
    assert LINKED in CR.SOURCE
    src = CR.SOURCE.replace("#include <sys/stat.h>", "#include <sys/stat.h>\n#include <unistd.h>").replace(
        LINKED, f'        if (symlink("{shared}", path)) return 1;\n        FILE *f;\n')
    commits = []
    for name, work in (("n", 100), ("count", 101)):
        (repo / "src" / "eng.c").write_text(src.replace("@WORK@", str(work)).replace("@N@", name)
                                            .replace("@CHANGE@", ""))
        git(repo, "commit", "-q", "-am", f"link the dump ({name})")
        commits.append(git(repo, "rev-parse", "HEAD"))
    assert main(["--root", str(repo), "register", str(repo / "regressions" / "work.yaml")]) == 0
    rc = main(["--root", str(repo), "compare", *commits, "--cache", str(tmp_path / "cache"),
               "--out", str(tmp_path / "o"), "--max-pairs", "4"])
    w = json.loads((tmp_path / "o" / "report.json").read_text())["workloads"][0]
    assert c and rc == 1 and w["speed"] == "error" and w["bytes"] != "same", w
    assert "a link out of its folder" in w["reason"]
