/*
 * loader.cpp -- loading a shared object from memory: its ELF structure checked first
 * (om2_elf_image.h), then the bytes written to a sealed memfd and dlopened under a path no
 * loaded object has used; nothing touches the disk. Kernel binaries that need the dynamic
 * loader (binaries.cpp) and the executor's model and custom-operator libraries
 * (om2rtLoadSharedObjectFromMemory, om2/om2_cpu_runtime.h) all load this way.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <string>
#include <vector>

#include "om2/om2_cpu_runtime.h"
#include "../om2_elf_image.h"
#include "base.h"

namespace om2rt {
namespace {

struct LoaderState {
    std::mutex m;  // makes "pick a name, dlopen it" atomic with respect to other loads
};

class FdCloser {
  public:
    explicit FdCloser(int fd) : fd_(fd) {}
    ~FdCloser() { close(fd_); }
    FdCloser(const FdCloser&) = delete;
    FdCloser& operator=(const FdCloser&) = delete;

  private:
    int fd_;
};

/* The bytes in a memfd, sealed before anything maps them: nothing can change what the loader
 * reads afterwards (F_SEAL_WRITE / SHRINK / GROW, and F_SEAL_SEAL so no seal can be lifted). */
aclError write_memfd(const void* data, size_t length, int* fd_out) {
    char buf[128];
    const int fd = memfd_create("om2_kernel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return fail(ACL_ERROR_RT_FAILURE, "memfd_create failed: %s", errno_text(errno, buf, sizeof buf));
    const char* p = static_cast<const char*>(data);
    size_t left = length;
    while (left > 0) {
        const ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            close(fd);
            return fail(ACL_ERROR_RT_FAILURE, "writing the binary to a memfd failed: %s", errno_text(err, buf, sizeof buf));
        }
        p += n;
        left -= static_cast<size_t>(n);
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        const int err = errno;
        close(fd);
        return fail(ACL_ERROR_RT_FAILURE, "sealing the binary's memfd failed: %s", errno_text(err, buf, sizeof buf));
    }
    *fd_out = fd;
    return ACL_SUCCESS;
}

/* The names of the objects loaded in this process (dl_iterate_phdr walks the loader's list in
 * memory; an RTLD_NOLOAD probe would open each candidate file to compare inodes too). */
std::vector<std::string> loaded_names() {
    std::vector<std::string> names;
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* data) {
            if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
                static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
            }
            return 0;
        },
        &names);
    return names;
}

/* glibc's dlopen returns an already loaded object whose name equals the requested path without
 * opening the file, and "/proc/self/fd/N" names repeat as soon as fd N is reused (every memfd
 * is closed once mapped, so the next one usually gets the same number): the second binary
 * would silently resolve to the first. So a load takes the shortest free spelling of the path:
 * "/proc/self/fd/N", then the bits of k = 1, 2, ... written as "../fd/" (1) and "./" (0)
 * components, which the kernel resolves to the same memfd. The length grows with the number of
 * libraries loaded at once, not with the loads so far (each component is a procfs lookup). */
std::string unique_fd_path(int fd) {
    const std::vector<std::string> taken = loaded_names();
    const std::string base = "/proc/self/fd/", number = std::to_string(fd);
    for (uint64_t k = 0;; ++k) {
        std::string path = base;
        if (k != 0) {
            for (int bit = 63 - __builtin_clzll(k); bit >= 0; --bit) path += ((k >> bit) & 1u) ? "../fd/" : "./";
        }
        path += number;
        if (std::find(taken.begin(), taken.end(), path) == taken.end()) return path;
    }
}

}  // namespace

aclError load_shared_object(const void* data, size_t length, void** dl_out, int extra_flags) {
    char why[256];
    if (!om2_elf::CheckSharedObject(data, length, why, sizeof why)) {
        return fail(ACL_ERROR_INVALID_FILE, "refusing a shared object of %zu bytes before loading it: %s", length, why);
    }
    int fd = -1;
    RETURN_IF_ERROR(write_memfd(data, length, &fd));
    FdCloser closer(fd);  // the mapping keeps the memfd alive after dlopen
    LoaderState& loader = leaked_singleton<LoaderState>();
    std::lock_guard<std::mutex> lock(loader.m);
    const std::string path = unique_fd_path(fd);
    void* dl = dlopen(path.c_str(), RTLD_NOW | extra_flags);
    if (dl == nullptr) {
        const char* why = dlerror();
        return fail(ACL_ERROR_INVALID_FILE, "cannot load the kernel binary (%zu bytes): %s", length,
                    why != nullptr ? why : "unknown dlopen error");
    }
    *dl_out = dl;
    return ACL_SUCCESS;
}

}  // namespace om2rt

using namespace om2rt;

/* Vendor extension (om2_cpu_runtime.h): the same in-memory loader for the executor's shared
 * objects (model libraries, custom-operator libraries). */
extern "C" ACL_FUNC_VISIBILITY aclError om2rtLoadSharedObjectFromMemory(const void* data, size_t length, int global,
                                                                        void** handle) {
    try {
        if (data == nullptr || length == 0 || handle == nullptr) {
            return fail(ACL_ERROR_INVALID_PARAM, "om2rtLoadSharedObjectFromMemory: null data, zero length or null handle");
        }
        *handle = nullptr;
        return load_shared_object(data, length, handle, global ? RTLD_GLOBAL : RTLD_LOCAL);
    } catch (...) {
        return ACL_ERROR_INTERNAL_ERROR;
    }
}

