"""Are two builds the same? SHA-256 of the engine, of the module, and of each kernel's code in the
module (every `.text.<kernel>` section of each cubin in its fat binaries; a compressed cubin is
hashed whole). Equal everywhere: an identical build, nothing to run. Otherwise: what changed."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from pathlib import Path

from harness.builder.fatbin import fatbin_entries
from harness.contract import inputs

MAX_BINARY = 2 << 30  # 2 GiB: far above any engine or module


@dataclass
class BuildFacts:
    engine: str | None  # sha256, None when absent
    module: str | None
    kernels: dict[str, str] = field(default_factory=dict)  # "sm_90 kernel_name" -> sha256 of its code

    def to_json(self) -> dict[str, object]:
        return {"engine": self.engine, "module": self.module, "kernels": len(self.kernels)}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes | None:
    try:
        return inputs.read_bytes(path, MAX_BINARY, str(path))
    except FileNotFoundError:
        return None


def elf_text_sections(elf: bytes) -> dict[str, bytes]:
    """`.text.<name>` sections of a little-endian ELF64 file (a cubin): name -> bytes. {} when it
    is not one."""
    if elf[:4] != b"\x7fELF" or len(elf) < 64 or elf[4] != 2 or elf[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(elf) or shstrndx >= shnum:
        return {}

    def section(i: int) -> tuple[int, int, int, int]:
        name, kind, _, _, off, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
        return name, kind, off, size

    _, _, str_off, str_size = section(shstrndx)
    out = {}
    for i in range(shnum):
        name_at, kind, off, size = section(i)
        if name_at >= str_size or kind == 8:  # SHT_NOBITS holds no bytes
            continue
        end = elf.find(b"\0", str_off + name_at, str_off + str_size)
        name = elf[str_off + name_at:end if end >= 0 else str_off + str_size].decode("latin-1")
        if name.startswith(".text.") and off + size <= len(elf):
            out[name[len(".text."):]] = elf[off:off + size]
    return out


def kernels(module: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, e in enumerate(fatbin_entries(module)):
        payload = e["payload"]
        assert isinstance(payload, bytes)
        if e["kind"] == "elf" and not e["compressed"]:
            texts = elf_text_sections(payload)
            for name, code in texts.items():
                out[f"{e['arch']} {name}"] = _sha(code)
            if texts:
                continue
        out[f"{e['arch']} {e['kind']}#{n}" + (" (compressed)" if e["compressed"] else "")] = _sha(payload)
    return out


def facts(engine: Path, module: Path | None) -> BuildFacts:
    e = _read(engine)
    m = _read(module) if module is not None else None
    return BuildFacts(_sha(e) if e is not None else None, _sha(m) if m is not None else None,
                      kernels(m) if m is not None else {})


def changes(base: BuildFacts, head: BuildFacts) -> list[str]:
    """What differs, one line each; [] for identical builds."""
    out = []
    for part in ("engine", "module"):
        a, b = getattr(base, part), getattr(head, part)
        if a != b:
            if a is None or b is None:
                out.append(f"{part}: {'added' if a is None else 'removed'}")
            else:
                out.append(f"{part}: {a[:12]} -> {b[:12]}")
    for k in sorted(set(base.kernels) | set(head.kernels)):
        a, b = base.kernels.get(k), head.kernels.get(k)
        if a != b:
            out.append(f"kernel {k}: " + ("added" if a is None else "removed" if b is None else "code changed"))
    return out
