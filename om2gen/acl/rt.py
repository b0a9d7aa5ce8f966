"""acl.rt: devices, contexts, streams, events and memory, on om2gen's CPU runtime. pyACL's signatures.

    ret = acl.rt.set_device(0)
    stream, ret = acl.rt.create_stream()
    dev, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    ret = acl.rt.memcpy(dev, size, host, size, ACL_MEMCPY_HOST_TO_DEVICE)

Memory, streams and devices are the runtime's own (runtime_abi, the same one model libraries
call): "device" memory is host memory, there is one device, 0, and the run mode is ACL_HOST.
Contexts are bookkeeping only: the CPU runtime has no per-context state.
"""
from __future__ import annotations

import threading

from . import constants as C
from ._errors import AclFail, address_arg, check, entry, integer, size_arg
from ._handles import Context, registry
from ._native import address, ffi, lib, pointer


def _ret(code):
    return code


def _value_ret(code):
    return 0, code


OUT = object()   # where _query puts its out-parameter


def _call(name: str, *args):
    """Calls the runtime's `name`; AclFail with the runtime's message when it fails."""
    check(getattr(lib, name)(*args), name)
    return C.ACL_SUCCESS


def _query(name: str, out_type: str, *args):
    """Calls the runtime's `name` with a new `out_type` where OUT stands; returns what it wrote."""
    out = ffi.new(out_type)
    check(getattr(lib, name)(*(out if a is OUT else a for a in args)), name)
    return out[0]


def _ptr(value, name: str):
    return pointer(address_arg(value, name))


# ---- devices ----

@entry("acl.rt.set_device", _ret)
def set_device(device_id):
    """ret = set_device(device_id); the CPU runtime has device 0 only."""
    device = integer(device_id, "device_id")
    _call("aclrtSetDevice", device)
    _contexts.on_set_device(device)
    return C.ACL_SUCCESS


@entry("acl.rt.reset_device", _ret)
def reset_device(device_id):
    """ret = reset_device(device_id): waits for every stream of the device."""
    return _call("aclrtResetDevice", integer(device_id, "device_id"))


@entry("acl.rt.get_device", _value_ret)
def get_device():
    """device_id, ret = get_device()"""
    return _query("aclrtGetDevice", "int32_t *", OUT), C.ACL_SUCCESS


@entry("acl.rt.get_run_mode", _value_ret)
def get_run_mode():
    """run_mode, ret = get_run_mode(): ACL_HOST, so scripts copy with the host<->device kinds."""
    return _query("aclrtGetRunMode", "int *", OUT), C.ACL_SUCCESS


@entry("acl.rt.synchronize_device", _ret)
def synchronize_device():
    return _call("aclrtSynchronizeDevice")


# ---- contexts ----

class _Contexts:
    """The current context of each thread; set_device gives a thread without one the device's
    default context, as ACL does."""

    def __init__(self):
        self._local = threading.local()
        self._lock = threading.Lock()
        self._defaults: dict[int, int] = {}

    def current(self) -> int:
        return getattr(self._local, "context", 0)

    def set_current(self, handle: int) -> None:
        self._local.context = handle

    def on_set_device(self, device: int) -> None:
        with self._lock:
            if device not in self._defaults:
                self._defaults[device] = registry.add(Context(device))
            default = self._defaults[device]
        if not self.current():
            self.set_current(default)

    def forget(self, handle: int) -> None:
        if self.current() == handle:
            self.set_current(0)


_contexts = _Contexts()


@entry("acl.rt.create_context", _value_ret)
def create_context(device_id):
    """context, ret = create_context(device_id): also makes it the thread's current context."""
    device = integer(device_id, "device_id")
    _call("aclrtSetDevice", device)
    handle = registry.add(Context(device))
    _contexts.set_current(handle)
    return handle, C.ACL_SUCCESS


@entry("acl.rt.destroy_context", _ret)
def destroy_context(context):
    registry.remove(context, Context, "context")
    _contexts.forget(integer(context, "context"))
    return C.ACL_SUCCESS


@entry("acl.rt.set_context", _ret)
def set_context(context):
    registry.get(context, Context, "context")
    _contexts.set_current(integer(context, "context"))
    return C.ACL_SUCCESS


@entry("acl.rt.get_context", _value_ret)
def get_context():
    """context, ret = get_context(): the thread's current context."""
    handle = _contexts.current()
    if not handle:
        raise AclFail(C.ACL_ERROR_RT_CONTEXT_NULL, "this thread has no current context; call "
                                                   "acl.rt.set_device or acl.rt.create_context first")
    registry.get(handle, Context, "the current context")
    return handle, C.ACL_SUCCESS


# ---- streams ----

@entry("acl.rt.create_stream", _value_ret)
def create_stream():
    """stream, ret = create_stream(): an asynchronous FIFO stream of the CPU runtime."""
    return address(_query("aclrtCreateStream", "aclrtStream *", OUT)), C.ACL_SUCCESS


@entry("acl.rt.destroy_stream", _ret)
def destroy_stream(stream):
    """ret = destroy_stream(stream): runs what is still queued on it first."""
    return _call("aclrtDestroyStream", _ptr(stream, "stream"))


@entry("acl.rt.synchronize_stream", _ret)
def synchronize_stream(stream):
    """ret = synchronize_stream(stream): waits for the stream; returns the first failure of its tasks."""
    return _call("aclrtSynchronizeStream", _ptr(stream, "stream"))


# ---- events ----

@entry("acl.rt.create_event", _value_ret)
def create_event():
    """event, ret = create_event()"""
    return address(_query("aclrtCreateEvent", "aclrtEvent *", OUT)), C.ACL_SUCCESS


@entry("acl.rt.destroy_event", _ret)
def destroy_event(event):
    return _call("aclrtDestroyEvent", _ptr(event, "event"))


@entry("acl.rt.record_event", _ret)
def record_event(event, stream):
    """ret = record_event(event, stream): the event is set when the stream reaches this point."""
    return _call("aclrtRecordEvent", _ptr(event, "event"), _ptr(stream, "stream"))


@entry("acl.rt.reset_event", _ret)
def reset_event(event, stream):
    return _call("aclrtResetEvent", _ptr(event, "event"), _ptr(stream, "stream"))


@entry("acl.rt.stream_wait_event", _ret)
def stream_wait_event(stream, event):
    """ret = stream_wait_event(stream, event): later work on `stream` waits for the event."""
    return _call("aclrtStreamWaitEvent", _ptr(stream, "stream"), _ptr(event, "event"))


@entry("acl.rt.synchronize_event", _ret)
def synchronize_event(event):
    """ret = synchronize_event(event): waits until every record of the event issued so far has run."""
    return _call("aclrtSynchronizeEvent", _ptr(event, "event"))


@entry("acl.rt.query_event_status", _value_ret)
def query_event_status(event):
    """status, ret = query_event_status(event): ACL_EVENT_RECORDED_STATUS_COMPLETE (1) or NOT_READY (0)."""
    return _query("aclrtQueryEventStatus", "int *", _ptr(event, "event"), OUT), C.ACL_SUCCESS


# ---- memory ----

@entry("acl.rt.malloc", _value_ret)
def malloc(size, policy):
    """dev_ptr, ret = malloc(size, policy)"""
    return address(_query("aclrtMalloc", "void **", OUT, size_arg(size, "size"), integer(policy, "policy"))), \
        C.ACL_SUCCESS


@entry("acl.rt.free", _ret)
def free(dev_ptr):
    return _call("aclrtFree", _ptr(dev_ptr, "dev_ptr"))


@entry("acl.rt.malloc_host", _value_ret)
def malloc_host(size):
    """host_ptr, ret = malloc_host(size)"""
    return address(_query("aclrtMallocHost", "void **", OUT, size_arg(size, "size"))), C.ACL_SUCCESS


@entry("acl.rt.free_host", _ret)
def free_host(host_ptr):
    return _call("aclrtFreeHost", _ptr(host_ptr, "host_ptr"))


@entry("acl.rt.memcpy", _ret)
def memcpy(dst, dest_max, src, count, kind):
    """ret = memcpy(dst, dest_max, src, count, kind): kind is checked, the direction does not matter."""
    return _call("aclrtMemcpy", _ptr(dst, "dst"), size_arg(dest_max, "dest_max"), _ptr(src, "src"),
                 size_arg(count, "count"), integer(kind, "kind"))


@entry("acl.rt.memcpy_async", _ret)
def memcpy_async(dst, dest_max, src, count, kind, stream):
    return _call("aclrtMemcpyAsync", _ptr(dst, "dst"), size_arg(dest_max, "dest_max"), _ptr(src, "src"),
                 size_arg(count, "count"), integer(kind, "kind"), _ptr(stream, "stream"))


@entry("acl.rt.memset", _ret)
def memset(dev_ptr, max_count, value, count):
    return _call("aclrtMemset", _ptr(dev_ptr, "dev_ptr"), size_arg(max_count, "max_count"), integer(value, "value"),
                 size_arg(count, "count"))
