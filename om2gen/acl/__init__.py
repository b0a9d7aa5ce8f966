"""om2gen.acl: the AscendCL model API with pyACL's calling conventions, for .om2 and .om models.

A pyACL inference script runs on om2gen by changing its import:

    import om2gen.acl as acl          # instead of: import acl
    ret = acl.init()
    ret = acl.rt.set_device(0)
    model_id, ret = acl.mdl.load_from_file("model.om2")      # or a classic "model.om"
    ...
    ret = acl.mdl.execute(model_id, input_dataset, output_dataset)

Organised as pyACL: top-level functions (init, finalize, data buffers, get_recent_err_msg) and
the submodules rt (devices, contexts, streams, memory), mdl (models, descriptions, datasets)
and util (pointers). Every function returns what pyACL returns - an aclError, or a value and
an aclError - and reports failures by code, never by exception; acl.get_recent_err_msg() says
what went wrong. docs/acl-api.md maps every function and lists the differences.
"""
from __future__ import annotations

from . import constants
from . import constants as C
from . import mdl, rt, util
from ._errors import AclFail, address_arg, check, entry, integer, size_arg, take_messages
from ._handles import DataBuffer, registry
from ._native import ffi, lib
from .tensor_desc import (create_tensor_desc, destroy_tensor_desc, get_tensor_desc_dim_v2, get_tensor_desc_num_dims,
                          get_tensor_desc_type)


def _ret(code):
    return code


@entry("acl.init", _ret)
def init(config_path=None):
    """ret = init(config_path=None); a second init without finalize is ACL_ERROR_REPEAT_INITIALIZE."""
    if config_path is None or config_path == "":
        path = ffi.NULL
    elif isinstance(config_path, str):
        path = config_path.encode()
    else:
        raise TypeError(f"config_path must be a str, not {type(config_path).__name__}")
    check(lib.aclInit(path), "aclInit")
    return C.ACL_SUCCESS


@entry("acl.finalize", _ret)
def finalize():
    """ret = finalize(): waits for every stream; loaded models stay loaded until unloaded."""
    check(lib.aclFinalize(), "aclFinalize")
    return C.ACL_SUCCESS


def get_recent_err_msg():
    """msg = get_recent_err_msg(): this thread's failure messages, newest first, then cleared;
    None when there are none."""
    return take_messages()


@entry("acl.data_type_size", lambda code: 0)
def data_type_size(data_type):
    """size = data_type_size(acl_data_type): bytes per element (0 for an unknown type)."""
    dt = integer(data_type, "data_type")
    size = lib.aclDataTypeSize(dt)
    if size == 0 and dt not in (C.ACL_DT_UNDEFINED, C.ACL_STRING):   # the two without a fixed size
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{dt} is not an aclDataType")
    return size


# ---- data buffers ----

@entry("acl.create_data_buffer", lambda code: 0)
def create_data_buffer(data, size):
    """data_buffer = create_data_buffer(data, size): wraps caller-owned memory (0 if invalid)."""
    return registry.add(DataBuffer(address_arg(data, "data"), size_arg(size, "size")))


@entry("acl.destroy_data_buffer", _ret)
def destroy_data_buffer(data_buffer):
    """ret = destroy_data_buffer(data_buffer); the memory it wraps is not freed."""
    registry.remove(data_buffer, DataBuffer, "data_buffer")
    return C.ACL_SUCCESS


@entry("acl.update_data_buffer", _ret)
def update_data_buffer(data_buffer, data, size):
    """ret = update_data_buffer(data_buffer, data, size)"""
    buf = registry.get(data_buffer, DataBuffer, "data_buffer")
    buf.addr, buf.size = address_arg(data, "data"), size_arg(size, "size")
    return C.ACL_SUCCESS


@entry("acl.get_data_buffer_addr", lambda code: 0)
def get_data_buffer_addr(data_buffer):
    return registry.get(data_buffer, DataBuffer, "data_buffer").addr


@entry("acl.get_data_buffer_size_v2", lambda code: 0)
def get_data_buffer_size_v2(data_buffer):
    return registry.get(data_buffer, DataBuffer, "data_buffer").size


@entry("acl.get_data_buffer_size", lambda code: 0)
def get_data_buffer_size(data_buffer):
    """Deprecated in ACL (a uint32 size); use get_data_buffer_size_v2."""
    return registry.get(data_buffer, DataBuffer, "data_buffer").size & 0xFFFFFFFF


__all__ = ["init", "finalize", "get_recent_err_msg", "data_type_size", "create_data_buffer",
           "destroy_data_buffer", "update_data_buffer", "get_data_buffer_addr", "get_data_buffer_size",
           "get_data_buffer_size_v2", "create_tensor_desc", "destroy_tensor_desc", "get_tensor_desc_num_dims",
           "get_tensor_desc_dim_v2", "get_tensor_desc_type", "rt", "mdl", "util", "constants"]
