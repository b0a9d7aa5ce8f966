/*
 * om2_elf_image.h -- the structure of a shared object checked before the dynamic loader sees it.
 *
 * The loader trusts the file: a program header past the end of the bytes, a segment whose file
 * range runs beyond them (the loader maps it and the first touch raises SIGBUS), or a dynamic
 * entry pointing outside every segment (a wild read inside ld.so) each crash the process. A
 * digest that matches proves only that the bytes are the ones the manifest names, and a damaged
 * archive can name damaged bytes. So every shared object the runtime loads -- kernel binaries,
 * model libraries, packed SOs -- passes this check first, and a failure is an ACL error with a
 * reason, never a signal.
 *
 * It checks layout, not behaviour: a well-formed library can still do anything when it runs
 * (signed archives are what answers that).
 */
#ifndef OM2_ELF_IMAGE_H
#define OM2_ELF_IMAGE_H

#include <elf.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace om2_elf {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
constexpr uint16_t kHostMachine = EM_NONE;
#endif

/* Bounds no genuine object reaches. A model library holds code and tables (its weights are the
 * constants blob) and a kernel one specialisation: a few MiB of file bytes at most, and KiBs of
 * bss. The largest objects this check sees are the host libraries a model packs, which can be
 * hundreds of MiB of file bytes. Above these a p_memsz or p_vaddr can only be an edit, and the
 * loader would reserve, map and zero-fill what it says. */
constexpr uint64_t kMaxBss = 256ull << 20;    // bytes a PT_LOAD adds beyond its file bytes
constexpr uint64_t kMaxSpan = 2ull << 30;     // first PT_LOAD's page to the end of the last
constexpr uint64_t kMaxTls = 16ull << 20;     // PT_TLS p_memsz, allocated again for every thread
constexpr uint64_t kMaxTlsAlign = 1ull << 16; // PT_TLS p_align: ld.so over-allocates by it

/* [offset, offset + size) lies inside [0, limit), without overflow. */
inline bool Within(uint64_t offset, uint64_t size, uint64_t limit) {
    return offset <= limit && size <= limit - offset;
}

/* The program headers (copied: the image may be unaligned); the PT_LOAD segments' virtual ranges
 * are where dynamic entries may point. */
struct Segments {
    std::vector<Elf64_Phdr> phdr;
    std::vector<std::pair<uint64_t, uint64_t>> code;   // [start, end) of the SHF_EXECINSTR sections

    /* vaddr is code: inside an executable section (or, without section headers, segment). */
    bool IsCode(uint64_t vaddr) const {
        if (code.empty()) return ContainsWith(vaddr, 1, PF_X);
        for (const auto &range : code) {
            if (vaddr >= range.first && vaddr < range.second) return true;
        }
        return false;
    }

    bool Contains(uint64_t vaddr, uint64_t size) const {
        for (const Elf64_Phdr &p : phdr) {
            if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && Within(vaddr - p.p_vaddr, size, p.p_memsz)) return true;
        }
        return false;
    }

    /* [vaddr, vaddr + size) inside one PT_LOAD segment with all of `flags` (PF_X, PF_W). */
    bool ContainsWith(uint64_t vaddr, uint64_t size, uint32_t flags) const {
        for (const Elf64_Phdr &p : phdr) {
            if (p.p_type == PT_LOAD && (p.p_flags & flags) == flags && vaddr >= p.p_vaddr &&
                Within(vaddr - p.p_vaddr, size, p.p_memsz)) {
                return true;
            }
        }
        return false;
    }

    /* The file offset of a virtual address inside a segment's file bytes, or UINT64_MAX. */
    uint64_t FileOffset(uint64_t vaddr, uint64_t size) const {
        for (const Elf64_Phdr &p : phdr) {
            if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && Within(vaddr - p.p_vaddr, size, p.p_filesz)) {
                return p.p_offset + (vaddr - p.p_vaddr);
            }
        }
        return UINT64_MAX;
    }
};

/* A relocation type that needs the object's TLS block. */
inline bool IsTlsRelocation(uint32_t type) {
#if defined(__aarch64__)
    return type == R_AARCH64_TLS_DTPMOD || type == R_AARCH64_TLS_DTPREL || type == R_AARCH64_TLS_TPREL ||
           type == R_AARCH64_TLSDESC;
#else
    return type == R_X86_64_DTPMOD64 || type == R_X86_64_DTPOFF64 || type == R_X86_64_TPOFF64 ||
           type == R_X86_64_TLSDESC;
#endif
}

/* The dynamic entries the symbol lookup reads through (0 = absent). */
struct SymbolTables {
    uint64_t symtab = 0, hash = 0, gnu_hash = 0, versym = 0, verdef = 0, verdefnum = 0, verneed = 0, verneednum = 0;
    bool has_symtab = false, has_hash = false, has_gnu_hash = false, has_versym = false, has_verdef = false,
         has_verneed = false;
};

/* `count` uint32 at vaddr in the file bytes: their file offset, or UINT64_MAX. */
inline uint64_t Words(const Segments &segs, uint64_t vaddr, uint64_t count) {
    return count > (UINT64_MAX / 4) ? UINT64_MAX : segs.FileOffset(vaddr, count * 4);
}

inline uint32_t Word(const unsigned char *data, uint64_t offset) {
    uint32_t w;
    std::memcpy(&w, data + offset, sizeof w);
    return w;
}

/* A string-table offset the loader compares as a NUL-terminated name. */
inline bool NameInTable(const unsigned char *data, uint64_t str_off, uint64_t str_size, uint64_t name) {
    return str_off != UINT64_MAX && name < str_size && std::memchr(data + str_off + name, 0, str_size - name) != nullptr;
}

/* ld.so's symbol lookup walks the hash tables, the symbols they reach, their names and versions
 * without bounds: every bucket and chain must end inside the file bytes, every symbol reached
 * must lie in the symbol and version tables, every name in the string table, and the version
 * definition and need lists must end where their counts say. */
inline bool CheckSymbolTables(const unsigned char *data, const Segments &segs, const SymbolTables &t,
                              uint64_t str_off, uint64_t str_size, char *why, size_t why_len) {
    uint64_t nsyms = 0;
    if (t.has_gnu_hash) {
        const uint64_t head = Words(segs, t.gnu_hash, 4);
        if (head == UINT64_MAX) {
            std::snprintf(why, why_len, "its DT_GNU_HASH header lies outside its file bytes");
            return false;
        }
        const uint64_t nbuckets = Word(data, head), symoffset = Word(data, head + 4), bloom = Word(data, head + 8);
        const uint64_t buckets_at = t.gnu_hash + 16 + bloom * 8;
        const uint64_t buckets = Words(segs, buckets_at, nbuckets);
        if (nbuckets == 0 || bloom == 0 || Words(segs, t.gnu_hash + 16, bloom * 2) == UINT64_MAX || buckets == UINT64_MAX) {
            std::snprintf(why, why_len, "its DT_GNU_HASH table (%llu buckets, %llu bloom words) is empty or lies "
                          "outside its file bytes", (unsigned long long)nbuckets, (unsigned long long)bloom);
            return false;
        }
        nsyms = symoffset;
        const uint64_t chains_at = buckets_at + nbuckets * 4;
        /* the linker sorts the symbols by bucket, so the chains are disjoint runs in bucket order:
         * refusing anything else keeps this walk linear in the table's size */
        uint64_t next_free = symoffset;
        for (uint64_t b = 0; b < nbuckets; ++b) {
            uint64_t index = Word(data, buckets + b * 4);
            if (index == 0) continue;
            if (index < next_free) {
                std::snprintf(why, why_len, "its DT_GNU_HASH buckets are not in symbol order");
                return false;
            }
            for (;; ++index) {   /* a chain ends at the entry with bit 0 set */
                const uint64_t at = index < symoffset ? UINT64_MAX : Words(segs, chains_at + (index - symoffset) * 4, 1);
                if (at == UINT64_MAX) {
                    std::snprintf(why, why_len, "a DT_GNU_HASH chain runs outside its file bytes");
                    return false;
                }
                if (index + 1 > nsyms) nsyms = index + 1;
                if (Word(data, at) & 1) break;
            }
            next_free = index + 1;
        }
    } else if (t.has_hash) {
        const uint64_t head = Words(segs, t.hash, 2);
        const uint64_t nbucket = head == UINT64_MAX ? 0 : Word(data, head), nchain = head == UINT64_MAX ? 0 : Word(data, head + 4);
        const uint64_t words = Words(segs, t.hash + 8, nbucket + nchain);
        if (nbucket == 0 || words == UINT64_MAX) {
            std::snprintf(why, why_len, "its DT_HASH table is empty or lies outside its file bytes");
            return false;
        }
        for (uint64_t i = 0; i < nbucket + nchain; ++i) {
            if (Word(data, words + i * 4) >= nchain) {
                std::snprintf(why, why_len, "its DT_HASH table names a symbol past its %llu", (unsigned long long)nchain);
                return false;
            }
        }
        nsyms = nchain;
    }
    if (nsyms != 0) {
        const uint64_t syms = !t.has_symtab || nsyms > UINT64_MAX / sizeof(Elf64_Sym)
                                  ? UINT64_MAX : segs.FileOffset(t.symtab, nsyms * sizeof(Elf64_Sym));
        if (syms == UINT64_MAX || (t.has_versym && segs.FileOffset(t.versym, nsyms * 2) == UINT64_MAX)) {
            std::snprintf(why, why_len, "its hash table reaches %llu symbols, more than its symbol or version table "
                          "holds", (unsigned long long)nsyms);
            return false;
        }
        for (uint64_t i = 0; i < nsyms; ++i) {
            Elf64_Sym sym;
            std::memcpy(&sym, data + syms + i * sizeof sym, sizeof sym);
            if (!NameInTable(data, str_off, str_size, sym.st_name)) {
                std::snprintf(why, why_len, "the name of its symbol %llu lies outside its string table",
                              (unsigned long long)i);
                return false;
            }
        }
    }
    /* Elf64_Verdef: half version, flags, ndx, cnt; word hash, aux, next. Elf64_Verdaux: word name, next. */
    uint64_t max_version = 1;   /* 0 local, 1 global; above: defined or needed here */
    uint64_t at = t.verdef;
    for (uint64_t i = 0; t.has_verdef && i < t.verdefnum; ++i) {
        const uint64_t def = segs.FileOffset(at, sizeof(Elf64_Verdef));
        Elf64_Verdef vd;
        if (def != UINT64_MAX) std::memcpy(&vd, data + def, sizeof vd);
        if (def == UINT64_MAX || vd.vd_version != VER_DEF_CURRENT) {
            std::snprintf(why, why_len, "its version definition %llu lies outside its file bytes or is malformed",
                          (unsigned long long)i);
            return false;
        }
        uint64_t aux = at + vd.vd_aux;
        for (uint64_t k = 0; k < vd.vd_cnt; ++k) {
            const uint64_t a = segs.FileOffset(aux, sizeof(Elf64_Verdaux));
            Elf64_Verdaux vda;
            if (a != UINT64_MAX) std::memcpy(&vda, data + a, sizeof vda);
            if (a == UINT64_MAX || !NameInTable(data, str_off, str_size, vda.vda_name)) {
                std::snprintf(why, why_len, "a name of its version definition %llu lies outside its string table",
                              (unsigned long long)i);
                return false;
            }
            aux += vda.vda_next;
        }
        if (vd.vd_ndx > max_version) max_version = vd.vd_ndx;
        if (vd.vd_next == 0 && i + 1 < t.verdefnum) {
            std::snprintf(why, why_len, "its version definitions end before DT_VERDEFNUM %llu",
                          (unsigned long long)t.verdefnum);
            return false;
        }
        at += vd.vd_next;
    }
    /* Elf64_Verneed: half version, cnt; word file, aux, next. Elf64_Vernaux: word hash; half flags,
     * other; word name, next. */
    at = t.verneed;
    for (uint64_t i = 0; t.has_verneed && i < t.verneednum; ++i) {
        const uint64_t need = segs.FileOffset(at, sizeof(Elf64_Verneed));
        Elf64_Verneed vn;
        if (need != UINT64_MAX) std::memcpy(&vn, data + need, sizeof vn);
        if (need == UINT64_MAX || vn.vn_version != VER_NEED_CURRENT || !NameInTable(data, str_off, str_size, vn.vn_file)) {
            std::snprintf(why, why_len, "its version need %llu lies outside its file bytes or is malformed",
                          (unsigned long long)i);
            return false;
        }
        uint64_t aux = at + vn.vn_aux;
        for (uint64_t k = 0; k < vn.vn_cnt; ++k) {
            const uint64_t a = segs.FileOffset(aux, sizeof(Elf64_Vernaux));
            Elf64_Vernaux vna;
            if (a != UINT64_MAX) std::memcpy(&vna, data + a, sizeof vna);
            if (a == UINT64_MAX || !NameInTable(data, str_off, str_size, vna.vna_name)) {
                std::snprintf(why, why_len, "a name of its version need %llu lies outside its string table",
                              (unsigned long long)i);
                return false;
            }
            aux += vna.vna_next;
            if (vna.vna_other > max_version) max_version = vna.vna_other;
        }
        if (vn.vn_next == 0 && i + 1 < t.verneednum) {
            std::snprintf(why, why_len, "its version needs end before DT_VERNEEDNUM %llu",
                          (unsigned long long)t.verneednum);
            return false;
        }
        at += vn.vn_next;
    }
    /* the loader indexes its version array with each symbol's DT_VERSYM entry */
    const uint64_t versyms = t.has_versym && nsyms ? segs.FileOffset(t.versym, nsyms * 2) : UINT64_MAX;
    for (uint64_t i = 0; versyms != UINT64_MAX && i < nsyms; ++i) {
        uint16_t v;
        std::memcpy(&v, data + versyms + i * 2, sizeof v);
        if ((v & 0x7fff) > max_version) {
            std::snprintf(why, why_len, "its symbol %llu has version index %u, past its %llu versions",
                          (unsigned long long)i, v & 0x7fff, (unsigned long long)max_version);
            return false;
        }
    }
    return true;
}

/* Checks the dynamic section's pointers and sizes; false with a reason in `why`. */
inline bool CheckDynamic(const unsigned char *data, uint64_t length, const Elf64_Phdr &dyn, const Segments &segs,
                         char *why, size_t why_len) {
    bool has_tls = false;
    for (const Elf64_Phdr &p : segs.phdr) has_tls |= p.p_type == PT_TLS;
    if (dyn.p_filesz % sizeof(Elf64_Dyn) != 0 || !Within(dyn.p_offset, dyn.p_filesz, length)) {
        std::snprintf(why, why_len, "its dynamic section (%llu bytes at %llu) is malformed",
                      (unsigned long long)dyn.p_filesz, (unsigned long long)dyn.p_offset);
        return false;
    }
    /* ld.so reads the dynamic entries at p_vaddr, not p_offset, and before glibc 2.35 writes the
     * relocated addresses back into them: they must be the bytes checked here, in a writable
     * segment */
    if (segs.FileOffset(dyn.p_vaddr, dyn.p_filesz) != dyn.p_offset || dyn.p_memsz != dyn.p_filesz ||
        !segs.ContainsWith(dyn.p_vaddr, dyn.p_memsz, PF_W)) {
        std::snprintf(why, why_len, "its dynamic section (0x%llx in memory) is not its file bytes at %llu in a "
                      "writable segment", (unsigned long long)dyn.p_vaddr, (unsigned long long)dyn.p_offset);
        return false;
    }
    struct Table {
        int64_t addr_tag, size_tag;
        const char *name, *size_name;
        uint64_t addr = 0, size = 0;
        bool present = false;   /* any address may be a (hostile) value: UINT64_MAX is no sentinel */
        bool sized = false;
    } tables[] = {{DT_STRTAB, DT_STRSZ, "DT_STRTAB", "DT_STRSZ"}, {DT_RELA, DT_RELASZ, "DT_RELA", "DT_RELASZ"},
                  {DT_JMPREL, DT_PLTRELSZ, "DT_JMPREL", "DT_PLTRELSZ"},
                  {DT_INIT_ARRAY, DT_INIT_ARRAYSZ, "DT_INIT_ARRAY", "DT_INIT_ARRAYSZ"},
                  {DT_FINI_ARRAY, DT_FINI_ARRAYSZ, "DT_FINI_ARRAY", "DT_FINI_ARRAYSZ"},
                  {DT_REL, DT_RELSZ, "DT_REL", "DT_RELSZ"},
                  {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ, "DT_PREINIT_ARRAY", "DT_PREINIT_ARRAYSZ"}};
    const int64_t pointers[] = {DT_SYMTAB, DT_HASH, DT_GNU_HASH, DT_VERSYM, DT_VERNEED, DT_VERDEF, DT_INIT, DT_FINI};
    bool ended = false;
    uint64_t relaent = 0, relacount = 0, syment = 0;
    SymbolTables syms;
    std::vector<uint64_t> names;   // string-table offsets: DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH
    const uint64_t n = dyn.p_filesz / sizeof(Elf64_Dyn);
    for (uint64_t i = 0; i < n && !ended; ++i) {
        Elf64_Dyn d;
        std::memcpy(&d, data + dyn.p_offset + i * sizeof d, sizeof d);
        if (d.d_tag == DT_NULL) ended = true;
        for (int64_t tag : pointers) {
            if (d.d_tag == tag && !segs.Contains(d.d_un.d_ptr, 1)) {
                std::snprintf(why, why_len, "dynamic entry %lld points outside its segments", (long long)tag);
                return false;
            }
        }
        if ((d.d_tag == DT_INIT || d.d_tag == DT_FINI) && !segs.IsCode(d.d_un.d_ptr)) {
            std::snprintf(why, why_len, "its %s function lies outside its code", d.d_tag == DT_INIT ? "DT_INIT" : "DT_FINI");
            return false;
        }
        for (Table &t : tables) {
            if (d.d_tag == t.addr_tag) t.addr = d.d_un.d_ptr, t.present = true;
            if (d.d_tag == t.size_tag) t.size = d.d_un.d_val, t.sized = true;
        }
        if (d.d_tag == DT_NEEDED || d.d_tag == DT_SONAME || d.d_tag == DT_RPATH || d.d_tag == DT_RUNPATH) {
            names.push_back(d.d_un.d_val);
        }
        switch (d.d_tag) {
            case DT_SYMTAB: syms.symtab = d.d_un.d_ptr, syms.has_symtab = true; break;
            case DT_HASH: syms.hash = d.d_un.d_ptr, syms.has_hash = true; break;
            case DT_GNU_HASH: syms.gnu_hash = d.d_un.d_ptr, syms.has_gnu_hash = true; break;
            case DT_VERSYM: syms.versym = d.d_un.d_ptr, syms.has_versym = true; break;
            case DT_VERDEF: syms.verdef = d.d_un.d_ptr, syms.has_verdef = true; break;
            case DT_VERDEFNUM: syms.verdefnum = d.d_un.d_val; break;
            case DT_VERNEED: syms.verneed = d.d_un.d_ptr, syms.has_verneed = true; break;
            case DT_VERNEEDNUM: syms.verneednum = d.d_un.d_val; break;
            default: break;
        }
        if (d.d_tag == DT_RELAENT) relaent = d.d_un.d_val;
        if (d.d_tag == DT_RELACOUNT) relacount = d.d_un.d_val;
        if (d.d_tag == DT_SYMENT) syment = d.d_un.d_val;
    }
    if (!ended) {
        std::snprintf(why, why_len, "its dynamic section has no DT_NULL end");
        return false;
    }
    /* ld.so takes the size of a table whose address it has from the size entry, without looking
     * whether there is one (a NULL dereference) */
    for (const Table &t : tables) {
        if (t.present && !t.sized) {
            std::snprintf(why, why_len, "it has a %s entry but no %s", t.name, t.size_name);
            return false;
        }
    }
    /* the names the loader reads from the string table lie inside it, NUL-terminated */
    const uint64_t str_off = !tables[0].present ? UINT64_MAX : segs.FileOffset(tables[0].addr, tables[0].size);
    for (uint64_t name : names) {
        if (str_off == UINT64_MAX || name >= tables[0].size ||
            std::memchr(data + str_off + name, 0, tables[0].size - name) == nullptr) {
            std::snprintf(why, why_len, "a library name of its dynamic section lies outside its string table");
            return false;
        }
    }
    if (!CheckSymbolTables(data, segs, syms, str_off, tables[0].size, why, why_len)) return false;
    /* the loader walks RELA tables by these counts and sizes (DT_RELACOUNT relative ones first) */
    for (const Table &t : tables) {
        if ((t.addr_tag == DT_RELA || t.addr_tag == DT_JMPREL) && t.size % sizeof(Elf64_Rela) != 0) {
            std::snprintf(why, why_len, "its relocation table %s is %llu bytes, not whole entries", t.name,
                          (unsigned long long)t.size);
            return false;
        }
    }
    if (relaent != 0 && relaent != sizeof(Elf64_Rela)) {
        std::snprintf(why, why_len, "its RELA entries are %llu bytes, not %zu", (unsigned long long)relaent,
                      sizeof(Elf64_Rela));
        return false;
    }
    if (relacount * sizeof(Elf64_Rela) > tables[1].size) {
        std::snprintf(why, why_len, "DT_RELACOUNT %llu exceeds its RELA table", (unsigned long long)relacount);
        return false;
    }
    if (syment != 0 && syment != sizeof(Elf64_Sym)) {
        std::snprintf(why, why_len, "its symbol entries are %llu bytes, not %zu", (unsigned long long)syment,
                      sizeof(Elf64_Sym));
        return false;
    }
    for (const Table &t : tables) {
        if (t.present && segs.FileOffset(t.addr, t.size) == UINT64_MAX) {
            std::snprintf(why, why_len, "its table %s (%llu bytes) lies outside its file bytes", t.name,
                          (unsigned long long)t.size);
            return false;
        }
    }
    /* ld.so calls every slot of the constructor and destructor arrays, whatever it holds: each
     * must be an aligned slot of the data segment that a RELATIVE relocation fills with an
     * address in the code (the file's bytes there are only the link-time address) */
    const Table *arrays[] = {&tables[3], &tables[4], &tables[6]};
    std::vector<std::vector<bool>> filled;
    for (const Table *array : arrays) {
        filled.emplace_back(array->present ? array->size / sizeof(uint64_t) : 0, false);
        if (array->present && (array->size % sizeof(uint64_t) != 0 || array->addr % sizeof(uint64_t) != 0 ||
                               !segs.ContainsWith(array->addr, array->size, PF_W))) {
            std::snprintf(why, why_len, "its %s (%llu bytes at 0x%llx) is not whole aligned slots of a writable "
                          "segment", array->name, (unsigned long long)array->size, (unsigned long long)array->addr);
            return false;
        }
    }
#if defined(__aarch64__)
    const uint32_t relative = R_AARCH64_RELATIVE;
#else
    const uint32_t relative = R_X86_64_RELATIVE;
#endif
    for (const Table &t : tables) {
        if ((t.addr_tag != DT_RELA && t.addr_tag != DT_JMPREL) || !t.present) continue;
        const uint64_t at = segs.FileOffset(t.addr, t.size);
        for (uint64_t r = 0; r + sizeof(Elf64_Rela) <= t.size; r += sizeof(Elf64_Rela)) {
            Elf64_Rela rela;
            std::memcpy(&rela, data + at + r, sizeof rela);
            if (!segs.Contains(rela.r_offset, sizeof(uint64_t))) {
                std::snprintf(why, why_len, "a relocation writes outside its segments (offset 0x%llx)",
                              (unsigned long long)rela.r_offset);
                return false;
            }
            if (!has_tls && IsTlsRelocation(ELF64_R_TYPE(rela.r_info))) {
                std::snprintf(why, why_len, "it has thread-local relocations but no PT_TLS segment");
                return false;
            }
            for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; ++a) {
                const Table &array = *arrays[a];
                if (!array.present || rela.r_offset + sizeof(uint64_t) <= array.addr ||
                    rela.r_offset >= array.addr + array.size) {
                    continue;
                }
                if (ELF64_R_TYPE(rela.r_info) != relative || (rela.r_offset - array.addr) % sizeof(uint64_t) != 0 ||
                    !segs.IsCode(static_cast<uint64_t>(rela.r_addend))) {
                    std::snprintf(why, why_len, "a constructor or destructor slot points outside its code");
                    return false;
                }
                filled[a][(rela.r_offset - array.addr) / sizeof(uint64_t)] = true;
            }
        }
    }
    for (size_t a = 0; a < filled.size(); ++a) {
        for (size_t slot = 0; slot < filled[a].size(); ++slot) {
            if (!filled[a][slot]) {
                std::snprintf(why, why_len, "slot %zu of its %s has no relocation to its code", slot,
                              arrays[a]->name);
                return false;
            }
        }
    }
    return true;
}

/* Checks a program header other than PT_LOAD: ld.so, dl_iterate_phdr's users (the unwinder reads
 * PT_GNU_EH_FRAME) and the TLS code read what these describe at load address + p_vaddr, so it
 * must be mapped, and be the file bytes at p_offset that this check and the tools see. */
inline bool CheckDescriptor(const Elf64_Ehdr &eh, const Elf64_Phdr &p, const Segments &segs, char *why,
                            size_t why_len) {
    const char *name = nullptr;
    bool ok = true;
    switch (p.p_type) {
        case PT_PHDR:   // ld.so's view of the program headers (l_phdr) when present
            name = "PT_PHDR";
            ok = p.p_offset == eh.e_phoff && p.p_filesz == (uint64_t)eh.e_phnum * eh.e_phentsize &&
                 p.p_memsz == p.p_filesz && segs.FileOffset(p.p_vaddr, p.p_filesz) == p.p_offset;
            break;
        case PT_NOTE: case PT_GNU_PROPERTY: case PT_GNU_EH_FRAME:
            name = p.p_type == PT_NOTE ? "PT_NOTE" : p.p_type == PT_GNU_PROPERTY ? "PT_GNU_PROPERTY" : "PT_GNU_EH_FRAME";
            ok = p.p_memsz == p.p_filesz && segs.FileOffset(p.p_vaddr, p.p_filesz) == p.p_offset;
            break;
        case PT_TLS:    // each thread's block: p_filesz bytes copied from p_vaddr, the rest of p_memsz zeroed
            name = "PT_TLS";
            ok = p.p_filesz <= p.p_memsz && p.p_memsz <= kMaxTls && p.p_align <= kMaxTlsAlign &&
                 (p.p_align & (p.p_align - 1)) == 0 && segs.FileOffset(p.p_vaddr, p.p_filesz) == p.p_offset;
            break;
        case PT_GNU_RELRO:   // made read-only after relocation: inside the data it protects
            name = "PT_GNU_RELRO";
            ok = p.p_memsz == 0 || segs.ContainsWith(p.p_vaddr, p.p_memsz, PF_W);
            break;
        default: return true;
    }
    if (!ok && p.p_type == PT_GNU_RELRO) {
        std::snprintf(why, why_len, "its RELRO range lies outside its data segment");
    } else if (!ok) {
        std::snprintf(why, why_len, "its %s (%llu bytes at 0x%llx, file offset %llu) lies outside the bytes it "
                      "describes or is malformed", name, (unsigned long long)p.p_memsz, (unsigned long long)p.p_vaddr,
                      (unsigned long long)p.p_offset);
    }
    return ok;
}

/* True when `data` is a well-formed 64-bit shared object of the host machine; else false and a
 * reason in `why` ("<what> is ..."). */
inline bool CheckSharedObject(const void *image, uint64_t length, char *why, size_t why_len) {
    const unsigned char *data = static_cast<const unsigned char *>(image);
    Elf64_Ehdr eh;
    if (length < sizeof eh || std::memcmp(data, ELFMAG, SELFMAG) != 0) {
        std::snprintf(why, why_len, "it is not an ELF file (%llu bytes)", (unsigned long long)length);
        return false;
    }
    std::memcpy(&eh, data, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_DYN) {
        std::snprintf(why, why_len, "it is not a 64-bit little-endian shared object");
        return false;
    }
    if (eh.e_machine != kHostMachine) {
        std::snprintf(why, why_len, "it is built for ELF machine %u, this host is %u", eh.e_machine, kHostMachine);
        return false;
    }
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum >= PN_XNUM ||
        !Within(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), length)) {
        std::snprintf(why, why_len, "its program headers lie outside the file (truncated?)");
        return false;
    }
    if (eh.e_shoff != 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                            !Within(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), length))) {
        std::snprintf(why, why_len, "its section headers lie outside the file (truncated?)");
        return false;
    }
    Segments segs{std::vector<Elf64_Phdr>(eh.e_phnum), {}};
    std::memcpy(segs.phdr.data(), data + eh.e_phoff, eh.e_phnum * sizeof(Elf64_Phdr));
    for (uint16_t i = 0; eh.e_shoff != 0 && i < eh.e_shnum; ++i) {
        Elf64_Shdr sh;
        std::memcpy(&sh, data + eh.e_shoff + i * sizeof sh, sizeof sh);
        if ((sh.sh_flags & SHF_EXECINSTR) && sh.sh_type == SHT_PROGBITS && sh.sh_size != 0) {
            segs.code.emplace_back(sh.sh_addr, sh.sh_addr + sh.sh_size);
        }
    }
    const Elf64_Phdr *dynamic = nullptr;
    int loads = 0;
    uint64_t first = 0, end = 0;   // the PT_LOAD segments' virtual span
    for (uint16_t i = 0; i < eh.e_phnum; ++i) {
        const Elf64_Phdr &p = segs.phdr[i];
        if (p.p_type == PT_LOAD) {
            if (!Within(p.p_offset, p.p_filesz, length) || p.p_filesz > p.p_memsz || p.p_align == 0 ||
                (p.p_align & (p.p_align - 1)) != 0 || p.p_offset % p.p_align != p.p_vaddr % p.p_align ||
                p.p_memsz - p.p_filesz > kMaxBss || p.p_vaddr > (1ull << 46)) {
                std::snprintf(why, why_len, "segment %u (%llu bytes at file offset %llu, %llu in memory) runs past the "
                              "%llu bytes of the file or is malformed (truncated?)", i, (unsigned long long)p.p_filesz,
                              (unsigned long long)p.p_offset, (unsigned long long)p.p_memsz,
                              (unsigned long long)length);
                return false;
            }
            /* ld.so reserves first..end and maps each segment over it in order: one below or over
             * the one before would replace its pages */
            if (loads != 0 && p.p_vaddr < end) {
                std::snprintf(why, why_len, "segment %u (at 0x%llx) overlaps or precedes the one before it", i,
                              (unsigned long long)p.p_vaddr);
                return false;
            }
            if (loads++ == 0) first = p.p_vaddr & ~0xfffull;
            end = p.p_vaddr + p.p_memsz;
            if (end - first > kMaxSpan) {
                std::snprintf(why, why_len, "its segments span %llu bytes of memory", (unsigned long long)(end - first));
                return false;
            }
        } else if (p.p_type == PT_DYNAMIC) {
            dynamic = &p;
        } else if (p.p_type == PT_INTERP) {
            std::snprintf(why, why_len, "it is an executable (it names a program interpreter), not a library");
            return false;
        }
    }
    for (const auto &range : segs.code) {
        if (!segs.ContainsWith(range.first, range.second - range.first, PF_X)) {
            std::snprintf(why, why_len, "its code (0x%llx..0x%llx) lies outside its executable segments",
                          (unsigned long long)range.first, (unsigned long long)range.second);
            return false;
        }
    }
    if (loads == 0) {
        std::snprintf(why, why_len, "it has no loadable segment");
        return false;
    }
    if (dynamic == nullptr) {
        std::snprintf(why, why_len, "it has no dynamic section");
        return false;
    }
    for (uint16_t i = 0; i < eh.e_phnum; ++i) {
        if (!CheckDescriptor(eh, segs.phdr[i], segs, why, why_len)) return false;
    }
    return CheckDynamic(data, length, *dynamic, segs, why, why_len);
}

}  // namespace om2_elf

#endif  // OM2_ELF_IMAGE_H
