"""What every mutator shares: the Mutant record, byte flips, and edits of an ELF's structure (the
parts a loader can check before it hands the bytes to the dynamic linker)."""
from __future__ import annotations

import dataclasses
import struct


@dataclasses.dataclass
class Mutant:
    family: str
    description: str
    data: bytes


def flip(rng, data: bytes, lo: int, hi: int, count: int | None = None) -> tuple[bytes, str]:
    """1 to 4 byte edits at random offsets in [lo, hi): a bit flip, 0x00, 0xff or a random byte."""
    b = bytearray(data)
    hi = max(min(hi, len(b)), lo + 1)
    notes = []
    for _ in range(count or rng.choice((1, 1, 1, 2, 3, 4))):
        off = rng.randrange(lo, hi)
        kind = rng.random()
        old = b[off]
        if kind < 0.55:
            bit = rng.randrange(8)
            b[off] ^= 1 << bit
        elif kind < 0.7:
            b[off] = 0
        elif kind < 0.85:
            b[off] = 0xFF
        else:
            b[off] = rng.randrange(256)
        notes.append(f"0x{off:x}:{old:02x}->{b[off]:02x}")
    return bytes(b), "byte " + ", ".join(notes)


def flip_in(rng, data: bytes, start: int, end: int, what: str) -> tuple[str, bytes]:
    """(description, bytes): flips inside [start, end) of the file, described relative to `what`."""
    new, desc = flip(rng, data, start, end)
    return f"{what} (at 0x{start:x}, {end - start} bytes): {desc}", new


# ---- ELF64 little-endian structure -------------------------------------------------------------
_EHDR = {   # field: (offset, struct code)
    "e_ident[EI_CLASS]": (4, "B"), "e_ident[EI_DATA]": (5, "B"), "e_ident[EI_OSABI]": (7, "B"),
    "e_type": (16, "H"), "e_machine": (18, "H"), "e_entry": (24, "Q"), "e_phoff": (32, "Q"), "e_shoff": (40, "Q"),
    "e_ehsize": (52, "H"), "e_phentsize": (54, "H"), "e_phnum": (56, "H"), "e_shentsize": (58, "H"),
    "e_shnum": (60, "H"), "e_shstrndx": (62, "H"),
}
_PHDR = {"p_type": (0, "I"), "p_flags": (4, "I"), "p_offset": (8, "Q"), "p_vaddr": (16, "Q"), "p_filesz": (32, "Q"),
         "p_memsz": (40, "Q"), "p_align": (48, "Q")}
_PT = {1: "PT_LOAD", 2: "PT_DYNAMIC", 3: "PT_INTERP", 4: "PT_NOTE", 6: "PT_PHDR", 7: "PT_TLS",
       0x6474E550: "PT_GNU_EH_FRAME", 0x6474E551: "PT_GNU_STACK", 0x6474E552: "PT_GNU_RELRO"}
_DT = {1: "DT_NEEDED", 4: "DT_HASH", 5: "DT_STRTAB", 6: "DT_SYMTAB", 7: "DT_RELA", 8: "DT_RELASZ", 10: "DT_STRSZ",
       11: "DT_SYMENT", 12: "DT_INIT", 13: "DT_FINI", 14: "DT_SONAME", 23: "DT_JMPREL", 25: "DT_INIT_ARRAY",
       27: "DT_INIT_ARRAYSZ", 0x6FFFFEF5: "DT_GNU_HASH", 0x6FFFFFF0: "DT_VERSYM"}
_ODD_VALUES = (0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 40, (1 << 63) - 1, (1 << 64) - 1)


def _put(b: bytearray, off: int, code: str, value: int) -> None:
    size = struct.calcsize("<" + code)
    struct.pack_into("<" + code, b, off, value & ((1 << (8 * size)) - 1))


def phdrs(elf: bytes) -> list[tuple[int, int, int, int]]:
    """(offset of the header, p_type, p_offset, p_filesz) of each program header."""
    phoff, = struct.unpack_from("<Q", elf, 32)
    phentsize, phnum = struct.unpack_from("<HH", elf, 54)
    out = []
    for i in range(phnum):
        at = phoff + i * phentsize
        p_type, = struct.unpack_from("<I", elf, at)
        p_offset, = struct.unpack_from("<Q", elf, at + 8)
        p_filesz, = struct.unpack_from("<Q", elf, at + 32)
        out.append((at, p_type, p_offset, p_filesz))
    return out


def elf_structure_edit(rng, elf: bytes) -> tuple[bytes, str]:
    """One field of the ELF header, of a program header or of the dynamic section set to an odd
    value (the parts of the file a loader can validate before dlopen)."""
    b = bytearray(elf)
    where = rng.random()
    if where < 0.35:
        name = rng.choice(sorted(_EHDR))
        off, code = _EHDR[name]
        old = struct.unpack_from("<" + code, b, off)[0]
        value = rng.choice(_ODD_VALUES + (old + 1, old - 1, 2, 3, 183, len(elf), len(elf) - 8))
        _put(b, off, code, value)
        return bytes(b), f"ELF header {name} {old:#x} -> {value & ((1 << 64) - 1):#x}"
    headers = phdrs(elf)
    dyn = [h for h in headers if h[1] == 2]
    if where < 0.75 or not dyn:
        at, p_type, _, _ = rng.choice(headers)
        name = rng.choice(sorted(_PHDR))
        off, code = _PHDR[name]
        old = struct.unpack_from("<" + code, b, at + off)[0]
        value = rng.choice(_ODD_VALUES + (old + 1, old + 0x1000, old * 2, len(elf) + 1, 3))
        _put(b, at + off, code, value)
        return bytes(b), (f"program header {_PT.get(p_type, hex(p_type))} {name} {old:#x} -> "
                          f"{value & ((1 << 64) - 1):#x}")
    _, _, d_off, d_size = dyn[0]
    entries = [(d_off + 16 * i,) + struct.unpack_from("<qQ", elf, d_off + 16 * i) for i in range(d_size // 16)]
    entries = [e for e in entries if e[1] in _DT] or entries
    at, tag, old = rng.choice(entries)
    values = (0, 1, 0xDEAD0000, 1 << 40, (1 << 64) - 1, old + 0x100000, old + 7)
    if tag in (12, 13):   # DT_INIT, DT_FINI: moved a few bytes, the function still lies in the code, so the
        values = values[:-1]   # edit is one of code only a signature can refuse (case om2-610 of seed 2)
    value = rng.choice(values)
    _put(b, at + 8, "Q", value)
    return bytes(b), f"dynamic entry {_DT.get(tag, hex(tag))} {old:#x} -> {value:#x}"


def elf_truncate(rng, elf: bytes) -> tuple[bytes, str]:
    """The ELF cut short: inside the header, the program headers, a segment, or near the end."""
    cuts = [0, 16, 63, 64, 64 + 56, len(elf) // 2, len(elf) - 1, len(elf) - rng.randrange(1, 4096)]
    cuts += [p_off + rng.randrange(max(p_size, 1)) for _, _, p_off, p_size in phdrs(elf)]
    size = max(0, min(len(elf) - 1, rng.choice(cuts)))
    return elf[:size], f"ELF truncated to {size} of {len(elf)} bytes"
