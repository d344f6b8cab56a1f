"""Running matrix entries: skip reasons, the fat-binary code list, cuobjdump parsing, the
cross-entry comparison, and the fake loader-test module (built with the host toolchains)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from engine_build import abi_names
from harness.builder import fatbin as F
from harness.builder import toolchains as tc
from harness.builder.binfmt import read_binary
from harness.contract.config import DumpSpec
from harness.matrix import cross as X
from harness.matrix import entry as E
from harness.matrix import spec as M

ROOT = Path(__file__).resolve().parent.parent
ABI = sorted(abi_names())  # kite_cuda.h's entry points, sorted as exports() lists them


def fatbin(entries: list[tuple[int, int]]) -> bytes:
    """A fat binary container as nvcc embeds it: (kind 1=PTX / 2=ELF, arch) entries."""
    body = b""
    for kind, arch in entries:
        payload = bytes(40)
        hdr = struct.pack("<HHIQ", kind, 0x101, 64, len(payload)) + bytes(12) + struct.pack("<I", arch)
        hdr += bytes(64 - len(hdr))
        body += hdr + payload
    return struct.pack("<IHHQ", F.FATBIN_MAGIC, 1, 16, len(body)) + body


def test_scan_fatbin_lists_sass_and_ptx():
    blob = b"\x7fELF" + bytes(100) + fatbin([(2, 90), (2, 80)]) + bytes(7) + fatbin([(1, 90), (2, 90), (2, 80)])
    assert F.scan_fatbin(blob) == {"elf": ["sm_80", "sm_90"], "ptx": ["sm_90"]}
    assert F.scan_fatbin(b"no fat binary here") == {"elf": [], "ptx": []}
    # a stray magic number with a nonsense header is ignored
    junk = struct.pack("<IHHQ", F.FATBIN_MAGIC, 7, 16, 10**12)
    assert F.scan_fatbin(junk + fatbin([(2, 100)])) == {"elf": ["sm_100"], "ptx": []}


def test_cuobjdump_listing_parser():
    text = ("ELF file    1: libkite_cuda.1.sm_90.cubin\nELF file    2: libkite_cuda.2.sm_80.cubin\n"
            "ELF file    3: libkite_cuda.3.sm_90.cubin\n")
    assert F.parse_cuobjdump_list(text) == ["sm_80", "sm_90"]
    assert F.parse_cuobjdump_list("PTX file    1: libkite_cuda.1.sm_90.ptx\n") == ["sm_90"]
    assert F.parse_cuobjdump_list("cuobjdump info    : No PTX file found to extract from 'x.so'.\n") == []


def test_win_path():
    assert E.win_path("/tmp/a b/c.gguf") == "Z:\\tmp\\a b\\c.gguf"


def test_missing_toolchain_skips_with_hint(monkeypatch):
    m = M.load_matrix(ROOT / "configs" / "matrix.yaml", ROOT)
    real = tc.probe

    def probe(name: str) -> tc.Tool:
        if name == "wine":
            return tc.Tool("wine", False, reason="wine / wine64 not on PATH", hint=tc.INSTALL_HINTS["wine"])
        return real(name)

    monkeypatch.setattr(tc, "probe", probe)
    ok, why = M.availability(m.entries["win64-mingw"])
    if not tc.probe("mingw").found:
        pytest.skip("no MinGW: the first unmet requirement is MinGW")
    assert not ok
    assert why == "wine not available: wine / wine64 not on PATH (install: apt-get install wine wine64 " \
                  "(or run .ci/install-toolchains.sh))"


def test_msvc_entry_skips_off_windows():
    if tc.os.name == "nt":
        pytest.skip("Windows host")
    m = M.load_matrix(ROOT / "configs" / "matrix.yaml", ROOT)
    ok, why = M.availability(m.entries["win64-msvc"])
    assert not ok and why.startswith("msvc not available: MSVC runs on Windows only")


def src(entry: str, var: str, files: dict[str, bytes], tmp: Path | None) -> X.DumpSource:
    import hashlib

    d = None
    if tmp is not None:
        d = tmp / entry / var
        d.mkdir(parents=True)
        for n, b in files.items():
            (d / f"{n}.f32").write_bytes(b)
    return X.DumpSource(entry, var, d, {n: {"file": f"{n}.f32", "sha256": hashlib.sha256(b).hexdigest()}
                                        for n, b in files.items()})


def test_cross_memcmp_pass_fail_skip(tmp_path):
    c = M.Cross("X1", "t", (("a", "cpu"), ("b", "cpu"), ("c", "cpu")), ("h_out", "logits"))
    one = struct.pack("<2f", 1.0, 2.0)
    other = struct.pack("<2f", 1.0, 2.0000002)
    files = {n: DumpSpec(n, f"{n}.f32", "f32", f"shapes.{n}") for n in ("h_out", "logits")}
    s = {("a", "cpu"): src("a", "cpu", {"h_out": one, "logits": one}, tmp_path),
         ("b", "cpu"): src("b", "cpu", {"h_out": one, "logits": one}, tmp_path)}
    v, why, det = X.evaluate_cross(c, s, {"c": "wine not available"}, files)
    assert v == "PASS" and "1 skipped: c:cpu" in why
    assert det["missing"] == {"c:cpu": "wine not available"}
    s[("c", "cpu")] = src("c", "cpu", {"h_out": one, "logits": other}, tmp_path)
    v, why, det = X.evaluate_cross(c, s, {}, files)
    assert v == "FAIL" and "a:cpu vs c:cpu logits" in why and "max ULP 1" in why
    v, why, _ = X.evaluate_cross(c, {("a", "cpu"): s[("a", "cpu")]}, {"b": "x", "c": "y"}, files)
    assert v == "SKIP" and "only 1 of 3" in why


def test_cross_gpu_requirement_skips_without_gpu_dumps():
    c = M.Cross("X2", "t", (("a", "cpu"), ("a", "gpu")), ("logits",), requires=("gpu",))
    v, why, _ = X.evaluate_cross(c, {("a", "cpu"): src("a", "cpu", {"logits": b"1234"}, None)}, {}, {})
    assert v == "SKIP" and "no GPU dumps" in why


def _build_fake(tmp: Path, toolchain_file: str | None) -> Path:
    out = tmp / "bin"
    args = ["cmake", "-S", str(ROOT / "native" / "testmod"), "-B", str(tmp / "b"), f"-DKITE_OUTPUT_DIR={out}"]
    if toolchain_file:
        args.append(f"-DCMAKE_TOOLCHAIN_FILE={ROOT / toolchain_file}")
    subprocess.run(args, check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(tmp / "b"), "--parallel", "2"], check=True, capture_output=True)
    return out / "testmods"


@pytest.mark.skipif(not shutil.which("cmake") or not shutil.which("cc"), reason="needs cmake and a C compiler")
def test_fake_module_linux_exports_exactly_the_abi(tmp_path):
    t = _build_fake(tmp_path, None)
    assert read_binary(t / "libkite_cuda_fake.so").exports(["_init", "_fini", "_edata", "_end", "__bss_start"]) == ABI
    noexp = read_binary(t / "libkite_cuda_fake_noexport.so").exports(["_init", "_fini"])
    assert "kcuda_step_m" not in noexp and len(noexp) == len(ABI) - 1
    assert not any("cuda" in n and not n.startswith("libc") for n in read_binary(t / "libkite_cuda_fake.so").needed)


@pytest.mark.skipif(not shutil.which("x86_64-w64-mingw32-gcc") or not shutil.which("cmake"),
                    reason="MinGW not installed (apt-get install gcc-mingw-w64-x86-64)")
def test_fake_module_mingw_dll(tmp_path):
    t = _build_fake(tmp_path, M.MINGW_TOOLCHAIN_FILE)
    dll = read_binary(t / "fake" / "kite_cuda.dll")
    assert dll.format == "pe"
    assert dll.exports() == ABI
    assert {n.lower() for n in dll.needed} <= {"kernel32.dll", "msvcrt.dll"}  # no MinGW runtime DLLs
    assert (t / "kite_cuda_fake_badabi.dll").exists() and (t / "kite_cuda_fake_noexport.dll").exists()
