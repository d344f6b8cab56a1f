"""Which CUDA code a module carries: the SASS (ELF) and PTX architectures of the fat binaries
embedded in a shared object or DLL, read by `cuobjdump --list-elf/--list-ptx` or directly."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from pathlib import Path

from harness.errors import HarnessError
from harness.process import run_process

FATBIN_MAGIC = 0xBA55ED50


def _by_arch(names: set[str]) -> list[str]:
    return sorted(names, key=lambda s: int(re.sub(r"\D", "", s) or 0))


def parse_cuobjdump_list(text: str) -> list[str]:
    """`ELF file    1: kite_cuda.1.sm_90.cubin` / `PTX file    1: x.1.sm_90.ptx` -> sorted sm_XX set."""
    return _by_arch(set(re.findall(r"^(?:ELF|PTX) file\s+\d+:\s+\S*?\b(sm_\d+[a-z]?)\.(?:cubin|ptx)\s*$", text, re.M)))


def _code_objects(data: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """(offset, kind, arch, header size, payload size) of every code object of every CUDA fat
    binary in `data`: the container header (magic 0xBA55ED50, version 1, header size 16, payload
    size) followed by entries {kind u16 (1 PTX, 2 ELF), version u16, header size u32, payload size
    u64, ..., arch u32 at offset 28, flags u64 at offset 40}. A damaged entry ends its container."""
    magic = struct.pack("<I", FATBIN_MAGIC)
    i = data.find(magic)
    while i >= 0:
        try:
            _, ver, hsize, fsize = struct.unpack_from("<IHHQ", data, i)
        except struct.error:
            break
        if ver == 1 and hsize == 16 and 0 < fsize <= len(data) - i - 16:
            p, end = i + hsize, i + hsize + fsize
            while p + 48 <= end:
                kind, _, ehs, size = struct.unpack_from("<HHIQ", data, p)
                arch, = struct.unpack_from("<I", data, p + 28)
                if ehs < 48 or kind not in (1, 2) or p + ehs + size > end:
                    break
                yield p, kind, arch, ehs, size
                p += ehs + size
        i = data.find(magic, i + 4)


def scan_fatbin(data: bytes) -> dict[str, list[str]]:
    """SASS (ELF) and PTX architectures of every CUDA fat binary in `data` (_code_objects): the
    same sets as `cuobjdump --list-elf / --list-ptx`."""
    found: dict[str, set[str]] = {"elf": set(), "ptx": set()}
    for _, kind, arch, _, _ in _code_objects(data):
        found["ptx" if kind == 1 else "elf"].add(f"sm_{arch}")
    return {k: _by_arch(v) for k, v in found.items()}


def embedded_code(cuobjdump: str, module: Path, logs: Path | None = None) -> dict[str, list[str]]:
    """The code lists as cuobjdump prints them; HarnessError when cuobjdump fails."""
    out = {}
    for kind in ("elf", "ptx"):
        r = run_process([cuobjdump, f"--list-{kind}", str(module)], timeout=120,
                        log_prefix=(logs / f"cuobjdump-{kind}") if logs else None)
        text = r.stdout + r.stderr
        if not r.ok and "does not contain" not in text:
            raise HarnessError(f"cuobjdump --list-{kind} failed: {r.describe()}")
        out[kind] = parse_cuobjdump_list(r.stdout)
    return out


FATBIN_COMPRESSED = 0x2000  # entry flag: the payload is compressed (nvcc -compress)


def fatbin_entries(data: bytes) -> list[dict[str, object]]:
    """Every code object of every fat binary in `data` (_code_objects): {kind: elf|ptx, arch:
    sm_XX, compressed, payload: bytes}."""
    out: list[dict[str, object]] = []
    for p, kind, arch, ehs, size in _code_objects(data):
        flags, = struct.unpack_from("<Q", data, p + 40)
        out.append({"kind": "ptx" if kind == 1 else "elf", "arch": f"sm_{arch}",
                    "compressed": bool(flags & FATBIN_COMPRESSED), "payload": data[p + ehs:p + ehs + size]})
    return out
