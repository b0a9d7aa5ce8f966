/*
 * om2_model_support.h -- small helpers every generated model library includes: the static
 * table row types, the thread-local last-error record and the checks around ACL calls.
 * Kept here (not re-emitted per model) so that generated sources hold only the model.
 */
#ifndef OM2_OM2_MODEL_SUPPORT_H
#define OM2_OM2_MODEL_SUPPORT_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>

#include "acl/acl.h"
#include "om2/om2_model_api.h"

namespace om2 {

/* Where an args slot points. Values follow GertModelArgKind; CONSTANT uses CUSTOM_VALUE (7). */
enum Om2ArgKind : uint32_t {
    OM2_ARG_INPUT = GERT_MODEL_ARG_INPUT,
    OM2_ARG_OUTPUT = GERT_MODEL_ARG_OUTPUT,
    OM2_ARG_WORKSPACE = GERT_MODEL_ARG_WORKSPACE,
    OM2_ARG_CONSTANT = GERT_MODEL_ARG_CUSTOM_VALUE,
};

/* GE's OpDispatchType (om2_codegen_types.h). */
enum Om2DispatchType : uint32_t {
    OM2_DISPATCH_AICORE = 0,
    OM2_DISPATCH_END_GRAPH = 6,
};

/* The task and kernel types the generated tables use (GE's ModelTaskType and ccKernelType). */
enum Om2ModelTaskType : uint32_t {
    MODEL_TASK_KERNEL = 0,
    MODEL_TASK_MEMCPY_ASYNC = 13,
    MODEL_TASK_END_GRAPH = 19,
    MODEL_TASK_CUSTOM_KERNEL = 50,
};

enum Om2CcKernelType : uint32_t {
    CC_KERNEL_TE = 2,
    CC_KERNEL_CUSTOMIZED = 3,
    CC_KERNEL_INVALID = 10000,
};

/* A model input or output. */
struct Om2IoDesc {
    const char *name;
    aclDataType data_type;
    uint64_t size;          /* bytes */
    uint64_t dim_num;
    const int64_t *dims;
};

/* A kernel binary of data/kernels_<arch>/ and the entry it exports. */
struct Om2KernelBin {
    const char *bin_file;   /* also the bin id in the process-wide bin-handle store */
    const char *entry;
};

/* One 8-byte address slot of the args table. */
struct Om2ArgSlot {
    uint32_t args_offset;   /* byte offset in the args table */
    Om2ArgKind kind;
    uint32_t index;         /* input/output index, or constants blob index */
    uint64_t offset;        /* byte offset inside that buffer */
};

/* One task of the dispatch table (GE's kOpDefs). */
struct Om2OpDef {
    Om2DispatchType dispatch_type;
    uint32_t task_type;     /* ModelTaskType */
    uint32_t kernel_type;   /* ccKernelType */
    uint32_t kernel;        /* index into kKernelBins */
    uint32_t block_dim;
    uint32_t args_offset;   /* this task's args in the args table */
    uint32_t args_size;     /* address slots + tiling bytes */
    uint32_t first_slot;    /* its address slots: kArgSlots[first_slot, first_slot + slot_num) */
    uint32_t slot_num;
    uint32_t first_tiling;  /* its tiling words: kTilingData[first_tiling, first_tiling + tiling_num) */
    uint32_t tiling_num;
    const char *op_name;    /* source ONNX node */
    const char *op_type;
};

inline std::string &LastError() {
    static thread_local std::string message;
    return message;
}

inline int32_t Fail(int32_t code, const char *format, ...) __attribute__((format(printf, 2, 3)));
inline int32_t Fail(int32_t code, const char *format, ...) {
    char buffer[1024];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buffer, sizeof(buffer), format, args);
    va_end(args);
    LastError() = buffer;
    return code;
}

}  // namespace om2

/* Runs an ACL call; on failure records "<what>: <call> returned <code> (<runtime message>)". */
#define OM2_CHECK_ACL(call, what)                                                                    \
    do {                                                                                             \
        const aclError om2_rc_ = (call);                                                             \
        if (om2_rc_ != ACL_SUCCESS) {                                                                \
            const char *om2_msg_ = aclGetRecentErrMsg();                                             \
            return ::om2::Fail(om2_rc_, "%s: %s returned %d (%s)", (what), #call, om2_rc_,           \
                               om2_msg_ != nullptr ? om2_msg_ : "no runtime message");               \
        }                                                                                            \
    } while (0)

#endif /* OM2_OM2_MODEL_SUPPORT_H */
