"""Facts about built binaries, in pure Python: ELF (.dynamic DT_NEEDED, .dynsym) and PE
(import DLL names, export names). No readelf/nm needed."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Symbol:
    name: str
    defined: bool
    binding: str  # LOCAL, GLOBAL, WEAK, ...
    type: str  # FUNC, OBJECT, NOTYPE, ...
    visibility: str  # DEFAULT, HIDDEN, PROTECTED, INTERNAL


@dataclass
class BinaryInfo:
    format: str  # elf | pe
    needed: list[str] = field(default_factory=list)
    symbols: list[Symbol] = field(default_factory=list)

    def exports(self, ignore: list[str] | tuple[str, ...] = ()) -> list[str]:
        return sorted({s.name for s in self.symbols
                       if s.defined and s.binding in ("GLOBAL", "WEAK") and s.visibility in ("DEFAULT", "PROTECTED")
                       and s.name and s.name not in ignore})

    def undefined(self) -> list[str]:
        return sorted({s.name for s in self.symbols if not s.defined and s.name})


class BinaryFormatError(Exception):
    pass


_BIND = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "GNU_UNIQUE"}
_TYPE = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS", 10: "IFUNC"}
_VIS = {0: "DEFAULT", 1: "INTERNAL", 2: "HIDDEN", 3: "PROTECTED"}


def read_binary(path: Path) -> BinaryInfo:
    data = Path(path).read_bytes()
    if data[:4] == b"\x7fELF":
        return parse_elf(data)
    if data[:2] == b"MZ":
        return parse_pe(data)
    raise BinaryFormatError("neither ELF nor PE")


def _cstr(data: bytes, off: int) -> str:
    end = data.find(b"\0", off)
    return data[off:end if end >= 0 else len(data)].decode("utf-8", "replace")


def parse_elf(data: bytes) -> BinaryInfo:
    try:
        return _parse_elf(data)
    except (struct.error, IndexError) as e:
        raise BinaryFormatError(f"malformed ELF: {e}") from None


def _parse_elf(data: bytes) -> BinaryInfo:
    is64 = data[4] == 2
    en = "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(en + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(en + "HH", data, 0x3A)
    else:
        shoff, = struct.unpack_from(en + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(en + "HH", data, 0x2E)
    secs = []
    for i in range(shnum):
        o = shoff + i * shentsize
        if is64:
            _, stype, _, _, off, size, link, _, _, entsize = struct.unpack_from(en + "IIQQQQIIQQ", data, o)
        else:
            _, stype, _, _, off, size, link, _, _, entsize = struct.unpack_from(en + "IIIIIIIIII", data, o)
        secs.append((stype, off, size, link, entsize))
    info = BinaryInfo("elf")
    for stype, off, size, link, entsize in secs:
        if stype == 6:  # SHT_DYNAMIC
            stroff = secs[link][1]
            esz = entsize or (16 if is64 else 8)
            fmt = en + ("qQ" if is64 else "iI")
            for k in range(size // esz):
                tag, val = struct.unpack_from(fmt, data, off + k * esz)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    info.needed.append(_cstr(data, stroff + val))
        elif stype == 11:  # SHT_DYNSYM
            stroff = secs[link][1]
            esz = entsize or (24 if is64 else 16)
            for k in range(1, size // esz):
                o = off + k * esz
                if is64:
                    name, st_info, st_other, shndx = struct.unpack_from(en + "IBBH", data, o)
                else:
                    name, _, _, st_info, st_other, shndx = struct.unpack_from(en + "IIIBBH", data, o)
                info.symbols.append(Symbol(_cstr(data, stroff + name), shndx != 0,
                                           _BIND.get(st_info >> 4, str(st_info >> 4)),
                                           _TYPE.get(st_info & 15, str(st_info & 15)), _VIS[st_other & 3]))
    return info


def parse_pe(data: bytes) -> BinaryInfo:
    try:
        return _parse_pe(data)
    except (struct.error, IndexError) as e:
        raise BinaryFormatError(f"malformed PE: {e}") from None


def _parse_pe(data: bytes) -> BinaryInfo:
    pe, = struct.unpack_from("<I", data, 0x3C)
    if data[pe:pe + 4] != b"PE\0\0":
        raise BinaryFormatError("no PE signature")
    nsec, = struct.unpack_from("<H", data, pe + 6)
    optsize, = struct.unpack_from("<H", data, pe + 20)
    opt = pe + 24
    magic, = struct.unpack_from("<H", data, opt)
    dd = opt + (112 if magic == 0x20B else 96)
    exp_rva, _ = struct.unpack_from("<II", data, dd)
    imp_rva, _ = struct.unpack_from("<II", data, dd + 8)
    sections = []
    so = opt + optsize
    for i in range(nsec):
        vsize, va, rawsize, rawptr = struct.unpack_from("<IIII", data, so + i * 40 + 8)
        sections.append((va, max(vsize, rawsize), rawptr))

    def off(rva: int) -> int:
        for va, size, raw in sections:
            if va <= rva < va + size:
                return raw + rva - va
        raise BinaryFormatError(f"RVA {rva:#x} outside every section")

    info = BinaryInfo("pe")
    if exp_rva:
        e = off(exp_rva)
        nnames, = struct.unpack_from("<I", data, e + 24)
        names_rva, = struct.unpack_from("<I", data, e + 32)
        for i in range(nnames):
            nrva, = struct.unpack_from("<I", data, off(names_rva) + 4 * i)
            info.symbols.append(Symbol(_cstr(data, off(nrva)), True, "GLOBAL", "FUNC", "DEFAULT"))
    if imp_rva:
        d = off(imp_rva)
        while True:
            name_rva, = struct.unpack_from("<I", data, d + 12)
            if name_rva == 0:
                break
            info.needed.append(_cstr(data, off(name_rva)))
            d += 20
    return info
