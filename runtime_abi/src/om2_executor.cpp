/*
 * om2_executor.cpp -- the native half of om2gen's executor (the Python half is
 * om2gen/runtime/). It provides what GE's Om2ModelExecutor provides to a model library:
 *   - loading a shared object from memory (memfd + dlopen, never from disk; the runtime's loader),
 *   - resolving the model's C-ABI entry points,
 *   - the load callbacks: launch_func and the process-wide kernel bin-handle store,
 *   - thin call wrappers so that one GertModelRun from Python is one native call.
 */
#include "om2/om2_executor.h"

#include "om2/om2_cpu_runtime.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

void SetError(char *err, size_t err_len, const std::string &msg) {
    if (err != nullptr && err_len > 0) {
        std::snprintf(err, err_len, "%s", msg.c_str());
    }
}

/* ---- bin-handle store: one loaded kernel binary per bin id and content, shared by all models ---- */

struct BinEntry {
    aclrtBinHandle handle;
    uint64_t refs;
};

std::recursive_mutex &StoreMutex() {
    static std::recursive_mutex mutex;
    return mutex;
}

std::map<std::string, BinEntry> &Store() {
    static std::map<std::string, BinEntry> store;
    return store;
}

int32_t LockStore(void *) {
    StoreMutex().lock();
    return 0;
}

int32_t UnlockStore(void *) {
    StoreMutex().unlock();
    return 0;
}

/* The store's key of a binary: its file name and the content digest the executor gave for it
 * (Om2xInstance); false when the executor gave none. */
bool StoreKey(void *instance, const char *bin_id, std::string *key) {
    const Om2xInstance *in = static_cast<const Om2xInstance *>(instance);
    if (in == nullptr || bin_id == nullptr) return false;
    for (uint64_t i = 0; i < in->bin_num; ++i) {
        if (std::strcmp(in->bin_files[i], bin_id) == 0 && in->bin_digests[i] != nullptr && in->bin_digests[i][0]) {
            *key = std::string(bin_id) + "@" + in->bin_digests[i];
            return true;
        }
    }
    return false;
}

int32_t QueryStore(void *instance, const char *bin_id, aclrtBinHandle *handle) {
    std::string key;
    if (handle == nullptr || !StoreKey(instance, bin_id, &key)) return -1;
    std::lock_guard<std::recursive_mutex> guard(StoreMutex());
    auto it = Store().find(key);
    *handle = (it == Store().end()) ? nullptr : it->second.handle;
    return 0;
}

int32_t SaveStore(void *instance, const char *bin_id, aclrtBinHandle handle) {
    std::string key;
    if (handle == nullptr || !StoreKey(instance, bin_id, &key)) return -1;
    std::lock_guard<std::recursive_mutex> guard(StoreMutex());
    auto it = Store().find(key);
    if (it == Store().end()) {
        Store()[key] = BinEntry{handle, 1};
    } else {
        it->second.refs += 1;  /* the stored handle wins; the caller reuses it */
    }
    return 0;
}

int32_t ReleaseStore(void *instance, const char *bin_id, uint8_t *need_unload) {
    std::string key;
    if (need_unload == nullptr || !StoreKey(instance, bin_id, &key)) return -1;
    std::lock_guard<std::recursive_mutex> guard(StoreMutex());
    *need_unload = 0;
    auto it = Store().find(key);
    if (it == Store().end()) return 0;
    if (--it->second.refs == 0) {
        Store().erase(it);
        *need_unload = 1;
    }
    return 0;
}

/* ---- launch_func: the executor launches every task, so dump/profiling can wrap it ---- */

uint64_t NowNs() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int32_t ReportBaseInfo(void *instance, const GertModelBaseInfo *info) {
    if (instance != nullptr && info != nullptr) {
        static_cast<Om2xInstance *>(instance)->rt_model_handle = info->rt_model_handle;
    }
    return 0;
}

std::atomic<uint64_t> &CustomLaunches() {
    static std::atomic<uint64_t> count{0};
    return count;
}

int32_t LaunchCustomKernel(GertModelTaskLaunchInfo *info) {
    const GertModelLaunchCustomKernelParams &p = info->launch_params->launch_custom_kernel_params;
    if (p.func_launch_custom_kernel == nullptr || p.eager_op == nullptr) return ACL_ERROR_INVALID_PARAM;
    info->task_info->launch_begin = NowNs();
    CustomLaunches().fetch_add(1);
    return p.func_launch_custom_kernel(p.eager_op, p.eager_op_context);
}

int32_t LaunchTask(void *instance, GertModelTaskLaunchInfo *info) {
    if (info == nullptr || info->task_info == nullptr) return ACL_SUCCESS;
    if (info->launch_params == nullptr) return ACL_ERROR_INVALID_PARAM;
    if (info->launch_type == ACL_RT_LAUNCH_CUSTOM_KERNEL) return LaunchCustomKernel(info);
    if (info->launch_type != ACL_RT_LAUNCH_KERNEL_V2) return ACL_ERROR_FEATURE_UNSUPPORTED;
    const GertModelLaunchKernelV2Params &p = info->launch_params->launch_kernel_v2_params;
    aclrtLaunchKernelCfg *cfg = p.config;
    if (cfg != nullptr) {
        for (size_t i = 0; i < cfg->numAttrs; ++i) {
            /* the executor owns data dump; a model never switches it on by itself */
            if (cfg->attrs[i].id == ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP) cfg->attrs[i].value.isDataDump = 0;
        }
    }
    info->task_info->launch_begin = NowNs();
    aclError rc = aclrtLaunchKernelV2(p.func_handle, p.block_dim, p.args_data, p.args_size, cfg, p.stream);
    if (rc == ACL_SUCCESS && instance != nullptr) {
        info->task_info->task_id = static_cast<Om2xInstance *>(instance)->launched_tasks++;
    }
    return rc;
}

}  // namespace

extern "C" {

void om2x_fill_load_callbacks(GertModelLoadCallbacks *callbacks) {
    std::memset(callbacks, 0, sizeof(*callbacks));
    callbacks->struct_size = sizeof(*callbacks);
    callbacks->report_model_base_info = ReportBaseInfo;
    callbacks->launch_func = LaunchTask;
    callbacks->lock_bin_handle_store = LockStore;
    callbacks->unlock_bin_handle_store = UnlockStore;
    callbacks->query_bin_handle_from_store = QueryStore;
    callbacks->save_bin_handle_to_store = SaveStore;
    callbacks->release_bin_handle_from_store = ReleaseStore;
}

uint64_t om2x_custom_launch_count(void) { return CustomLaunches().load(); }

uint64_t om2x_bin_store_size(void) {
    std::lock_guard<std::recursive_mutex> guard(StoreMutex());
    return Store().size();
}

int32_t om2x_dlopen_from_memory(const void *data, size_t size, const char *name, int global,
                                void **handle, char *err, size_t err_len) {
    *handle = nullptr;
    if (om2rtLoadSharedObjectFromMemory(data, size, global, handle) != ACL_SUCCESS) {
        const char *why = aclGetRecentErrMsg();
        SetError(err, err_len, std::string("loading ") + name + " failed: " + (why ? why : "unknown error"));
        return -1;
    }
    return 0;
}

int32_t om2x_resolve_entry_points(void *lib, Om2xEntryPoints *ep, char *err, size_t err_len) {
    struct Sym {
        const char *name;
        void **slot;
    } syms[] = {
        {"GertModelGetAbiVersion", reinterpret_cast<void **>(&ep->get_abi_version)},
        {"GertModelGetLastError", reinterpret_cast<void **>(&ep->get_last_error)},
        {"GertModelLoad", reinterpret_cast<void **>(&ep->load)},
        {"GertModelRun", reinterpret_cast<void **>(&ep->run)},
        {"GertModelRunAsync", reinterpret_cast<void **>(&ep->run_async)},
        {"GertModelUnload", reinterpret_cast<void **>(&ep->unload)},
    };
    for (const Sym &s : syms) {
        *s.slot = dlsym(lib, s.name);
        if (*s.slot == nullptr) {
            SetError(err, err_len, std::string("the model library does not export ") + s.name);
            return -1;
        }
    }
    return 0;
}

int32_t om2x_dlclose(void *lib) { return lib == nullptr ? 0 : dlclose(lib); }

int32_t om2x_protect_read_only(void *addr, size_t size) { return mprotect(addr, size, PROT_READ); }

const void *om2x_model_tables(void *lib) {
    using GetTables = const void *(*)(void);
    GetTables get = lib == nullptr ? nullptr : reinterpret_cast<GetTables>(dlsym(lib, "Om2ModelGetTables"));
    return get == nullptr ? nullptr : get();
}

uint32_t om2x_abi_version(const Om2xEntryPoints *ep) { return ep->get_abi_version(); }

const char *om2x_last_error(const Om2xEntryPoints *ep) { return ep->get_last_error(); }

int32_t om2x_model_load(const Om2xEntryPoints *ep, const GertModelLoadConfig *config, GertModelHandle *handle) {
    GertModelLoadOutput out = {sizeof(GertModelLoadOutput)};
    return ep->load(config, handle, &out);
}

int32_t om2x_model_run(const Om2xEntryPoints *ep, GertModelHandle handle, const GertModelRunConfig *config) {
    GertModelRunOutput out = {sizeof(GertModelRunOutput), 0, nullptr};
    return ep->run(handle, config, &out);
}

int32_t om2x_model_run_dims(const Om2xEntryPoints *ep, GertModelHandle handle, const GertModelRunConfig *config,
                            int64_t *const *output_dims, uint64_t output_num) {
    GertModelRunOutput out = {sizeof(GertModelRunOutput), output_num, output_dims};
    return ep->run(handle, config, &out);
}

int32_t om2x_model_run_async(const Om2xEntryPoints *ep, GertModelHandle handle, aclrtStream stream,
                             const GertModelRunConfig *config) {
    GertModelRunOutput out = {sizeof(GertModelRunOutput), 0, nullptr};
    return ep->run_async(handle, stream, config, &out);
}

int32_t om2x_model_unload(const Om2xEntryPoints *ep, GertModelHandle handle) {
    GertModelUnloadConfig cfg = {sizeof(GertModelUnloadConfig)};
    GertModelUnloadOutput out = {sizeof(GertModelUnloadOutput)};
    return ep->unload(handle, &cfg, &out);
}

}  // extern "C"
