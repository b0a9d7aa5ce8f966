/*
 * memory.cpp -- device and host memory of the CPU ACL runtime: aclrtMalloc / aclrtFree,
 * aclrtMallocHost / aclrtFreeHost, aclrtMemcpy(Async), aclrtMemset(Async), the check that a
 * launch's args are device memory, and om2rtGetLiveAllocationCount.
 *
 * Device memory is host memory aligned to 64 bytes. aclrtMalloc rounds the size up to a
 * multiple of 32 and adds 32 bytes, as ACL does; size 0 is valid and returns a unique
 * 32-byte block. Its huge-page policies (ACL_MEM_MALLOC_HUGE_FIRST / _ONLY) take transparent
 * huge pages for a block of 2 MiB or more: aligned to 2 MiB and madvise(MADV_HUGEPAGE), so that
 * first touching it (a workspace, a load task's output) faults once per 2 MiB, not per 4 KiB
 * (where the kernel has none to give, ordinary pages: HUGE_ONLY is not enforced). Every block is tracked, so freeing a foreign or already freed pointer
 * fails cleanly instead of corrupting the heap. aclrtMemcpy's kind is checked but the
 * direction does not matter.
 *
 * The asynchronous copies and sets are tasks (streams.cpp queues them, a model RI records them).
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <sys/mman.h>

#include "acl/acl_rt.h"
#include "om2/om2_cpu_runtime.h"
#include "base.h"
#include "tasks.h"

namespace om2rt {
namespace {

enum class MemKind { kDevice, kHost };

struct MemBlock {
    size_t size;  // the size asked for (what a launch's args may span)
    MemKind kind;
};

/* Live allocations by address: ordered, so that the block holding an address is one
 * upper_bound away (launch_kernel's args check), without allocating. */
struct MemRegistry {
    std::mutex m;
    std::map<uintptr_t, MemBlock> blocks;
};

constexpr size_t kMemAlign = 64;
constexpr size_t kHugePage = size_t(2) << 20;  // x86-64's and aarch64's transparent huge page
constexpr size_t kSizeGranule = 32;  // ACL: the size is rounded up to 32 bytes ...
constexpr size_t kSizePadding = 32;  // ... and 32 bytes are added

const char* mem_kind_api(MemKind kind) { return kind == MemKind::kDevice ? "aclrtMalloc" : "aclrtMallocHost"; }

aclError allocate(void** out, size_t size, MemKind kind, bool huge = false) {
    if (out == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the output pointer is NULL");
    *out = nullptr;
    if (size > SIZE_MAX - kSizeGranule - kSizePadding - kHugePage) {
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "size %zu is too large", size);
    }
    size_t bytes = (size + kSizeGranule - 1) / kSizeGranule * kSizeGranule + kSizePadding;
    huge = huge && bytes >= kHugePage;
    if (huge) bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* block = nullptr;
    if (posix_memalign(&block, huge ? kHugePage : kMemAlign, bytes) != 0) {
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot allocate %zu bytes (size %zu)", bytes, size);
    }
    if (huge) (void)madvise(block, bytes, MADV_HUGEPAGE);  // advice only: ordinary pages where it is refused
    MemRegistry& reg = leaked_singleton<MemRegistry>();
    try {
        std::lock_guard<std::mutex> lock(reg.m);
        reg.blocks.emplace(reinterpret_cast<uintptr_t>(block), MemBlock{size, kind});
    } catch (...) {
        free(block);
        throw;
    }
    *out = block;
    return ACL_SUCCESS;
}

aclError release(void* block, MemKind kind) {
    if (block == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "the pointer is NULL");
    MemRegistry& reg = leaked_singleton<MemRegistry>();
    {
        std::lock_guard<std::mutex> lock(reg.m);
        auto it = reg.blocks.find(reinterpret_cast<uintptr_t>(block));
        if (it == reg.blocks.end()) {
            return fail(ACL_ERROR_INVALID_PARAM, "%p was not allocated by %s or was already freed", block,
                        mem_kind_api(kind));
        }
        if (it->second.kind != kind) {
            return fail(ACL_ERROR_INVALID_PARAM, "%p was allocated by %s; free it with the matching function",
                        block, mem_kind_api(it->second.kind));
        }
        reg.blocks.erase(it);
    }
    free(block);
    return ACL_SUCCESS;
}

aclError check_memcpy(void* dst, size_t dest_max, const void* src, size_t count, long long kind) {
    if (dst == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "dst is NULL");
    if (src == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "src is NULL");
    if (count > dest_max) return fail(ACL_ERROR_INVALID_PARAM, "count %zu exceeds destMax %zu", count, dest_max);
    if (kind < ACL_MEMCPY_HOST_TO_HOST || kind > ACL_MEMCPY_DEFAULT) {
        return fail(ACL_ERROR_INVALID_PARAM, "kind %lld is not an aclrtMemcpyKind", kind);
    }
    return ACL_SUCCESS;
}

aclError check_memset(void* dst, size_t max_count, size_t count) {
    if (dst == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
    if (count > max_count) return fail(ACL_ERROR_INVALID_PARAM, "count %zu exceeds maxCount %zu", count, max_count);
    return ACL_SUCCESS;
}

Task memcpy_task(void* dst, const void* src, size_t count, const char* api) {
    Task t;
    t.type = TaskType::kMemcpy;
    t.api = api;
    t.dst = dst;
    t.src = src;
    t.count = count;
    return t;
}

Task memset_task(void* dst, int value, size_t count, const char* api) {
    Task t;
    t.type = TaskType::kMemset;
    t.api = api;
    t.dst = dst;
    t.value = value;
    t.count = count;
    return t;
}

}  // namespace

/* A kernel's args must be device memory (aclrtMalloc), all `size` bytes inside one live block:
 * a captured launch keeps the pointer and every replay reads through it, so a stack or heap
 * buffer would be garbage by then (om2/custom_op.h). One ordered-map lookup, no allocation; runs
 * when a launch is issued or captured, never at replay. */
aclError check_launch_args(const void* args, size_t size) {
    if (args == nullptr) return ACL_SUCCESS;  // argsSize 0 (checked by the caller)
    const uintptr_t begin = reinterpret_cast<uintptr_t>(args);
    MemRegistry& reg = leaked_singleton<MemRegistry>();
    std::lock_guard<std::mutex> lock(reg.m);
    auto it = reg.blocks.upper_bound(begin);
    if (it != reg.blocks.begin()) {
        --it;
        const uintptr_t offset = begin - it->first;
        if (offset <= it->second.size && size <= it->second.size - offset) {
            if (it->second.kind == MemKind::kDevice) return ACL_SUCCESS;
            return fail(ACL_ERROR_INVALID_PARAM, "argsData %p is host memory from aclrtMallocHost; kernel args must "
                        "be device memory from aclrtMalloc (copy them there with aclrtMemcpy)", args);
        }
        if (offset < it->second.size) {
            return fail(ACL_ERROR_INVALID_PARAM, "argsData %p + argsSize %zu runs past the end of its aclrtMalloc "
                        "block (%zu bytes at offset %zu)", args, size, it->second.size, static_cast<size_t>(offset));
        }
    }
    return fail(ACL_ERROR_INVALID_PARAM, "argsData %p is not device memory: kernel args must live in a buffer from "
                "aclrtMalloc, kept alive while the launch may run or be replayed (a stack or heap buffer is "
                "refused)", args);
}

}  // namespace om2rt

using namespace om2rt;

// =============================================================================================
// memory
// =============================================================================================

extern "C" aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
    const bool huge = policy == ACL_MEM_MALLOC_HUGE_FIRST || policy == ACL_MEM_MALLOC_HUGE_ONLY;
    return guarded("aclrtMalloc", [&] { return allocate(devPtr, size, MemKind::kDevice, huge); });
}

extern "C" aclError aclrtFree(void* devPtr) {
    return guarded("aclrtFree", [&] { return release(devPtr, MemKind::kDevice); });
}

extern "C" aclError aclrtMallocHost(void** hostPtr, size_t size) {
    return guarded("aclrtMallocHost", [&] { return allocate(hostPtr, size, MemKind::kHost); });
}

extern "C" aclError aclrtFreeHost(void* hostPtr) {
    return guarded("aclrtFreeHost", [&] { return release(hostPtr, MemKind::kHost); });
}

extern "C" aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
    return guarded("aclrtMemcpy", [&]() -> aclError {
        RETURN_IF_ERROR(check_memcpy(dst, destMax, src, count, enum_value(kind)));
        memmove(dst, src, count);
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                                     aclrtMemcpyKind kind, aclrtStream stream) {
    return guarded("aclrtMemcpyAsync", [&]() -> aclError {
        Stream* s = nullptr;
        RETURN_IF_ERROR(check_memcpy(dst, destMax, src, count, enum_value(kind)));
        RETURN_IF_ERROR(resolve_stream_or_default(stream, &s));
        return submit(s, memcpy_task(dst, src, count, "aclrtMemcpyAsync"));
    });
}

extern "C" aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
    return guarded("aclrtMemset", [&]() -> aclError {
        RETURN_IF_ERROR(check_memset(devPtr, maxCount, count));
        memset(devPtr, static_cast<unsigned char>(value), count);
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count,
                                     aclrtStream stream) {
    return guarded("aclrtMemsetAsync", [&]() -> aclError {
        Stream* s = nullptr;
        RETURN_IF_ERROR(check_memset(devPtr, maxCount, count));
        RETURN_IF_ERROR(resolve_stream_or_default(stream, &s));
        return submit(s, memset_task(devPtr, value, count, "aclrtMemsetAsync"));
    });
}

extern "C" uint64_t om2rtGetLiveAllocationCount(void) {
    try {
        MemRegistry& reg = leaked_singleton<MemRegistry>();
        std::lock_guard<std::mutex> lock(reg.m);
        return reg.blocks.size();
    } catch (...) {
        return 0;
    }
}

