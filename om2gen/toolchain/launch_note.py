"""The launch note of a kernel binary: every launch the model's tasks make of it, so that loading
can refuse a task whose tiling, block_dim or addresses the kernel was not built for.

Kernels are shape-generic within their specialisation: loop bounds come from the tiling bytes, so
a task table whose tiling was edited (with every digest recomputed) would run a kernel out of
bounds or forever. The lowering knows every task that uses a kernel; this module writes what it
knows into the binary, after the compiler (the compile cache stays keyed by the source alone), as
an ELF note in a section of its own. The model's load code reads it back
(runtime_abi/include/om2/om2_launch_note.h) and checks every task against it before capture.
The layout is docs/archive-format.md §8 (The launch note); bump LAYOUT when it changes.

The note is not a signature: whoever can rewrite a kernel binary can rewrite its note too.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import AbiError

SECTION = ".note.om2.launches"
NOTE_NAME = b"OM2\0"
NOTE_TYPE = 1               # OM2_LAUNCH_NOTE_TYPE
LAYOUT = 1                  # OM2_LAUNCH_NOTE_LAYOUT
WRITTEN = 1                 # slot flag: the kernel writes through this slot

_SHT_NOTE = 7
_HEAD = struct.Struct("<4I")       # layout, slot_num, launch_num, entry_size


@dataclass(frozen=True, order=True)
class Launch:
    block_dim: int
    tiling: bytes
    slot_bytes: tuple[int, ...]     # bytes the kernel may touch from each slot's address


@dataclass(frozen=True)
class LaunchNote:
    entry: str
    slot_flags: tuple[int, ...]     # per address slot: WRITTEN or 0
    launches: tuple[Launch, ...]    # sorted, distinct


def _pad8(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


def encode_desc(note: LaunchNote) -> bytes:
    entry = _pad8(note.entry.encode() + b"\0")
    out = [_HEAD.pack(LAYOUT, len(note.slot_flags), len(note.launches), len(entry)),
           struct.pack(f"<{len(note.slot_flags)}Q", *note.slot_flags)]
    for launch in note.launches:
        assert len(launch.slot_bytes) == len(note.slot_flags) and len(launch.tiling) % 8 == 0, launch
        out.append(struct.pack(f"<2Q{len(launch.slot_bytes)}Q", launch.block_dim, len(launch.tiling), *launch.slot_bytes))
        out.append(launch.tiling)
    out.append(entry)
    return b"".join(out)


def decode_desc(desc: bytes) -> LaunchNote:
    """The inverse of encode_desc; AbiError when `desc` is not a layout-1 launch note."""
    try:
        layout, slot_num, launch_num, entry_size = _HEAD.unpack_from(desc, 0)
        if layout != LAYOUT:
            raise AbiError(f"launch note layout {layout}, this om2gen reads layout {LAYOUT}")
        at = _HEAD.size
        flags = struct.unpack_from(f"<{slot_num}Q", desc, at)
        at += 8 * slot_num
        launches = []
        for _ in range(launch_num):
            block_dim, tiling_size, *slot_bytes = struct.unpack_from(f"<{2 + slot_num}Q", desc, at)
            at += 8 * (2 + slot_num)
            if tiling_size % 8 or at + tiling_size > len(desc):
                raise AbiError(f"a launch of {tiling_size} tiling bytes does not fit the note")
            launches.append(Launch(block_dim, bytes(desc[at:at + tiling_size]), tuple(slot_bytes)))
            at += tiling_size
        entry = bytes(desc[at:at + entry_size]).split(b"\0", 1)[0].decode()
        if at + entry_size != len(desc):
            raise AbiError("the launch note's entry name does not end it")
    except struct.error as exc:
        raise AbiError(f"truncated launch note ({exc})") from None
    return LaunchNote(entry, tuple(flags), tuple(launches))


def of_program(program) -> dict[int, LaunchNote]:
    """{kernel index: its note}, from the tasks that launch each kernel."""
    flags: dict[int, tuple[int, ...]] = {}
    launches: dict[int, set[Launch]] = {}
    for t in program.tasks + program.load_tasks:
        if t.kernel < 0:
            continue
        f = tuple(WRITTEN if role in ("o", "ws") else 0 for role in t.roles)
        assert flags.setdefault(t.kernel, f) == f, f"tasks of kernel {t.kernel} disagree on their slots' roles"
        launches.setdefault(t.kernel, set()).add(Launch(t.block_dim, t.tiling, tuple(t.slot_bytes)))
    return {k: LaunchNote(program.kernels[k].entry, flags[k], tuple(sorted(launches[k]))) for k in flags}


def attach(elf: bytes, note: "LaunchNote | list[LaunchNote]") -> bytes:
    """`elf` (a little-endian ELF64 shared object) with the note (or one note per entry of a
    binary with several) in a new SECTION (not loaded: no segment holds it). The section header
    table moves to the end, with the string table of section names that names the new section;
    deterministic, so the same inputs give the same bytes."""
    blob = b""
    for one in ([note] if isinstance(note, LaunchNote) else note):
        desc = encode_desc(one)
        blob += struct.pack("<3I", len(NOTE_NAME), len(desc), NOTE_TYPE) + NOTE_NAME + desc
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<3H", elf, 0x3A)
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1 or shentsize != 64 or not 0 < shstrndx < shnum:
        raise AbiError("the launch note goes into little-endian ELF64 binaries with section headers")
    headers = [bytearray(elf[shoff + 64 * i:shoff + 64 * (i + 1)]) for i in range(shnum)]
    str_off, str_size = struct.unpack_from("<2Q", headers[shstrndx], 0x18)
    names = bytes(elf[str_off:str_off + str_size])
    if (SECTION.encode() + b"\0") in names:
        raise AbiError(f"the binary already has a {SECTION} section")
    # the old table is dropped when it ends the file (as linkers write it), else left unreferenced
    out = bytearray(elf[:shoff] if shoff + 64 * shnum == len(elf) else elf)
    out += b"\0" * (-len(out) % 8)
    note_off = len(out)
    out += blob
    names_off = len(out)
    out += names + SECTION.encode() + b"\0"
    struct.pack_into("<2Q", headers[shstrndx], 0x18, names_off, len(out) - names_off)
    out += b"\0" * (-len(out) % 8)
    new_shoff = len(out)
    for h in headers:
        out += h
    out += struct.pack("<2I4Q2I2Q", len(names), _SHT_NOTE, 0, 0, note_off, len(blob), 0, 0, 8, 0)
    struct.pack_into("<Q", out, 0x28, new_shoff)
    struct.pack_into("<H", out, 0x3C, shnum + 1)
    return bytes(out)


def read(elf: bytes) -> list[LaunchNote]:
    """The launch notes of a binary (one per entry that declares its launches)."""
    import io

    from elftools.elf.elffile import ELFFile
    notes = []
    section = ELFFile(io.BytesIO(elf)).get_section_by_name(SECTION)
    if section is None:
        return notes
    data, at = section.data(), 0
    while at + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from("<3I", data, at)
        name_end = at + 12 + namesz + (-namesz % 4)
        if data[at + 12:at + 12 + namesz] == NOTE_NAME and kind == NOTE_TYPE:
            notes.append(decode_desc(data[name_end:name_end + descsz]))
        at = name_end + descsz + (-descsz % 4)
    return notes
