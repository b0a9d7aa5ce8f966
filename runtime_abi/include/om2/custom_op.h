/*
 * custom_op.h -- the custom-operator API of om2gen (the seed's "OM2 自定义算子").
 *
 * A user implements an operator in their own shared library:
 *   - PortableOp: the per-instance state that survives compilation. om2gen calls InferShape and
 *     Compile once per node at compile time (static shapes and attributes are known there, so
 *     Compile may generate or choose kernel binaries), then Serialize; the bytes are archived as
 *     data/custom_ops/binaries_<arch>/<OpType>_<hash>_CustomKernel.bin. At load time the model
 *     library creates a fresh instance and calls Deserialize with those bytes.
 *   - EagerExecuteOp: Execute(context) reads its input tensors, writes its outputs and launches
 *     its own kernels with the ACL runtime API (aclrtBinaryLoadFromData, aclrtLaunchKernelV2, ...)
 *     on context.GetStream(). It runs ONCE, while the model is being captured
 *     (aclmdlRIBuildBegin..End): the kernels it launches are recorded and replayed by every run;
 *     Execute itself is never called again. Tensor addresses are therefore fixed at capture time
 *     (om2gen places custom-op inputs and outputs in the model's workspace).
 * and registers a creator with REG_AUTO_MAPPING_OP, which runs when the library is loaded.
 *
 * The factory lives in the process that loads models (om2gen's runtime): custom-op libraries,
 * model libraries and the compiler all reach the same registry through the C functions below.
 * Objects cross library boundaries only through these virtual interfaces and C functions (and
 * the Serialize buffer, new[]-allocated by the library and delete[]d by the caller: libraries
 * must be built with the same C++ runtime as om2gen's, as GE requires for its custom ops).
 *
 * Building a library: `g++ $(om2gen config --cxxflags --ldflags) ops.cpp -o libops.so`. The
 * flags are -I<om2gen.resources.include_dir()> (this header, acl/acl.h), -std=c++17, -fPIC and
 * -shared; link against nothing: the ACL runtime and the Om2* functions below are resolved when
 * om2gen loads the library into a process that has its runtime (samples/custom_op/build.py).
 *
 * Optional outputs: an ONNX node may omit an output position by giving it the name "" (e.g.
 * `GatedMul(x, g) -> (y, "")`). Every hook sees every output position the node declares --
 * GetOutputNum() counts omitted ones too, so output i is the operator's output i in InferShape,
 * Compile and Execute alike -- and an omitted position is null: GetOutputDesc(i) returns nullptr
 * in InferShape and Compile, GetOutputTensor(i) returns nullptr in Execute (as ONNX Runtime's
 * KernelContext_GetOutput and GE's optional outputs). An operator must check before it writes.
 * In the model's tables an omitted position is described with data_type
 * OM2_CUSTOM_OUTPUT_OMITTED (ACL_DT_UNDEFINED). Omitted (absent) inputs are not supported: om2gen
 * refuses such a node at compile time.
 *
 * Launching kernels from Execute (the rules the CPU runtime enforces, as a device would):
 *   - launch on context.GetStream() only: it is the stream being captured, and a launch on any
 *     other stream is not part of the model (it would run once, at load, and never again);
 *   - the args buffer passed to aclrtLaunchKernel / aclrtLaunchKernelV2 must be device memory
 *     from aclrtMalloc (the whole argsSize bytes inside one allocation), kept alive for as long as
 *     the instance lives: the captured launch records the buffer's ADDRESS and every replay reads
 *     it. A stack or heap buffer is refused with ACL_ERROR_INVALID_PARAM and a message
 *     (aclGetRecentErrMsg) -- on a device it would be garbage by the first replay;
 *   - the tensors' `data` addresses are fixed for the model's life, so they may be written into
 *     that args buffer once, in Execute.
 *
 * Errors: a hook returns non-zero and may describe the failure with Om2CustomOpSetError. A C++
 * exception thrown by a hook is caught by om2gen, which reports its what(), the hook, the op type
 * and the node name (compile: CompileError; load: RuntimeFailure); exceptions never cross the C
 * functions below.
 *
 * Lifetimes: a creator is code inside its library, so a custom-op library is never unloaded
 * once it registered (there is no unregister); om2gen keeps it resident for the process. An
 * instance must outlive every replay of the model that captured its kernels: the model library
 * destroys its instances only after aclmdlRIDestroy.
 */
#ifndef OM2_CUSTOM_OP_H
#define OM2_CUSTOM_OP_H

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#define OM2_CUSTOM_OP_API_VERSION 1u

#if defined(__GNUC__)
#define OM2_CUSTOM_API __attribute__((visibility("default")))
#else
#define OM2_CUSTOM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- plain C types shared by the compiler, the model library and custom-op libraries ---- */

#define OM2_CUSTOM_MAX_DIMS 8

/* The data_type of an omitted optional output position (ACL_DT_UNDEFINED; see the top comment). */
#define OM2_CUSTOM_OUTPUT_OMITTED (-1)

/* A tensor description: static shape and aclDataType. */
typedef struct Om2CustomTensorDesc {
    int64_t data_type;               /* aclDataType */
    uint64_t dim_num;
    int64_t dims[OM2_CUSTOM_MAX_DIMS];
} Om2CustomTensorDesc;

/* A tensor at execution: its description and device address. */
typedef struct Om2CustomTensor {
    Om2CustomTensorDesc desc;
    void *data;                      /* device memory, valid for every replay of the model */
    uint64_t size;                   /* bytes */
} Om2CustomTensor;

typedef enum Om2CustomAttrKind {
    OM2_CUSTOM_ATTR_INT = 0,
    OM2_CUSTOM_ATTR_FLOAT = 1,
    OM2_CUSTOM_ATTR_STRING = 2,
    OM2_CUSTOM_ATTR_INTS = 3,
    OM2_CUSTOM_ATTR_FLOATS = 4
} Om2CustomAttrKind;

/* One ONNX attribute of the node. */
typedef struct Om2CustomAttr {
    const char *name;
    int32_t kind;                    /* Om2CustomAttrKind */
    uint32_t count;                  /* elements of ints/floats; 1 for INT/FLOAT */
    const int64_t *ints;
    const float *floats;
    const char *str;
} Om2CustomAttr;

/* Status codes of the interfaces below: 0 success, anything else failure (an aclError is fine).
 * After a failure, an implementation may describe it with Om2CustomOpSetError. The message is per
 * thread; Om2CustomOpSetError(NULL or "") clears it; Om2CustomOpGetError never returns NULL ("" when
 * nothing is set) and does not clear it. */
OM2_CUSTOM_API void Om2CustomOpSetError(const char *message);
OM2_CUSTOM_API const char *Om2CustomOpGetError(void);

#ifdef __cplusplus
}  /* extern "C" */

namespace om2 {

/* What InferShape and Compile see of the node. */
class OM2_CUSTOM_API CustomOpNodeInfo {
public:
    virtual ~CustomOpNodeInfo() = default;
    virtual const char *GetNodeName() const = 0;
    virtual size_t GetInputNum() const = 0;
    virtual const Om2CustomTensorDesc *GetInputDesc(size_t index) const = 0;
    /* Every output position of the node, omitted ones included. */
    virtual size_t GetOutputNum() const = 0;
    /* InferShape fills these; Compile sees them filled. nullptr for an omitted optional output. */
    virtual Om2CustomTensorDesc *GetOutputDesc(size_t index) = 0;
    virtual const Om2CustomAttr *GetAttr(const char *name) const = 0;  /* nullptr when absent */
};

/* What Execute sees: the tensors (addresses fixed for the model's life) and the capture stream. */
class OM2_CUSTOM_API EagerOpExecutionContext {
public:
    virtual ~EagerOpExecutionContext() = default;
    virtual size_t GetInputNum() const = 0;
    virtual const Om2CustomTensor *GetInputTensor(size_t index) const = 0;
    /* Every output position, omitted ones included (the same count InferShape saw). */
    virtual size_t GetOutputNum() const = 0;
    /* nullptr for an omitted optional output (the same positions InferShape saw as nullptr). */
    virtual Om2CustomTensor *GetOutputTensor(size_t index) = 0;
    /* The stream being captured: launch every kernel on it, with args in aclrtMalloc memory. */
    virtual aclrtStream GetStream() const = 0;
};

class PortableOp;
class EagerExecuteOp;

class OM2_CUSTOM_API BaseCustomOp {
public:
    virtual ~BaseCustomOp() = default;
    virtual PortableOp *AsPortable() { return nullptr; }
    virtual EagerExecuteOp *AsEager() { return nullptr; }
};

class OM2_CUSTOM_API PortableOp : public virtual BaseCustomOp {
public:
    PortableOp *AsPortable() override { return this; }
    virtual int32_t InferShape(CustomOpNodeInfo &node) = 0;
    virtual int32_t Compile(const CustomOpNodeInfo &node) = 0;
    /* Serialize: write the state to *data (allocated with new uint8_t[]; the caller delete[]s it). */
    virtual int32_t Serialize(uint8_t **data, size_t *size) const = 0;
    virtual int32_t Deserialize(const uint8_t *data, size_t size) = 0;
};

class OM2_CUSTOM_API EagerExecuteOp : public virtual BaseCustomOp {
public:
    EagerExecuteOp *AsEager() override { return this; }
    virtual int32_t Execute(EagerOpExecutionContext &context) = 0;
};

}  // namespace om2

extern "C" {
#endif /* __cplusplus */

/* ---- the factory (CustomOpFactory): C entry points, implemented by om2gen's runtime ---- */

typedef void *(*Om2CustomOpCreator)(void);   /* returns a new om2::BaseCustomOp* (as void*) */

/* Registers a creator for op_type: 0 on success. An op_type that is already registered keeps its
 * first creator; registering it again returns 1 (a library loaded twice, or two libraries that
 * both define the op: the first one wins, as with GE's CustomOpFactory). Invalid arguments: -1. */
OM2_CUSTOM_API int32_t Om2RegisterCustomOpCreator(const char *op_type, Om2CustomOpCreator creator);
/* A new instance, or NULL if op_type is not registered. Destroy it with Om2DestroyCustomOp. */
OM2_CUSTOM_API void *Om2CreateCustomOp(const char *op_type);
OM2_CUSTOM_API void Om2DestroyCustomOp(void *op);
/* Registered op types: writes up to `capacity` pointers (owned by the factory) and returns the count. */
OM2_CUSTOM_API size_t Om2ListCustomOps(const char **op_types, size_t capacity);

#ifdef __cplusplus
}  /* extern "C" */

namespace om2 {

/* Registration at library load: REG_AUTO_MAPPING_OP("AddCustom", AddCustom); */
struct OM2_CUSTOM_API CustomOpRegistrar {
    CustomOpRegistrar(const char *op_type, Om2CustomOpCreator creator) {
        Om2RegisterCustomOpCreator(op_type, creator);
    }
};

}  // namespace om2

#define OM2_CUSTOM_CONCAT_(a, b) a##b
#define OM2_CUSTOM_CONCAT(a, b) OM2_CUSTOM_CONCAT_(a, b)
#define REG_AUTO_MAPPING_OP(op_type, cls)                                                           \
    static ::om2::CustomOpRegistrar OM2_CUSTOM_CONCAT(om2_custom_op_registrar_, __LINE__)(          \
        op_type, []() -> void * { return static_cast<::om2::BaseCustomOp *>(new cls()); })

#endif /* __cplusplus */

#endif /* OM2_CUSTOM_OP_H */
