/*
 * binaries.cpp -- kernel binaries and their launch: aclrtBinaryLoadFromData,
 * aclrtBinaryGetFunction, aclrtBinaryUnLoad, aclrtLaunchKernel and aclrtLaunchKernelV2.
 *
 * A kernel binary is an ELF shared object (om2/om2_kernel.h) loaded from memory; nothing
 * touches the disk. A plain kernel (om2_kernel_image.h decides) is mapped without the dynamic
 * loader; one that needs it is written to a memfd and dlopened (loader.cpp). A launch is
 * checked here (its function, args and config), then issued as a task (streams.cpp's submit);
 * kernel_pool.cpp runs its blocks.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "acl/acl_rt.h"
#include "om2/om2_cpu_runtime.h"
#include "../om2_elf_image.h"
#include "../om2_kernel_image.h"
#include "base.h"
#include "tasks.h"

namespace om2rt {
namespace {

struct KernelFunc : Tagged<0x4B46554Eu> {  // "KFUN"
    Om2KernelEntry entry = nullptr;
    std::string name;
};

struct KernelBinary : Tagged<0x4B42494Eu> {  // "KBIN"
    void* dl = nullptr;                // loaded by dlopen, or
    om2_elf::KernelImage image;        // mapped by the light loader (om2_kernel_image.h)
    std::mutex m;
    std::unordered_map<std::string, std::unique_ptr<KernelFunc>> funcs;  // by kernel name
};

aclError check_load_options(const aclrtBinaryLoadOptions* options) {
    if (options == nullptr) return ACL_SUCCESS;
    if (options->numOpt > 0 && options->options == nullptr) {
        return fail(ACL_ERROR_INVALID_PARAM, "options->options is NULL but numOpt is %zu", options->numOpt);
    }
    for (size_t i = 0; i < options->numOpt; ++i) {
        const long long type = enum_value(options->options[i].type);
        switch (type) {
            case ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD:
            case ACL_RT_BINARY_LOAD_OPT_MAGIC:
                break;  // meaningful on an NPU only
            case ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE:
                return fail(ACL_ERROR_FEATURE_UNSUPPORTED,
                            "ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE (AI CPU kernels) is not supported");
            default:
                return fail(ACL_ERROR_INVALID_PARAM, "option %zu has unknown type %lld", i, type);
        }
    }
    return ACL_SUCCESS;
}

/* dlsym on a handle also searches the object's dependencies (libc...): accept only symbols
 * defined by the kernel binary itself. */
bool defined_in(void* dl, void* symbol) {
    struct link_map* object = nullptr;
    struct link_map* owner = nullptr;
    Dl_info info;
    if (dlinfo(dl, RTLD_DI_LINKMAP, &object) != 0) return false;
    if (dladdr1(symbol, &info, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) == 0) return false;
    return owner == object;
}

aclError find_function(KernelBinary& bin, const char* name, KernelFunc** out) {
    std::lock_guard<std::mutex> lock(bin.m);
    auto it = bin.funcs.find(name);
    if (it != bin.funcs.end()) {
        *out = it->second.get();
        return ACL_SUCCESS;
    }
    void* symbol = nullptr;
    if (bin.image.base != nullptr) {
        auto found = bin.image.functions.find(name);
        symbol = found == bin.image.functions.end() ? nullptr : found->second;
    } else {
        symbol = dlsym(bin.dl, name);
        if (symbol != nullptr && !defined_in(bin.dl, symbol)) symbol = nullptr;
    }
    if (symbol == nullptr) {
        return fail(ACL_ERROR_KERNEL_NOT_FOUND, "kernel '%s' is not exported by binary %p", name,
                    static_cast<void*>(&bin));
    }
    auto func = std::make_unique<KernelFunc>();
    func->entry = reinterpret_cast<Om2KernelEntry>(symbol);
    func->name = name;
    *out = func.get();
    bin.funcs.emplace(name, std::move(func));
    return ACL_SUCCESS;
}

aclError check_launch_cfg(const aclrtLaunchKernelCfg* cfg) {
    if (cfg == nullptr) return ACL_SUCCESS;
    if (cfg->numAttrs > 0 && cfg->attrs == nullptr) {
        return fail(ACL_ERROR_INVALID_PARAM, "cfg->attrs is NULL but numAttrs is %zu", cfg->numAttrs);
    }
    for (size_t i = 0; i < cfg->numAttrs; ++i) {  // every known attribute is accepted and ignored
        const long long id = enum_value(cfg->attrs[i].id);
        if (id < ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE || id > ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT) {
            return fail(ACL_ERROR_INVALID_PARAM, "launch attribute %zu has unknown id %lld", i, id);
        }
    }
    return ACL_SUCCESS;
}

Task kernel_task(const KernelFunc& func, const void* args, uint32_t num_blocks, const char* api) {
    Task t;
    t.type = TaskType::kKernel;
    t.api = api;
    t.entry = func.entry;
    t.args = args;
    t.num_blocks = num_blocks == 0 ? 1 : num_blocks;
    t.threads = om2rtGetIssueThreadCount();
    return t;
}

aclError launch_kernel(aclrtFuncHandle func_handle, uint32_t num_blocks, const void* args, size_t args_size,
                       const aclrtLaunchKernelCfg* cfg, aclrtStream stream_handle, const char* api) {
    KernelFunc* func = nullptr;
    Stream* stream = nullptr;
    RETURN_IF_ERROR(resolve(func_handle, "funcHandle", &func));
    if (args == nullptr && args_size != 0) {
        return fail(ACL_ERROR_INVALID_PARAM, "argsData is NULL but argsSize is %zu", args_size);
    }
    RETURN_IF_ERROR(check_launch_args(args, args_size));
    RETURN_IF_ERROR(check_launch_cfg(cfg));
    RETURN_IF_ERROR(resolve_stream_or_default(stream_handle, &stream));
    return submit(stream, kernel_task(*func, args, num_blocks, api));
}

}  // namespace
}  // namespace om2rt

using namespace om2rt;

// =============================================================================================
// kernel binaries and launch
// =============================================================================================

extern "C" aclError aclrtBinaryLoadFromData(const void* data, size_t length, const aclrtBinaryLoadOptions* options,
                                            aclrtBinHandle* binHandle) {
    return guarded("aclrtBinaryLoadFromData", [&]() -> aclError {
        if (binHandle == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "binHandle is NULL");
        if (data == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "data is NULL");
        if (length < SELFMAG || memcmp(data, ELFMAG, SELFMAG) != 0) {
            return fail(ACL_ERROR_INVALID_PARAM, "data (%zu bytes) is not an ELF kernel binary (no ELF magic)", length);
        }
        RETURN_IF_ERROR(check_load_options(options));
        auto bin = std::make_unique<KernelBinary>();
        char why[256];
        if (!om2_elf::CheckSharedObject(data, length, why, sizeof why)) {
            return fail(ACL_ERROR_INVALID_FILE, "refusing a kernel binary of %zu bytes before loading it: %s", length, why);
        }
        /* a plain kernel is mapped without the dynamic loader; one that needs it is dlopen'ed */
        const om2_elf::MapResult mapped = om2_elf::LightLoaderEnabled()
                                              ? om2_elf::MapKernel(data, length, &bin->image, why, sizeof why)
                                              : om2_elf::MapResult::kDeclined;
        if (mapped == om2_elf::MapResult::kFailed) {
            return fail(ACL_ERROR_BAD_ALLOC, "cannot map a kernel binary of %zu bytes: %s", length, why);
        }
        if (mapped == om2_elf::MapResult::kDeclined) {
            RETURN_IF_ERROR(load_shared_object(data, length, &bin->dl, RTLD_LOCAL));
        }
        *binHandle = bin.release();
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char* kernelName,
                                           aclrtFuncHandle* funcHandle) {
    return guarded("aclrtBinaryGetFunction", [&]() -> aclError {
        KernelBinary* bin = nullptr;
        KernelFunc* func = nullptr;
        RETURN_IF_ERROR(resolve(binHandle, "binHandle", &bin));
        if (kernelName == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "kernelName is NULL");
        if (funcHandle == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "funcHandle is NULL");
        RETURN_IF_ERROR(find_function(*bin, kernelName, &func));
        *funcHandle = func;
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle) {
    return guarded("aclrtBinaryUnLoad", [&]() -> aclError {
        KernelBinary* bin = nullptr;
        RETURN_IF_ERROR(resolve(binHandle, "binHandle", &bin));
        if (bin->image.base != nullptr) {
            om2_elf::UnmapKernel(&bin->image);
            delete bin;
            return ACL_SUCCESS;
        }
        const bool closed = dlclose(bin->dl) == 0;
        const char* why = closed ? nullptr : dlerror();
        delete bin;  // the handle is gone either way
        if (!closed) return fail(ACL_ERROR_RT_FAILURE, "dlclose failed: %s", why != nullptr ? why : "unknown error");
        return ACL_SUCCESS;
    });
}

extern "C" aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData,
                                      size_t argsSize, aclrtStream stream) {
    return guarded("aclrtLaunchKernel", [&] {
        return launch_kernel(funcHandle, numBlocks, argsData, argsSize, nullptr, stream, "aclrtLaunchKernel");
    });
}

extern "C" aclError aclrtLaunchKernelV2(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData,
                                        size_t argsSize, aclrtLaunchKernelCfg* cfg, aclrtStream stream) {
    return guarded("aclrtLaunchKernelV2", [&] {
        return launch_kernel(funcHandle, numBlocks, argsData, argsSize, cfg, stream, "aclrtLaunchKernelV2");
    });
}

