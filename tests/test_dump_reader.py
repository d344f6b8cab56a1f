"""The one dump reader of verify and compare (issue 44, N06, N07): the same confinement and caps on
both, and identical dumps compared in bounded chunks, never held whole."""

from __future__ import annotations

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


@pytest.mark.parametrize("chunk", [4, 12, 4096])
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
