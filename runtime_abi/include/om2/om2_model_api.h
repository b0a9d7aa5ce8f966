/*
 * om2_model_api.h -- the C ABI between an OM2 executor and a generated model library
 * (lib<model>_<hash>_om2.so).
 *
 * Follows GE's GertModel* ABI (inc/framework/om2/model_api/om2_model_api.h):
 *   - C only: no C++ types or exceptions cross this boundary.
 *   - Every extensible struct starts with `uint64_t struct_size` (= sizeof as the caller
 *     compiled it); fields are only ever appended; padding is explicit (abi_pad_N).
 *   - Published symbols, prototypes and enum values are frozen. A new capability is a new
 *     exported symbol, probed with dlsym.
 *   - The executor checks OM2_MODEL_ABI_VERSION (from manifest.json's abi_version, then from
 *     the exported GertModelGetAbiVersion) before it calls anything else.
 *
 * Ownership: unless a comment says otherwise, pointers passed into a call are borrowed for
 * the duration of that call only. GertModelHandle is created by GertModelLoad and released
 * by GertModelUnload (the creator side releases).
 *
 * Status codes: 0 (ACL_SUCCESS) on success, an aclError value otherwise. After a failure,
 * GertModelGetLastError() returns a message for the calling thread.
 */
#ifndef OM2_OM2_MODEL_API_H
#define OM2_OM2_MODEL_API_H

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bump when a published struct, enum value or symbol changes incompatibly (never expected),
 * or when a new required capability is added. History:
 *   1: GertModelLoad/Run/RunAsync/Unload, KERNEL_V2 launches, bin-handle store.
 *   2: ACL_RT_LAUNCH_CUSTOM_KERNEL launches (custom operators, om2/custom_op.h); custom-op
 *      binaries follow the kernel binaries in GertModelLoadConfig.bin_files. */
#define OM2_MODEL_ABI_VERSION 2u

#if defined(__GNUC__)
#define OM2_API __attribute__((visibility("default")))
#else
#define OM2_API
#endif

typedef void *GertModelHandle;

/* A tensor handed across the ABI: the C counterpart of gert::Tensor. */
typedef struct GertTensor {
    uint64_t struct_size;
    void *data;              /* borrowed; device (here: host) memory of at least `size` bytes */
    uint64_t size;           /* bytes */
    int64_t data_type;       /* aclDataType */
    uint64_t dim_num;
    const int64_t *dims;     /* borrowed; dim_num entries */
} GertTensor;

typedef enum GertModelArgKind {
    GERT_MODEL_ARG_INPUT = 0,
    GERT_MODEL_ARG_OUTPUT = 1,
    GERT_MODEL_ARG_WORKSPACE = 2,
    GERT_MODEL_ARG_TILING = 3,
    GERT_MODEL_ARG_SHAPE_INFO = 4,
    GERT_MODEL_ARG_LEVEL1_DESC = 5,
    GERT_MODEL_ARG_PLACEHOLDER = 6,
    GERT_MODEL_ARG_CUSTOM_VALUE = 7,
    GERT_MODEL_ARG_FFTS_ADDR = 8,
    GERT_MODEL_ARG_EVENT_ADDR = 9,
    GERT_MODEL_ARG_OVERFLOW_ADDR = 10,
    GERT_MODEL_ARG_EMPTY_ADDR = 11,
    GERT_MODEL_ARG_INVALID = 0xFFFF
} GertModelArgKind;

typedef struct GertModelTaskIoEntry {
    uint64_t struct_size;
    const GertTensor *tensor;
    uint64_t offset;         /* byte offset of the address slot in the args buffer */
} GertModelTaskIoEntry;

typedef struct GertModelArgSlotInfo {
    uint64_t struct_size;
    uint64_t kind;           /* GertModelArgKind */
    uint64_t flags;
    uint64_t args_offset;
    uint64_t value;
    uint64_t related_index;
    uint64_t event_id;
    uint64_t level1_target_offset;
} GertModelArgSlotInfo;

typedef struct GertModelTaskRawInfo {
    uint64_t struct_size;
    uint64_t need_assert_or_printf;
    uint64_t arg_num;
    const GertModelArgSlotInfo *args;
} GertModelTaskRawInfo;

/* Task description handed to launch_func, for dump and profiling (DFX). */
typedef struct GertModelTaskDesc {
    uint64_t struct_size;
    const char *op_name;
    const char *op_type;
    uint64_t task_id;
    uint64_t stream_id;
    uint64_t context_id;
    uint64_t thread_id;
    uint64_t block_dim;
    uint64_t op_desc_id;
    uintptr_t args_base;
    uint64_t args_size;
    uint64_t input_num;
    const GertModelTaskIoEntry *inputs;
    uint64_t output_num;
    const GertModelTaskIoEntry *outputs;
    uint64_t workspace_num;
    const uint64_t *workspace_addrs;
    const uint64_t *workspace_sizes;
    uint64_t task_type;      /* ModelTaskType (MODEL_TASK_KERNEL = 0, ...) */
    uint64_t kernel_type;    /* ccKernelType, 10000 = INVALID */
    void *stream;
    uint64_t is_raw_address;
    const GertModelTaskRawInfo *task_raw_info;
    uint64_t launch_begin;   /* filled by the executor */
    const char *original_op_names;
    uint64_t input_mem_size;
    uint64_t output_mem_size;
    uint64_t workspace_mem_size;
    uint64_t weight_mem_size;
    uint64_t op_impl_mode;
    uint64_t prof_ge_task_type;
    uint64_t prof_block_dim;
} GertModelTaskDesc;

typedef enum GertModelTaskLaunchType {
    ACL_RT_LAUNCH_KERNEL_V2 = 0,         /* aclrtLaunchKernelV2 */
    RT_STARS_TASK_LAUNCH_WITH_FLAG = 1,  /* DSA/STARS tasks; not supported by the CPU runtime */
    ACL_RT_LAUNCH_CUSTOM_KERNEL = 2      /* a custom operator's Execute, during capture only (ABI 2) */
} GertModelTaskLaunchType;

typedef struct GertModelLaunchKernelV2Params {
    uint64_t struct_size;
    aclrtFuncHandle func_handle;
    uint32_t block_dim;
    uint32_t reserved_1;
    const void *args_data;   /* device memory: the task's slice of the args table */
    size_t args_size;
    aclrtLaunchKernelCfg *config;
    aclrtStream stream;
} GertModelLaunchKernelV2Params;

typedef struct GertModelLaunchStarsTaskWithFlagParams {
    uint64_t struct_size;
    const void *task_sqe;
    uint32_t sqe_len;
    uint32_t reserved_1;
    aclrtStream stream;
    uint32_t flag;
    uint32_t reserved_2;
} GertModelLaunchStarsTaskWithFlagParams;

/* ACL_RT_LAUNCH_CUSTOM_KERNEL: the executor wraps dump/profiling around the call and invokes
 * func_launch_custom_kernel(eager_op, eager_op_context), which runs the operator's Execute; the
 * kernels Execute launches on the capture stream are recorded into the model. */
typedef struct GertModelLaunchCustomKernelParams {
    uint64_t struct_size;
    int32_t (*func_launch_custom_kernel)(void *eager_op, void *eager_op_context);
    void *eager_op;              /* an om2::BaseCustomOp* (om2/custom_op.h), owned by the model */
    void *eager_op_context;      /* an om2::EagerOpExecutionContext*, valid during the call */
} GertModelLaunchCustomKernelParams;

typedef union GertModelTaskLaunchParams {
    GertModelLaunchKernelV2Params launch_kernel_v2_params;
    GertModelLaunchStarsTaskWithFlagParams launch_stars_task_params;
    GertModelLaunchCustomKernelParams launch_custom_kernel_params;
} GertModelTaskLaunchParams;

typedef struct GertModelTaskLaunchInfo {
    uint64_t struct_size;
    uint64_t launch_type;    /* GertModelTaskLaunchType */
    GertModelTaskDesc *task_info;
    const GertModelTaskLaunchParams *launch_params;
} GertModelTaskLaunchInfo;

typedef struct GertModelBaseInfo {
    uint64_t struct_size;
    const void *rt_model_handle;  /* the aclmdlRI built by the model library */
} GertModelBaseInfo;

/* Callbacks the executor gives the model at load. `instance` is GertModelLoadConfig.instance_handle.
 * The bin-handle store is process-wide: one loaded aclrtBinHandle per bin id, shared by every
 * loaded model, with reference counts. lock is recursive. query sets *handle to NULL when the id
 * is unknown. save stores the handle (or, when the id is present, keeps the stored one and adds a
 * reference). release drops a reference and sets *need_unload to 1 when it was the last one. */
typedef struct GertModelLoadCallbacks {
    uint64_t struct_size;
    int32_t (*report_model_base_info)(void *instance, const GertModelBaseInfo *info);
    int32_t (*launch_func)(void *instance, GertModelTaskLaunchInfo *info);
    int32_t (*lock_bin_handle_store)(void *instance);
    int32_t (*unlock_bin_handle_store)(void *instance);
    int32_t (*query_bin_handle_from_store)(void *instance, const char *bin_id, aclrtBinHandle *handle);
    int32_t (*save_bin_handle_to_store)(void *instance, const char *bin_id, aclrtBinHandle handle);
    int32_t (*release_bin_handle_from_store)(void *instance, const char *bin_id, uint8_t *need_unload);
} GertModelLoadCallbacks;

typedef struct GertModelLoadConfig {
    uint64_t struct_size;
    const char **bin_files;      /* kernel binary names (file names without directory) */
    const void **bin_data;       /* borrowed for the duration of GertModelLoad */
    uint64_t *bin_size;
    uint64_t bin_num;
    void **constants;            /* one device pointer per constants blob; must outlive the model */
    void **var_addrs;
    void *work_ptr;              /* NULL: the model allocates its workspace itself */
    uint64_t *session_id;
    uint64_t model_id;
    void *instance_handle;
    const GertModelLoadCallbacks *callbacks;
    int64_t priority;
    uint64_t reuse_zero_copy;
    aclmdlRI external_rt_model;
    aclrtStream *external_streams;
    uint64_t external_stream_num;
    aclrtEvent *external_events;
    uint64_t external_event_num;
    void **external_labels;
    uint64_t external_label_num;
    void **external_notifies;
    uint64_t external_notify_num;
    /* appended by om2gen (ABI 1) */
    uint64_t constant_num;
    uint64_t work_size;          /* bytes available at work_ptr when work_ptr != NULL */
} GertModelLoadConfig;

typedef struct GertModelRunReportInfo {
    uint64_t struct_size;
    uint64_t model_id;
    aclrtStream stream;
    uint64_t is_async;
} GertModelRunReportInfo;

typedef struct GertModelRunCallbacks {
    uint64_t struct_size;
    int32_t (*report_run_info_preprocess)(void *instance, const GertModelRunReportInfo *info);
    int32_t (*report_run_info_postprocess)(void *instance, const GertModelRunReportInfo *info);
} GertModelRunCallbacks;

typedef struct GertModelRunConfig {
    uint64_t struct_size;
    uint64_t input_count;
    GertTensor **input_data;     /* borrowed; addresses must stay valid until the run completes */
    uint64_t output_count;
    GertTensor **output_data;
    uint64_t stream_sync_timeout_ms;  /* 0 or UINT64_MAX: wait forever */
    const GertModelRunCallbacks *run_callbacks;  /* may be NULL */
} GertModelRunConfig;

typedef struct GertModelLoadOutput { uint64_t struct_size; } GertModelLoadOutput;
typedef struct GertModelRunOutput {
    uint64_t struct_size;
    /* appended by om2gen (ABI 1): a dynamic model writes each output's dims of this run into
     * output_dims[i] (room for the output's rank) when output_dims is not NULL */
    uint64_t output_num;
    int64_t *const *output_dims;
} GertModelRunOutput;
typedef struct GertModelUnloadConfig { uint64_t struct_size; } GertModelUnloadConfig;
typedef struct GertModelUnloadOutput { uint64_t struct_size; } GertModelUnloadOutput;

/* Exported by every model library. */
OM2_API uint32_t GertModelGetAbiVersion(void);
OM2_API const char *GertModelGetLastError(void);
OM2_API int32_t GertModelLoad(const GertModelLoadConfig *config, GertModelHandle *handle,
                              GertModelLoadOutput *output);
OM2_API int32_t GertModelRun(GertModelHandle handle, const GertModelRunConfig *config,
                             GertModelRunOutput *output);
OM2_API int32_t GertModelRunAsync(GertModelHandle handle, aclrtStream stream,
                                  const GertModelRunConfig *config, GertModelRunOutput *output);
OM2_API int32_t GertModelUnload(GertModelHandle handle, const GertModelUnloadConfig *config,
                                GertModelUnloadOutput *output);
OM2_API uint64_t GertModelGetStreamNum(void);
OM2_API uint64_t GertModelGetEventNum(void);

typedef uint32_t (*GertModelGetAbiVersionFunc)(void);
typedef const char *(*GertModelGetLastErrorFunc)(void);
typedef int32_t (*GertModelLoadFunc)(const GertModelLoadConfig *, GertModelHandle *, GertModelLoadOutput *);
typedef int32_t (*GertModelRunFunc)(GertModelHandle, const GertModelRunConfig *, GertModelRunOutput *);
typedef int32_t (*GertModelRunAsyncFunc)(GertModelHandle, aclrtStream, const GertModelRunConfig *,
                                         GertModelRunOutput *);
typedef int32_t (*GertModelUnloadFunc)(GertModelHandle, const GertModelUnloadConfig *, GertModelUnloadOutput *);

#ifdef __cplusplus
}  /* extern "C" */
#define OM2_ABI_SIZE(type, size) static_assert(sizeof(type) == (size), #type " size is frozen")
#else
#define OM2_ABI_SIZE(type, size) _Static_assert(sizeof(type) == (size), #type " size is frozen")
#endif

OM2_ABI_SIZE(GertTensor, 48);
OM2_ABI_SIZE(GertModelTaskIoEntry, 24);
OM2_ABI_SIZE(GertModelArgSlotInfo, 64);
OM2_ABI_SIZE(GertModelTaskRawInfo, 32);
OM2_ABI_SIZE(GertModelTaskDesc, 256);
OM2_ABI_SIZE(GertModelLaunchKernelV2Params, 56);
OM2_ABI_SIZE(GertModelLaunchStarsTaskWithFlagParams, 40);
OM2_ABI_SIZE(GertModelTaskLaunchInfo, 32);
OM2_ABI_SIZE(GertModelLaunchCustomKernelParams, 32);
OM2_ABI_SIZE(GertModelTaskLaunchParams, 56);
OM2_ABI_SIZE(GertModelBaseInfo, 16);
OM2_ABI_SIZE(GertModelLoadCallbacks, 64);
OM2_ABI_SIZE(GertModelLoadConfig, 200);
OM2_ABI_SIZE(GertModelRunReportInfo, 32);
OM2_ABI_SIZE(GertModelRunCallbacks, 24);
OM2_ABI_SIZE(GertModelRunConfig, 56);

#endif /* OM2_OM2_MODEL_API_H */
