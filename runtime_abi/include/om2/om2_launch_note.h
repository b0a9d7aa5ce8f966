/*
 * om2_launch_note.h -- reads the launch note of a kernel binary: the launches (block_dim, tiling
 * bytes, bytes touched per address slot) the model was compiled to make of each entry.
 *
 * om2gen attaches the note after compiling a kernel (om2gen/toolchain/launch_note.py), as an ELF
 * note (name "OM2", type OM2_LAUNCH_NOTE_TYPE) in a section no segment loads. The model's load
 * code looks it up in the bytes it hands to aclrtBinaryLoadFromData, so it reads the same thing
 * whichever loader maps the kernel (the light loader or dlopen), and refuses every task the kernel
 * does not declare before anything is captured. Layout of the note's descriptor (little-endian,
 * docs/archive-format.md §8, The launch note):
 *
 *   u32 layout (OM2_LAUNCH_NOTE_LAYOUT), u32 slot_num, u32 launch_num, u32 entry_size
 *   u64 slot_flags[slot_num]                        OM2_SLOT_WRITTEN: the kernel writes there
 *   launch_num times: u64 block_dim, u64 tiling_size, u64 slot_bytes[slot_num],
 *                     u8 tiling[tiling_size]        (tiling_size a multiple of 8)
 *   char entry[entry_size]                          NUL-terminated, zero-padded to 8
 *
 * Header-only and bounds-checked: the bytes may be anything until the note is found well formed.
 */
#ifndef OM2_OM2_LAUNCH_NOTE_H
#define OM2_OM2_LAUNCH_NOTE_H

#include <cstdint>
#include <cstring>

namespace om2 {

constexpr uint32_t OM2_LAUNCH_NOTE_TYPE = 1;
constexpr uint32_t OM2_LAUNCH_NOTE_LAYOUT = 1;
constexpr uint64_t OM2_SLOT_WRITTEN = 1;

/* A well-formed note of one entry; pointers into the binary's bytes. */
struct Om2LaunchNote {
    uint32_t slot_num = 0;
    uint32_t launch_num = 0;
    const uint8_t *slot_flags = nullptr;  /* u64[slot_num] */
    const uint8_t *launches = nullptr;    /* the launch records, back to back */
    uint64_t launches_size = 0;
};

/* One launch record of a note. */
struct Om2Launch {
    uint64_t block_dim;
    uint64_t tiling_size;
    const uint8_t *slot_bytes;  /* u64[slot_num] */
    const uint8_t *tiling;
};

namespace launch_note_detail {

inline uint64_t U64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline uint32_t U32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline bool Fits(uint64_t offset, uint64_t size, uint64_t limit) { return offset <= limit && size <= limit - offset; }

/* Checks one descriptor; on success *out describes it and *entry is its entry name. */
inline bool ParseDesc(const uint8_t *d, uint64_t size, Om2LaunchNote *out, const char **entry) {
    if (size < 16 || U32(d) != OM2_LAUNCH_NOTE_LAYOUT) return false;
    const uint64_t slots = U32(d + 4), launches = U32(d + 8), entry_size = U32(d + 12);
    uint64_t at = 16;
    if (!Fits(at, 8 * slots, size)) return false;
    const uint64_t records = at + 8 * slots;
    at = records;
    for (uint64_t i = 0; i < launches; ++i) {
        if (!Fits(at, 8 * (2 + slots), size)) return false;
        const uint64_t tiling = U64(d + at + 8);
        at += 8 * (2 + slots);
        if (tiling % 8 != 0 || !Fits(at, tiling, size)) return false;
        at += tiling;
    }
    if (entry_size == 0 || at + entry_size != size || d[size - 1] != '\0') return false;
    out->slot_num = static_cast<uint32_t>(slots);
    out->launch_num = static_cast<uint32_t>(launches);
    out->slot_flags = d + 16;
    out->launches = d + records;
    out->launches_size = at - records;
    *entry = reinterpret_cast<const char *>(d + at);
    return true;
}

}  // namespace launch_note_detail

/* The note `entry` declares in the ELF64 binary `data`. False when there is none (or none well
 * formed): a kernel om2gen did not build, built before launch notes, or modified. */
inline bool FindLaunchNote(const void *data, uint64_t length, const char *entry, Om2LaunchNote *out) {
    using namespace launch_note_detail;
    const uint8_t *elf = static_cast<const uint8_t *>(data);
    if (data == nullptr || length < 64 || std::memcmp(elf, "\177ELF", 4) != 0 || elf[4] != 2 || elf[5] != 1) return false;
    const uint64_t shoff = U64(elf + 0x28);
    uint16_t shentsize, shnum;
    std::memcpy(&shentsize, elf + 0x3A, 2);
    std::memcpy(&shnum, elf + 0x3C, 2);
    if (shentsize != 64 || !Fits(shoff, 64ull * shnum, length)) return false;
    for (uint16_t s = 0; s < shnum; ++s) {
        const uint8_t *sh = elf + shoff + 64ull * s;
        if (U32(sh + 4) != 7 /* SHT_NOTE */) continue;
        const uint64_t off = U64(sh + 0x18), size = U64(sh + 0x20);
        if (!Fits(off, size, length)) continue;
        uint64_t at = 0;
        while (at + 12 <= size) {
            const uint8_t *n = elf + off + at;
            const uint64_t namesz = U32(n), descsz = U32(n + 4), type = U32(n + 8);
            const uint64_t name_at = 12 + (namesz + 3) / 4 * 4;
            if (!Fits(at + name_at, descsz, size)) break;
            const char *name = nullptr;
            if (type == OM2_LAUNCH_NOTE_TYPE && namesz == 4 && std::memcmp(n + 12, "OM2", 4) == 0 &&
                ParseDesc(n + name_at, descsz, out, &name) && std::strcmp(name, entry) == 0) {
                return true;
            }
            at += name_at + (descsz + 3) / 4 * 4;
        }
    }
    return false;
}

/* The launch record at `record` (note.launches for the first; the next one starts at
 * tiling + tiling_size). ParseDesc bounded all launch_num records. */
inline Om2Launch ReadLaunch(const Om2LaunchNote &note, const uint8_t *record) {
    using launch_note_detail::U64;
    return {U64(record), U64(record + 8), record + 16, record + 16 + 8ull * note.slot_num};
}

inline uint64_t SlotFlags(const Om2LaunchNote &note, uint32_t slot) { return launch_note_detail::U64(note.slot_flags + 8ull * slot); }
inline uint64_t SlotBytes(const Om2Launch &launch, uint32_t slot) { return launch_note_detail::U64(launch.slot_bytes + 8ull * slot); }

}  // namespace om2

#endif /* OM2_OM2_LAUNCH_NOTE_H */
