/*
 * om2_executor.h -- native helpers of om2gen's executor (see runtime_abi/src/om2_executor.cpp).
 * Not part of the model ABI: only the executor uses these.
 */
#ifndef OM2_OM2_EXECUTOR_H
#define OM2_OM2_EXECUTOR_H

#include "om2/om2_model_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the executor keeps per loaded model; passed to the model as instance_handle. */
typedef struct Om2xInstance {
    const void *rt_model_handle;  /* reported by the model through report_model_base_info */
    uint64_t launched_tasks;      /* tasks launched through launch_func (capture time) */
    /* The content digest (hex) of each kernel binary the executor passes to GertModelLoad, by
     * file name. The process-wide bin-handle store keys a binary by name and digest: a binary
     * that has a loaded one's name but other bytes is another binary, never the loaded one. */
    const char *const *bin_files;
    const char *const *bin_digests;
    uint64_t bin_num;
} Om2xInstance;

typedef struct Om2xEntryPoints {
    GertModelGetAbiVersionFunc get_abi_version;
    GertModelGetLastErrorFunc get_last_error;
    GertModelLoadFunc load;
    GertModelRunFunc run;
    GertModelRunAsyncFunc run_async;
    GertModelUnloadFunc unload;
} Om2xEntryPoints;

void om2x_fill_load_callbacks(GertModelLoadCallbacks *callbacks);
uint64_t om2x_bin_store_size(void);
/* Custom-kernel launches (custom operators' Execute calls) made through launch_func so far. */
uint64_t om2x_custom_launch_count(void);
/* Writes `data` to a memfd and dlopens /proc/self/fd/N. On failure returns -1 and a message in err. */
int32_t om2x_dlopen_from_memory(const void *data, size_t size, const char *name, int global,
                                void **handle, char *err, size_t err_len);
int32_t om2x_resolve_entry_points(void *lib, Om2xEntryPoints *ep, char *err, size_t err_len);
int32_t om2x_dlclose(void *lib);
/* The library's own tables (its Om2ModelGetTables export: a const Om2ModelTables *,
 * om2/om2_model_tables.h), NULL when it has none. */
const void *om2x_model_tables(void *lib);
/* mprotect(addr, size, PROT_READ): 0, or -1 with errno set. */
int32_t om2x_protect_read_only(void *addr, size_t size);
uint32_t om2x_abi_version(const Om2xEntryPoints *ep);
const char *om2x_last_error(const Om2xEntryPoints *ep);
int32_t om2x_model_load(const Om2xEntryPoints *ep, const GertModelLoadConfig *config, GertModelHandle *handle);
int32_t om2x_model_run(const Om2xEntryPoints *ep, GertModelHandle handle, const GertModelRunConfig *config);
/* The same, for a dynamic model: the run's output dims are written to output_dims[i]. */
int32_t om2x_model_run_dims(const Om2xEntryPoints *ep, GertModelHandle handle, const GertModelRunConfig *config,
                            int64_t *const *output_dims, uint64_t output_num);
int32_t om2x_model_run_async(const Om2xEntryPoints *ep, GertModelHandle handle, aclrtStream stream,
                             const GertModelRunConfig *config);
int32_t om2x_model_unload(const Om2xEntryPoints *ep, GertModelHandle handle);

#ifdef __cplusplus
}
#endif

#endif /* OM2_OM2_EXECUTOR_H */
