"""ELF/PE facts in pure Python, and artifact criteria built on them."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from harness.spec import criteria as C
from harness.build.binfmt import BinaryFormatError, BinaryInfo, Symbol, parse_pe, read_binary
from harness.run import runner
from harness.run.runner import check_file

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(CC is None, reason="no host C compiler")

SRC = """
#include <math.h>
__attribute__((visibility("default"))) int kcuda_abi_version(void) { return 1; }
__attribute__((visibility("default"))) double kcuda_norm(double x) { return sqrt(x) + cos(x); }
__attribute__((visibility("hidden"))) int helper(void) { return 2; }
extern int cudaMalloc(void **p, unsigned long n);
int uses_undefined(void) { void *p; return cudaMalloc(&p, 4); }
"""


@pytest.fixture(scope="module")
def shared_object(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("so")
    (d / "m.c").write_text(SRC)
    out = d / "libm_test.so"
    subprocess.run([CC, "-shared", "-fPIC", "-fvisibility=hidden", "-o", str(out), str(d / "m.c"), "-lm"],
                   check=True, capture_output=True)
    return out


@needs_cc
def test_elf_needed_and_symbols(shared_object):
    info = read_binary(shared_object)
    assert info.format == "elf"
    assert any(n.startswith("libm.so") for n in info.needed)
    exports = info.exports(["_init", "_fini", "_edata", "_end", "__bss_start"])
    assert "kcuda_abi_version" in exports and "kcuda_norm" in exports and "uses_undefined" not in exports
    assert "helper" not in exports
    assert "cudaMalloc" in info.undefined()


@needs_cc
def test_elf_agrees_with_readelf(shared_object):
    readelf = shutil.which("readelf")
    if not readelf:
        pytest.skip("no readelf")
    out = subprocess.run([readelf, "-d", str(shared_object)], capture_output=True, text=True).stdout
    needed = [ln.split("[")[1].split("]")[0] for ln in out.splitlines() if "(NEEDED)" in ln]
    assert needed == read_binary(shared_object).needed


@needs_cc
def test_artifact_checks(shared_object):
    ignore = ["_init", "_fini", "_edata", "_end", "__bss_start"]
    good = C.FileCheck(path="x", needed_not_match=["^libcuda", "^libcudart"], exports_match="^kcuda_",
                       exports_exactly=["kcuda_abi_version", "kcuda_norm"])
    problems, facts = check_file(good, shared_object, ignore)
    assert problems == [] and any("2 exports" in f for f in facts)
    bad = C.FileCheck(path="x", needed_not_match=["^libm\\."], undefined_not_match=["^cuda"],
                      exports_exactly=["kcuda_abi_version", "kcuda_step"], symbols_not_match=["^cuda"])
    problems, _ = check_file(bad, shared_object, ignore)
    text = "\n".join(problems)
    assert "depends on libm.so.6" in text
    assert "undefined symbol(s) cudaMalloc match /^cuda/" in text
    assert "unexpected exports: kcuda_norm" in text and "missing exports: kcuda_step" in text
    assert "dynamic symbol(s) cudaMalloc" in text


def test_missing_and_absent(tmp_path):
    fc = C.FileCheck(path="x")
    assert check_file(fc, tmp_path / "nope", [])[0] == [f"{tmp_path / 'nope'} does not exist"]
    assert check_file(C.FileCheck(path="x", exists=False), tmp_path / "nope", [])[0] == []
    (tmp_path / "junk").write_text("not a binary")
    p, _ = check_file(C.FileCheck(path="x", needed_match=["x"]), tmp_path / "junk", [])
    assert "cannot read as a binary" in p[0]


def _minimal_pe(exports: list[str], imports: list[str]) -> bytes:
    """A tiny PE32+ image: one section holding an export directory and an import directory."""
    sec_rva, sec_raw = 0x1000, 0x200
    body = bytearray(0x400)
    strings_at = 0x100
    names_rvas = []
    cur = strings_at
    for n in exports + imports:
        body[cur:cur + len(n) + 1] = n.encode() + b"\0"
        names_rvas.append(sec_rva + cur)
        cur += len(n) + 1
    name_table = 0x300
    for i, rva in enumerate(names_rvas[: len(exports)]):
        struct.pack_into("<I", body, name_table + 4 * i, rva)
    struct.pack_into("<I", body, 24, len(exports))  # export dir at offset 0: NumberOfNames
    struct.pack_into("<I", body, 32, sec_rva + name_table)  # AddressOfNames
    imp = 0x40
    for i, rva in enumerate(names_rvas[len(exports):]):
        struct.pack_into("<I", body, imp + 20 * i + 12, rva)
    hdr = bytearray(sec_raw)
    hdr[0:2] = b"MZ"
    struct.pack_into("<I", hdr, 0x3C, 0x40)
    hdr[0x40:0x44] = b"PE\0\0"
    struct.pack_into("<HH", hdr, 0x44, 0x8664, 1)
    struct.pack_into("<H", hdr, 0x54, 240)  # SizeOfOptionalHeader
    opt = 0x58
    struct.pack_into("<H", hdr, opt, 0x20B)
    dd = opt + 112
    struct.pack_into("<II", hdr, dd, sec_rva, 0x28)
    struct.pack_into("<II", hdr, dd + 8, sec_rva + imp, 20 * (len(imports) + 1))
    so = opt + 240
    hdr[so:so + 8] = b".rdata\0\0"
    struct.pack_into("<IIII", hdr, so + 8, len(body), sec_rva, len(body), sec_raw)
    return bytes(hdr) + bytes(body)


def test_pe_exports_and_imports():
    info = parse_pe(_minimal_pe(["kcuda_abi_version", "kcuda_init"], ["KERNEL32.dll", "cudart64_13.dll"]))
    assert info.format == "pe"
    assert info.exports() == ["kcuda_abi_version", "kcuda_init"]
    assert info.needed == ["KERNEL32.dll", "cudart64_13.dll"]


# ---- check_file against planned binary facts (every message exact) ----------------------------

def _sym(name: str, defined: bool = True, binding: str = "GLOBAL", vis: str = "DEFAULT") -> Symbol:
    return Symbol(name, defined, binding, "FUNC", vis)


PLANNED = BinaryInfo("elf", needed=["libm.so.6", "libcudart.so.13", "libc.so.6"], symbols=[
    _sym("kcuda_a"), _sym("kcuda_b"), _sym("_init"), _sym("zeta_x"), _sym("kcuda_w", binding="WEAK", vis="PROTECTED"),
    _sym("hidden_h", vis="HIDDEN"), _sym("local_l", binding="LOCAL"), _sym(""), _sym("", defined=False),
    *[_sym(n, defined=False) for n in ("cudaSync", "cudaMalloc", "cudaFree", "cudaStream", "cudaMemcpy",
                                       "cudaLaunch", "printf")]])
PLANNED_FACTS = ["elf; needed: libm.so.6, libcudart.so.13, libc.so.6", "4 exports"]
CUDA5 = "cudaFree, cudaLaunch, cudaMalloc, cudaMemcpy, cudaStream"


@pytest.fixture
def planned(tmp_path, monkeypatch):
    """A file whose binary facts are PLANNED (read_binary planted), with two lines of text."""
    p = tmp_path / "libplanned.so"
    p.write_text("engine v1\nsecret key\n")
    monkeypatch.setattr(runner, "read_binary", lambda path: PLANNED if Path(path) == p else read_binary(path))
    return p


def test_check_file_planned_all_hold(planned):
    fc = C.FileCheck(path="x", needed_match=["^libc\\.", "^libm\\."], needed_not_match=["^libvulkan"],
                     symbols_not_match=["^secret"], undefined_not_match=["^nccl"],
                     exports_exactly=["kcuda_a", "kcuda_b", "kcuda_w", "zeta_x"], exports_match="^(kcuda_|zeta_)",
                     text_match=["^engine"], text_not_match=["^public"])
    assert check_file(fc, planned, ["_init"]) == ([], PLANNED_FACTS)


def test_check_file_planned_every_problem(planned):
    fc = C.FileCheck(path="x", needed_match=["^libvulkan", "^libc\\."], needed_not_match=["^lib(m|c)\\.", "^libcuda"],
                     symbols_not_match=["^cuda", "^(hidden|local)_"], undefined_not_match=["^cuda", "^print", "^x"],
                     exports_exactly=["kcuda_a", "kcuda_gone"], exports_match="^kcuda_",
                     text_match=["^engine v2"], text_not_match=["^secret"])
    assert check_file(fc, planned, ["_init"]) == ([
        "no dependency matches /^libvulkan/",
        "depends on libm.so.6, libc.so.6 (must not match /^lib(m|c)\\./)",
        "depends on libcudart.so.13 (must not match /^libcuda/)",
        f"dynamic symbol(s) {CUDA5} match /^cuda/",
        "dynamic symbol(s) hidden_h, local_l match /^(hidden|local)_/",
        f"undefined symbol(s) {CUDA5} match /^cuda/",
        "undefined symbol(s) printf match /^print/",
        "unexpected exports: kcuda_b, kcuda_w, zeta_x",
        "missing exports: kcuda_gone",
        "exports not matching /^kcuda_/: zeta_x",
        "text lacks /^engine v2/",
        "text has /^secret/: 'secret'",
    ], PLANNED_FACTS)
    # _init is an export unless ignored; no exports expected at all is a check too
    assert check_file(C.FileCheck(path="x", exports_exactly=[]), planned, []) == (
        ["unexpected exports: _init, kcuda_a, kcuda_b, kcuda_w, zeta_x"],
        [PLANNED_FACTS[0], "5 exports"])


@pytest.mark.parametrize("field, value", [
    ("needed_match", ["^libm"]), ("needed_not_match", ["^nothing"]), ("symbols_not_match", ["^nothing"]),
    ("undefined_not_match", ["^nothing"]), ("exports_exactly", ["kcuda_a", "kcuda_b", "kcuda_w", "zeta_x"]),
    ("exports_match", "^(kcuda|zeta)_")])
def test_check_file_any_binary_check_reads_the_binary(planned, field, value):
    assert check_file(C.FileCheck(path="x", **{field: value}), planned, ["_init"]) == ([], PLANNED_FACTS)
    # without a binary check, the binary is not read at all
    assert check_file(C.FileCheck(path="x", text_match=["^engine"]), planned, ["_init"]) == ([], [])


def test_check_file_lists_at_most_ten_names(tmp_path, monkeypatch):
    p = tmp_path / "many.so"
    p.write_bytes(b"x")
    names = [f"e{i:02d}" for i in range(12)]
    info = BinaryInfo("pe", needed=[], symbols=[_sym(n) for n in names] + [_sym(f"u{i}", defined=False)
                                                                            for i in range(7)])
    monkeypatch.setattr(runner, "read_binary", lambda path: info)
    fc = C.FileCheck(path="x", exports_exactly=[], exports_match="^nothing$", undefined_not_match=["^u"])
    assert check_file(fc, p, []) == ([
        "undefined symbol(s) u0, u1, u2, u3, u4 match /^u/",
        f"unexpected exports: {', '.join(names[:10])}",
        f"exports not matching /^nothing$/: {', '.join(names[:10])}",
    ], ["pe; needed: -", "12 exports"])


@pytest.mark.parametrize("error", [BinaryFormatError("neither ELF nor PE"), OSError("planted read error")])
def test_check_file_unreadable_binary(tmp_path, monkeypatch, error):
    p = tmp_path / "lib.so"
    p.write_bytes(b"x")

    def fail(path):
        raise error
    monkeypatch.setattr(runner, "read_binary", fail)
    assert check_file(C.FileCheck(path="x", needed_match=["x"]), p, []) == (
        [f"lib.so: cannot read as a binary: {error}"], [])


def test_check_file_presence(tmp_path):
    p = tmp_path / "f"
    assert check_file(C.FileCheck(path="x"), p, []) == ([f"{p} does not exist"], ["absent"])
    assert check_file(C.FileCheck(path="x", exists=False), p, []) == ([], ["absent"])
    p.write_text("x")
    assert check_file(C.FileCheck(path="x", exists=False), p, []) == ([f"{p} exists but must not"], ["present"])
    assert check_file(C.FileCheck(path="x"), p, []) == ([], [])
