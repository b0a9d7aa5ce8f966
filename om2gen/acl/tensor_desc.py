"""aclTensorDesc and the dataset's tensor descriptions: how a dynamic-shape model (a classic .om
run the RT2 way, docs/dynamic-shapes.md) is given its input shapes and reports its output shapes.

    desc = acl.create_tensor_desc(acl_dtype, [n, 3, h, w], ACL_FORMAT_NCHW)
    ret = acl.mdl.set_dataset_tensor_desc(input_dataset, desc, 0)   # before execute
    ret = acl.mdl.execute(model_id, input_dataset, output_dataset)
    out = acl.mdl.get_dataset_tensor_desc(output_dataset, 0)        # the output's shape this run
    dims = [acl.get_tensor_desc_dim_v2(out, i)[0] for i in range(acl.get_tensor_desc_num_dims(out))]

GE's C signatures: aclmdlSetDatasetTensorDesc(aclmdlDataset *, aclTensorDesc *, size_t index),
aclTensorDesc *aclmdlGetDatasetTensorDesc(const aclmdlDataset *, size_t index) (GE_FACTS §6.9).
An output description is the executor's (as ACL's), valid until the next execute or the
dataset's destruction; destroying it is allowed and harmless.
"""
from __future__ import annotations

from . import constants as C
from ._errors import AclFail, check, entry, integer
from ._handles import DataBuffer, Dataset, TensorDesc, registry
from ._models import tensor_text
from ._native import address, ffi, lib


def _ret(code):
    return code


@entry("acl.create_tensor_desc", lambda code: 0)
def create_tensor_desc(data_type, dims, format):  # noqa: A002 - pyACL's parameter names
    """desc = create_tensor_desc(data_type, dims, format) (0 when invalid)."""
    if not isinstance(dims, (list, tuple)):
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"dims must be a list of ints, not {type(dims).__name__}")
    return registry.add(TensorDesc(integer(data_type, "data_type"), tuple(integer(d, "dims") for d in dims),
                                   integer(format, "format")))


@entry("acl.destroy_tensor_desc", _ret)
def destroy_tensor_desc(desc):
    registry.remove(desc, TensorDesc, "desc")
    return C.ACL_SUCCESS


@entry("acl.get_tensor_desc_num_dims", lambda code: 0)
def get_tensor_desc_num_dims(desc):
    return len(registry.get(desc, TensorDesc, "desc").dims)


@entry("acl.get_tensor_desc_dim_v2", lambda code: (0, code))
def get_tensor_desc_dim_v2(desc, index):
    """dim, ret = get_tensor_desc_dim_v2(desc, index)"""
    d = registry.get(desc, TensorDesc, "desc")
    i = integer(index, "index")
    if not 0 <= i < len(d.dims):
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"index {i} is out of range: the description has {len(d.dims)} dims")
    return d.dims[i], C.ACL_SUCCESS


@entry("acl.get_tensor_desc_type", lambda code: C.ACL_DT_UNDEFINED)
def get_tensor_desc_type(desc):
    return registry.get(desc, TensorDesc, "desc").data_type


@entry("acl.mdl.set_dataset_tensor_desc", _ret)
def set_dataset_tensor_desc(dataset, tensor_desc, index):
    """ret = set_dataset_tensor_desc(dataset, tensor_desc, index): the shape of the tensor in
    data buffer `index` (a dynamic-shape model's input) for the runs that follow."""
    ds = registry.get(dataset, Dataset, "dataset")
    desc = registry.get(tensor_desc, TensorDesc, "tensor_desc")
    i = integer(index, "index")
    if not 0 <= i < len(ds.buffers):
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"index {i} is out of range: the dataset holds {len(ds.buffers)} "
                                                 "data buffer(s); add the buffer first")
    ds.descs[i] = desc
    return C.ACL_SUCCESS


@entry("acl.mdl.get_dataset_tensor_desc", lambda code: 0)
def get_dataset_tensor_desc(dataset, index):
    """tensor_desc = get_dataset_tensor_desc(dataset, index) (0 when none is set)."""
    ds = registry.get(dataset, Dataset, "dataset")
    i = integer(index, "index")
    if i not in ds.descs:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"data buffer {i} of the dataset has no tensor description (an "
                                                 "output's is set by execute of a dynamic-shape model)")
    return registry.add(ds.descs[i])


def execute_dynamic(loaded, input_handle, output_handle) -> None:
    """acl.mdl.execute of a dynamic-shape model: each input's shape from its dataset tensor
    description (a static input may go without), the outputs at the shapes the run infers (a
    NULL output buffer gets device memory of that size, which the caller frees), and each
    output's description set on the output dataset."""
    m = loaded.model
    ins = registry.get(input_handle, Dataset, "input dataset")
    outs = registry.get(output_handle, Dataset, "output dataset")
    for role, ds, infos in (("input", ins, m.inputs), ("output", outs, m.outputs)):
        if len(ds.buffers) != len(infos):
            raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"the {role} dataset holds {len(ds.buffers)} data buffer(s), "
                                                     f"the model has {len(infos)} {role}(s): "
                                                     f"{', '.join(tensor_text(t) for t in infos)}")
    shapes, ptrs = [], []
    for i, info in enumerate(m.inputs):
        buf = registry.get(ins.buffers[i], DataBuffer, f"data buffer {i} of the input dataset")
        desc = ins.descs.get(i)
        if desc is None and -1 in info.shape:
            raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"input {i} ({tensor_text(info)}) has dynamic dims: give its "
                                                     "shape with acl.mdl.set_dataset_tensor_desc before execute")
        shape = desc.dims if desc is not None else info.shape
        need = info.dtype.itemsize
        for d in shape:
            need *= max(d, 0)
        if buf.addr == 0 or buf.size < need:
            raise AclFail(C.ACL_ERROR_MODEL_INPUT_NOT_MATCH, f"input {i} ({tensor_text(info)}) at shape {list(shape)} "
                                                             f"needs {need} bytes, its data buffer holds {buf.size} at "
                                                             f"{buf.addr:#x}")
        shapes.append(shape)
        ptrs.append(buf.addr)
    out_bufs = [registry.get(h, DataBuffer, f"data buffer {j} of the output dataset") for j, h in enumerate(outs.buffers)]

    def outputs_for(prepared):
        for j, (buf, (dims, need)) in enumerate(zip(out_bufs, prepared)):
            if buf.addr == 0 and need:
                p = ffi.new("void **")
                check(lib.aclrtMalloc(p, need, C.ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc")
                buf.addr, buf.size = address(p[0]), need
            elif buf.size < need:
                raise AclFail(C.ACL_ERROR_MODEL_OUTPUT_NOT_MATCH, f"output {j} ({tensor_text(m.outputs[j])}) is "
                                                                  f"{list(dims)} this run, {need} bytes; its data "
                                                                  f"buffer holds {buf.size}")
        return [b.addr for b in out_bufs], [b.size for b in out_bufs]

    with loaded.lock:
        dims = m.execute_raw_shapes(ptrs, shapes, outputs_for)
    for j, (d, info) in enumerate(zip(dims, m.outputs)):
        outs.descs[j] = TensorDesc(info.acl_dtype, tuple(d), C.ACL_FORMAT_ND)
