"""Malformed GGUF files: each gives a clear `kite: error:` message and exit 1, never a crash;
the same inputs run clean under AddressSanitizer + UndefinedBehaviorSanitizer."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from engine_build import kite_asan_bin, kite_bin, qwen35_fixtures, run_kite  # noqa: F401

pytestmark = pytest.mark.native  # builds and runs the real engine


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _small(
    n_tensors=1,
    n_kv=1,
    version=3,
    magic=b"GGUF",
    kv_type=8,
    str_len=None,
    n_dims=2,
    dims=(32, 2),
    ttype=0,
    offset=0,
    arch="qwen35",
) -> bytes:
    """One metadata pair (general.architecture) and one F32 tensor [32, 2]."""
    key = b"general.architecture"
    out = magic + struct.pack("<IQQ", version, n_tensors, n_kv)
    out += struct.pack("<Q", len(key) if str_len is None else str_len) + key
    out += struct.pack("<I", kv_type) + _str(arch)
    out += _str("token_embd.weight") + struct.pack("<I", n_dims)
    out += b"".join(struct.pack("<Q", d) for d in dims)
    out += struct.pack("<IQ", ttype, offset)
    out += b"\0" * ((32 - len(out) % 32) % 32)
    return out + b"\0" * 256


BAD = {
    "empty": (b"", "not a GGUF file"),
    "bad_magic": (_small(magic=b"GGUX"), "bad magic"),
    "bad_version": (_small(version=7), "unsupported GGUF version"),
    "huge_tensor_count": (_small(n_tensors=1 << 60), "tensor count"),
    "huge_kv_count": (_small(n_kv=(1 << 64) - 1), "metadata count"),
    "huge_string": (_small(str_len=1 << 50), "string length"),
    "unknown_kv_type": (_small(kv_type=77), "unknown value type"),
    "unknown_tensor_type": (_small(ttype=12), "unsupported tensor type 12"),
    "too_many_dims": (_small(n_dims=5, dims=(1, 1, 1, 1, 1)), "dimensions"),
    "zero_dim": (_small(dims=(32, 0)), "is zero"),
    "overflowing_dims": (_small(dims=(1 << 40, 1 << 40)), "overflow"),
    "offset_past_end": (_small(offset=1 << 20), "outside the file"),
    "offset_unaligned": (_small(offset=8), "alignment"),
    "offset_wraps": (_small(offset=(1 << 64) - 32), "outside the file"),
    "q8_row_not_blocks": (_small(ttype=8, dims=(33, 2)), "whole number of q8_0 blocks"),
    "truncated_header": (_small()[:18], "truncated"),
    "truncated_in_kv": (_small()[:40], "truncated"),
    "truncated_in_tensor": (_small()[:90], "truncated"),
    "truncated_data": (_small()[:-100], "outside the file"),
    "not_qwen35": (_small(arch="llama"), "not supported"),
    "valid_but_no_tensors": (_small(), "missing"),
}


def _write_cases(folder: Path) -> dict[str, tuple[Path, str]]:
    folder.mkdir(parents=True, exist_ok=True)
    cases = {}
    for name, (data, expect) in BAD.items():
        p = folder / f"{name}.gguf"
        p.write_bytes(data)
        cases[name] = (p, expect)
    return cases


def _fixture_cuts(qwen35_fixtures: Path, folder: Path) -> list[Path]:
    """The real tiny-a q8_0 file cut at several points: header, metadata, tensors, data."""
    src = (qwen35_fixtures / "tiny-a" / "tiny-a-q8_0.gguf").read_bytes()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for cut in (10, 24, 100, 1000, 5000, 20000, len(src) // 2, len(src) - 1):
        p = folder / f"cut_{cut}.gguf"
        p.write_bytes(src[:cut])
        paths.append(p)
    return paths


def _check(exe, path: Path, expect: str | None):
    res = run_kite(exe, "run", "--model", path, "--prompt", "1", timeout=60)
    assert res.returncode == 1, (path.name, res.returncode, res.stderr)
    assert res.stderr.startswith("kite: error:"), (path.name, res.stderr)
    if expect:
        assert expect in res.stderr, (path.name, res.stderr)
    assert "Sanitizer" not in res.stderr and "runtime error" not in res.stderr, res.stderr


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_gguf_clear_error(kite_bin, tmp_path, name):
    path, expect = _write_cases(tmp_path)[name]
    _check(kite_bin, path, expect)


def test_truncated_fixture(kite_bin, qwen35_fixtures, tmp_path):
    for p in _fixture_cuts(qwen35_fixtures, tmp_path):
        _check(kite_bin, p, None)


def test_bad_gguf_under_sanitizers(kite_asan_bin, tmp_path):
    for path, expect in _write_cases(tmp_path / "bad").values():
        _check(kite_asan_bin, path, expect)
    res = run_kite(kite_asan_bin, "selftest", timeout=300)
    assert res.returncode == 0 and "runtime error" not in res.stderr, res.stdout + res.stderr


def test_fixture_cuts_and_a_good_run_under_sanitizers(kite_asan_bin, qwen35_fixtures, tmp_path):
    for p in _fixture_cuts(qwen35_fixtures, tmp_path / "cuts"):
        _check(kite_asan_bin, p, None)
    model = qwen35_fixtures / "tiny-b" / "tiny-b-q8_0.gguf"
    res = run_kite(
        kite_asan_bin, "run", "--model", model, "--prompt", "1,2,3,4,5", "--mt", "2", "--steps", "2", "--threads", "2"
    )
    assert res.returncode == 0 and "runtime error" not in res.stderr, res.stderr
