/*
 * om2_kernel_image.h -- maps a kernel binary into memory without the dynamic loader.
 *
 * aclrtBinaryLoadFromData hands an NPU its kernel ELF and gets function handles back; nothing
 * on the device runs constructors or resolves libraries. om2gen's kernels are just as plain:
 * position-independent C with no constructors (built with -nostartfiles), no TLS, and calls
 * into libc/libm only. For such a binary a full dlopen -- memfd, a dozen mmaps and mprotects,
 * the loader's lists -- costs about 0.1 ms a kernel on a VM, more than the rest of registering
 * it. MapKernel does what that binary needs and no more: one anonymous mapping, the segments
 * copied in, RELATIVE / GLOB_DAT / JUMP_SLOT / 64 relocations applied (imports resolved with
 * dlsym over the process's global scope, as ld.so would), then each segment's own protection
 * (never writable and executable at once) and RELRO made read-only.
 *
 * A binary that needs more (DT_NEEDED beyond libc/libm, constructors, TLS, IFUNCs or any other
 * relocation, pages shared by segments of different protection) is declined, and the runtime
 * loads it with dlopen instead; so does every binary when OM2RT_KERNEL_DLOPEN=1 is set, which
 * makes kernels visible to gdb and perf as the loader's objects. x86-64 only: elsewhere every
 * kernel goes through dlopen.
 *
 * The image must have passed CheckSharedObject (om2_elf_image.h) first.
 */
#ifndef OM2_KERNEL_IMAGE_H
#define OM2_KERNEL_IMAGE_H

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "om2_elf_image.h"

namespace om2_elf {

struct KernelImage {
    void *base = nullptr;
    size_t span = 0;
    std::unordered_map<std::string, void *> functions;  // the binary's defined function symbols
};

inline void UnmapKernel(KernelImage *image) {
    if (image->base != nullptr) munmap(image->base, image->span);
    image->base = nullptr;
    image->functions.clear();
}

/* True when the runtime should try MapKernel on this machine and in this process. */
inline bool LightLoaderEnabled() {
#if defined(__x86_64__)
    const char *force = std::getenv("OM2RT_KERNEL_DLOPEN");
    return force == nullptr || std::strcmp(force, "1") != 0;
#else
    return false;
#endif
}

/* What MapKernel did: declined needs the dynamic loader (the caller then dlopens the binary);
 * failed could not map it at all, and dlopen would fail the same way, or worse. */
enum class MapResult { kMapped, kDeclined, kFailed };

namespace detail {

inline MapResult Decline(char *why, size_t why_len, const char *what) {
    std::snprintf(why, why_len, "%s", what);
    return MapResult::kDeclined;
}

template <typename T>
bool ReadAt(const unsigned char *data, uint64_t length, uint64_t offset, T *out) {
    if (!Within(offset, sizeof(T), length)) return false;
    std::memcpy(out, data + offset, sizeof(T));
    return true;
}

inline int Protection(uint32_t flags) {
    return ((flags & PF_R) ? PROT_READ : 0) | ((flags & PF_W) ? PROT_WRITE : 0) | ((flags & PF_X) ? PROT_EXEC : 0);
}

}  // namespace detail

/* Maps `data` (a checked kernel binary) into *image; else a reason in `why`. */
inline MapResult MapKernel(const void *image_data, uint64_t length, KernelImage *image, char *why, size_t why_len) {
#if !defined(__x86_64__)
    (void)image_data, (void)length, (void)image;
    return detail::Decline(why, why_len, "the light loader runs on x86-64 only");
#else
    using detail::Decline;
    const unsigned char *data = static_cast<const unsigned char *>(image_data);
    Elf64_Ehdr eh;
    std::memcpy(&eh, data, sizeof eh);
    std::vector<Elf64_Phdr> ph(eh.e_phnum);
    std::memcpy(ph.data(), data + eh.e_phoff, eh.e_phnum * sizeof(Elf64_Phdr));
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    uint64_t span = 0;
    const Elf64_Phdr *dynamic = nullptr, *relro = nullptr;
    for (const Elf64_Phdr &p : ph) {
        if (p.p_type == PT_LOAD) span = std::max<uint64_t>(span, p.p_vaddr + p.p_memsz);
        if (p.p_type == PT_DYNAMIC) dynamic = &p;
        if (p.p_type == PT_GNU_RELRO) relro = &p;
        if (p.p_type == PT_TLS) return Decline(why, why_len, "it has thread-local storage");
    }
    span = (span + page - 1) / page * page;
    /* no page may hold two segments of different protection */
    for (size_t i = 0; i < ph.size(); ++i) {
        for (size_t j = i + 1; j < ph.size(); ++j) {
            const Elf64_Phdr &a = ph[i], &b = ph[j];
            if (a.p_type != PT_LOAD || b.p_type != PT_LOAD || a.p_memsz == 0 || b.p_memsz == 0) continue;
            const uint64_t a0 = a.p_vaddr / page, a1 = (a.p_vaddr + a.p_memsz - 1) / page;
            const uint64_t b0 = b.p_vaddr / page, b1 = (b.p_vaddr + b.p_memsz - 1) / page;
            if (a0 <= b1 && b0 <= a1 && detail::Protection(a.p_flags) != detail::Protection(b.p_flags)) {
                return Decline(why, why_len, "two segments of different protection share a page");
            }
        }
    }
    /* the dynamic section: what the binary asks of a loader */
    uint64_t rela = 0, relasz = 0, jmprel = 0, pltrelsz = 0, strtab = UINT64_MAX, strsz = 0, symtab = UINT64_MAX;
    std::vector<uint64_t> needed;
    const Segments segs{ph, {}};
    for (uint64_t off = dynamic->p_offset; off + sizeof(Elf64_Dyn) <= dynamic->p_offset + dynamic->p_filesz;
         off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        std::memcpy(&d, data + off, sizeof d);
        if (d.d_tag == DT_NULL) break;
        switch (d.d_tag) {
            case DT_NEEDED: needed.push_back(d.d_un.d_val); break;
            case DT_RELA: rela = d.d_un.d_ptr; break;
            case DT_RELASZ: relasz = d.d_un.d_val; break;
            case DT_JMPREL: jmprel = d.d_un.d_ptr; break;
            case DT_PLTRELSZ: pltrelsz = d.d_un.d_val; break;
            case DT_STRTAB: strtab = d.d_un.d_ptr; break;
            case DT_STRSZ: strsz = d.d_un.d_val; break;
            case DT_SYMTAB: symtab = d.d_un.d_ptr; break;
            case DT_PLTREL:
                if (d.d_un.d_val != DT_RELA) return Decline(why, why_len, "its PLT relocations are not RELA");
                break;
            case DT_INIT: case DT_FINI: case DT_PREINIT_ARRAY:
                return Decline(why, why_len, "it has constructors or destructors");
            case DT_INIT_ARRAYSZ: case DT_FINI_ARRAYSZ:
                if (d.d_un.d_val != 0) return Decline(why, why_len, "it has constructors or destructors");
                break;
            case DT_REL: case DT_RELR: case DT_TEXTREL: case DT_AUXILIARY: case DT_FILTER:
                return Decline(why, why_len, "it asks for loader features the light loader does not have");
            default: break;
        }
    }
    const uint64_t str_off = segs.FileOffset(strtab, strsz);
    const uint64_t sym_off = segs.FileOffset(symtab, sizeof(Elf64_Sym));
    if (str_off == UINT64_MAX || sym_off == UINT64_MAX) return Decline(why, why_len, "it has no symbol table");
    auto name_at = [&](uint64_t offset) -> const char * {
        if (offset >= strsz) return nullptr;
        const void *end = std::memchr(data + str_off + offset, 0, strsz - offset);
        return end == nullptr ? nullptr : reinterpret_cast<const char *>(data + str_off + offset);
    };
    for (uint64_t n : needed) {
        const char *lib = name_at(n);
        if (lib == nullptr || (std::strcmp(lib, "libc.so.6") != 0 && std::strcmp(lib, "libm.so.6") != 0)) {
            return Decline(why, why_len, "it depends on a library other than libc and libm");
        }
    }
    /* the number of dynamic symbols, from the section headers (CheckSharedObject bounded them) */
    uint64_t nsyms = 0;
    for (uint16_t i = 0; i < eh.e_shnum; ++i) {
        Elf64_Shdr sh;
        if (!detail::ReadAt(data, length, eh.e_shoff + i * sizeof(Elf64_Shdr), &sh)) break;
        if (sh.sh_type == SHT_DYNSYM && sh.sh_offset == sym_off && sh.sh_entsize == sizeof(Elf64_Sym) &&
            Within(sh.sh_offset, sh.sh_size, length)) {
            nsyms = sh.sh_size / sizeof(Elf64_Sym);
        }
    }
    if (nsyms == 0) return Decline(why, why_len, "its dynamic symbols have no section header");
    auto symbol = [&](uint64_t index, Elf64_Sym *out) {
        return index < nsyms && detail::ReadAt(data, length, sym_off + index * sizeof(Elf64_Sym), out);
    };

    void *base = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        std::snprintf(why, why_len, "mmap of its %llu-byte image failed: %s", (unsigned long long)span,
                      std::strerror(errno));
        return MapResult::kFailed;
    }
    KernelImage out;
    out.base = base;
    out.span = span;
    unsigned char *mem = static_cast<unsigned char *>(base);
    for (const Elf64_Phdr &p : ph) {
        if (p.p_type == PT_LOAD) std::memcpy(mem + p.p_vaddr, data + p.p_offset, p.p_filesz);
    }
    /* relocations (CheckSharedObject checked that each writes inside a segment) */
    for (auto table : {std::make_pair(rela, relasz), std::make_pair(jmprel, pltrelsz)}) {
        if (table.second == 0) continue;
        const uint64_t at = segs.FileOffset(table.first, table.second);
        for (uint64_t r = 0; r + sizeof(Elf64_Rela) <= table.second; r += sizeof(Elf64_Rela)) {
            Elf64_Rela rel;
            std::memcpy(&rel, data + at + r, sizeof rel);
            const uint32_t type = ELF64_R_TYPE(rel.r_info);
            uint64_t value = 0;
            if (type == R_X86_64_NONE) continue;
            if (type == R_X86_64_RELATIVE) {
                value = reinterpret_cast<uint64_t>(mem) + rel.r_addend;
            } else if (type == R_X86_64_GLOB_DAT || type == R_X86_64_JUMP_SLOT || type == R_X86_64_64) {
                Elf64_Sym sym;
                if (!symbol(ELF64_R_SYM(rel.r_info), &sym)) {
                    UnmapKernel(&out);
                    return Decline(why, why_len, "a relocation names a symbol outside the symbol table");
                }
                if (ELF64_ST_TYPE(sym.st_info) == STT_GNU_IFUNC) {
                    UnmapKernel(&out);
                    return Decline(why, why_len, "it has an IFUNC symbol");
                }
                if (sym.st_shndx != SHN_UNDEF) {
                    value = reinterpret_cast<uint64_t>(mem) + sym.st_value;
                } else {
                    const char *name = name_at(sym.st_name);
                    void *found = name != nullptr ? dlsym(RTLD_DEFAULT, name) : nullptr;
                    if (found == nullptr && ELF64_ST_BIND(sym.st_info) != STB_WEAK) {
                        UnmapKernel(&out);
                        return Decline(why, why_len, "it imports a symbol this process does not have");
                    }
                    value = reinterpret_cast<uint64_t>(found);
                }
                if (type == R_X86_64_64) value += rel.r_addend;
            } else {
                UnmapKernel(&out);
                return Decline(why, why_len, "it has a relocation type the light loader does not apply");
            }
            std::memcpy(mem + rel.r_offset, &value, sizeof value);
        }
    }
    /* each segment's own protection, then RELRO read-only */
    for (const Elf64_Phdr &p : ph) {
        if (p.p_type != PT_LOAD || p.p_memsz == 0) continue;
        const uint64_t start = p.p_vaddr / page * page, end = (p.p_vaddr + p.p_memsz + page - 1) / page * page;
        if (mprotect(mem + start, end - start, detail::Protection(p.p_flags)) != 0) {
            UnmapKernel(&out);
            return Decline(why, why_len, "mprotect of a kernel segment failed (executable memory not allowed?)");
        }
    }
    if (relro != nullptr && relro->p_memsz != 0) {
        const uint64_t start = relro->p_vaddr / page * page, end = (relro->p_vaddr + relro->p_memsz) / page * page;
        if (end > start && mprotect(mem + start, end - start, PROT_READ) != 0) {
            UnmapKernel(&out);
            return Decline(why, why_len, "mprotect of the RELRO range failed");
        }
    }
    for (uint64_t i = 1; i < nsyms; ++i) {
        Elf64_Sym sym;
        if (!symbol(i, &sym)) break;
        const char *name = name_at(sym.st_name);
        if (name != nullptr && sym.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym.st_info) == STT_FUNC &&
            ELF64_ST_BIND(sym.st_info) != STB_LOCAL && segs.Contains(sym.st_value, 1)) {
            out.functions.emplace(name, mem + sym.st_value);
        }
    }
    *image = std::move(out);
    return MapResult::kMapped;
#endif
}

}  // namespace om2_elf

#endif  // OM2_KERNEL_IMAGE_H
