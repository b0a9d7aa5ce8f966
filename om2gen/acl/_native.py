"""The ACL runtime functions om2gen.acl calls, declared in ABI mode over the native module.

om2gen._native (the CPU runtime) is already loaded, RTLD_GLOBAL, by om2gen.native;
opening the same file again returns that library, so these calls reach the very runtime the
model libraries run on. Prototypes are those of runtime_abi/include/acl/acl_rt.h.
"""
from __future__ import annotations

from cffi import FFI

from .. import native as _executor_native

CDEF = """
typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtEvent;
aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtResetDevice(int32_t deviceId);
aclError aclrtGetDevice(int32_t *deviceId);
aclError aclrtGetRunMode(int *runMode);
aclError aclrtSynchronizeDevice(void);
aclError aclrtMalloc(void **devPtr, size_t size, int policy);
aclError aclrtFree(void *devPtr);
aclError aclrtMallocHost(void **hostPtr, size_t size);
aclError aclrtFreeHost(void *hostPtr);
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, int kind);
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, int kind, aclrtStream stream);
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtCreateEvent(aclrtEvent *event);
aclError aclrtDestroyEvent(aclrtEvent event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtSynchronizeEvent(aclrtEvent event);
aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtQueryEventStatus(aclrtEvent event, int *status);
size_t aclDataTypeSize(int dataType);
const char *aclGetRecentErrMsg(void);
"""

ffi = FFI()
ffi.cdef(CDEF)
lib = ffi.dlopen(_executor_native._native.__file__)


def take_runtime_messages() -> list[str]:
    """The runtime's unread error messages of this thread, newest first (and clears them)."""
    p = lib.aclGetRecentErrMsg()
    if p == ffi.NULL:
        return []
    return [line for line in ffi.string(p).decode("utf-8", "replace").split("\n") if line]


def address(ptr) -> int:
    return int(ffi.cast("uintptr_t", ptr))


def pointer(value: int):
    return ffi.cast("void *", value)
