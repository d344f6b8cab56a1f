"""ELF/PE facts in pure Python, and artifact criteria built on them."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from harness.contract import criteria as C
from harness.builder.binfmt import parse_pe, read_binary
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
