"""acl.mdl: load, run and unload models; model descriptions; datasets. pyACL's signatures.

    model_id, ret = acl.mdl.load_from_file(path)          # .om2 archive or classic .om, by content
    desc = acl.mdl.create_desc(); ret = acl.mdl.get_desc(desc, model_id)
    ret = acl.mdl.execute(model_id, input_dataset, output_dataset)

Failures return an aclError (om2gen.acl.constants) and leave a message for
acl.get_recent_err_msg(); see docs/acl-api.md for the mapping and the differences.
"""
from __future__ import annotations

from ..ir import dtypes
from ..runtime import gears as gears_mod
from . import constants as C
from . import tensor_desc
from ._errors import AclFail, address_arg, entry, integer, size_arg
from ._handles import DataBuffer, Dataset, ModelDesc, registry
from ._models import check_model_file, dataset_addresses, load, models
from ._native import ffi

_EMPTY_DIMS = {"name": "", "dimCount": 0, "dims": []}


def _ret(code):
    return code


def _id_ret(code):
    return 0, code


def _dims_ret(code):
    return dict(_EMPTY_DIMS, dims=[]), code


# ---- loading ----

@entry("acl.mdl.load_from_file", _id_ret)
def load_from_file(model_path):
    """model_id, ret = load_from_file(model_path): an .om2 archive or a classic .om file."""
    path = check_model_file(model_path)
    return load(path), C.ACL_SUCCESS


@entry("acl.mdl.load_from_mem", _id_ret)
def load_from_mem(model, model_size):
    """model_id, ret = load_from_mem(model, model_size): the model's bytes at address `model`.
    The bytes are copied; the caller may free them once this returns."""
    addr, size = address_arg(model, "model"), size_arg(model_size, "model_size")
    if addr == 0:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, "model is NULL")
    if size == 0:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, "model_size is 0")
    data = bytes(ffi.buffer(ffi.cast("const char *", addr), size))
    return load(data), C.ACL_SUCCESS


@entry("acl.mdl.unload", _ret)
def unload(model_id):
    """ret = unload(model_id): waits for the model's queued asynchronous runs first."""
    models.remove(model_id).close()
    return C.ACL_SUCCESS


# ---- running ----

@entry("acl.mdl.execute", _ret)
def execute(model_id, input, output):  # noqa: A002 - pyACL's parameter names
    """ret = execute(model_id, input_dataset, output_dataset): runs once, synchronously. An output
    data buffer with a NULL address gets device memory of the output's size (the caller frees it)."""
    loaded = models.get(model_id)
    m = loaded.model
    if m.rt2_stats is not None:   # a dynamic-shape OM: shapes from the datasets' tensor descriptions
        tensor_desc.execute_dynamic(loaded, input, output)
        return C.ACL_SUCCESS
    ins = dataset_addresses(input, m.io_inputs, "input")
    loaded.run(ins, dataset_addresses(output, m.outputs, "output", allocate=True))
    return C.ACL_SUCCESS


@entry("acl.mdl.execute_async", _ret)
def execute_async(model_id, input, output, stream):  # noqa: A002
    """ret = execute_async(model_id, input_dataset, output_dataset, stream): queues one run on
    `stream`; acl.rt.synchronize_stream(stream) waits for it and reports its failure."""
    loaded = models.get(model_id)
    m = loaded.model
    loaded.run_async(dataset_addresses(input, m.io_inputs, "input"), dataset_addresses(output, m.outputs, "output"),
                     address_arg(stream, "stream"))
    return C.ACL_SUCCESS


# ---- model descriptions ----

def create_desc():
    """desc = create_desc(): an empty description, filled by get_desc."""
    return registry.add(ModelDesc())


@entry("acl.mdl.destroy_desc", _ret)
def destroy_desc(model_desc):
    registry.remove(model_desc, ModelDesc, "model_desc")
    return C.ACL_SUCCESS


@entry("acl.mdl.get_desc", _ret)
def get_desc(model_desc, model_id):
    """ret = get_desc(model_desc, model_id): copies the loaded model's descriptions into the desc."""
    desc = registry.get(model_desc, ModelDesc, "model_desc")
    m = models.get(model_id).model
    # a gear model's dynamic inputs show -1 where a gear decides (their sizes: the largest gear's),
    # and ascend_mbatch_shape_data comes last, as ACL lists it
    desc.model_id, desc.inputs, desc.outputs, desc.filled = integer(model_id, "model_id"), \
        [*m.inputs, *m.io_inputs[len(m.inputs):]], list(m.outputs), True
    desc.gears = m._gears
    return C.ACL_SUCCESS


def _filled(model_desc) -> ModelDesc:
    desc = registry.get(model_desc, ModelDesc, "model_desc")
    if not desc.filled:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, "model_desc is empty; fill it with acl.mdl.get_desc first")
    return desc


def _tensor(model_desc, index, role: str):
    desc = _filled(model_desc)
    infos = desc.inputs if role == "input" else desc.outputs
    i = integer(index, "index")
    if not 0 <= i < len(infos):
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{role} index {i} is out of range: model {desc.model_id} has "
                                                 f"{len(infos)} {role}(s)")
    return infos[i]


def _dims(info) -> dict:
    return {"name": info.name, "dimCount": len(info.shape), "dims": list(info.shape)}


def _index_by_name(model_desc, name, role: str) -> int:
    desc = _filled(model_desc)
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    infos = desc.inputs if role == "input" else desc.outputs
    for i, info in enumerate(infos):
        if info.name == name:
            return i
    raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"model {desc.model_id} has no {role} named {name!r}; its {role}s "
                                             f"are {', '.join(repr(t.name) for t in infos)}")


@entry("acl.mdl.get_num_inputs", lambda code: 0)
def get_num_inputs(model_desc):
    return len(_filled(model_desc).inputs)


@entry("acl.mdl.get_num_outputs", lambda code: 0)
def get_num_outputs(model_desc):
    return len(_filled(model_desc).outputs)


@entry("acl.mdl.get_input_size_by_index", lambda code: 0)
def get_input_size_by_index(model_desc, index):
    """size in bytes of input `index` (0 when the desc or index is invalid)."""
    return _tensor(model_desc, index, "input").nbytes


@entry("acl.mdl.get_output_size_by_index", lambda code: 0)
def get_output_size_by_index(model_desc, index):
    return _tensor(model_desc, index, "output").nbytes


@entry("acl.mdl.get_input_dims", _dims_ret)
def get_input_dims(model_desc, index):
    """dims, ret = get_input_dims(desc, index); dims = {"name", "dimCount", "dims"}."""
    return _dims(_tensor(model_desc, index, "input")), C.ACL_SUCCESS


@entry("acl.mdl.get_input_dims_v2", _dims_ret)
def get_input_dims_v2(model_desc, index):
    """As get_input_dims: without AIPP the two agree."""
    return _dims(_tensor(model_desc, index, "input")), C.ACL_SUCCESS


@entry("acl.mdl.get_output_dims", _dims_ret)
def get_output_dims(model_desc, index):
    return _dims(_tensor(model_desc, index, "output")), C.ACL_SUCCESS


@entry("acl.mdl.get_cur_output_dims", _dims_ret)
def get_cur_output_dims(model_desc, index):
    """The output's dims at the model's current gear (the one set last with set_dynamic_batch_size
    and its peers); the compiled dims for a static model, or before a gear is set."""
    info = _tensor(model_desc, index, "output")
    desc = _filled(model_desc)
    gear = models.get(desc.model_id).gear if desc.gears is not None else None
    if gear is None:
        return _dims(info), C.ACL_SUCCESS
    dims = desc.gears.output_shapes[gear][integer(index, "index")]
    return {"name": info.name, "dimCount": len(dims), "dims": list(dims)}, C.ACL_SUCCESS


@entry("acl.mdl.get_input_name_by_index", lambda code: "")
def get_input_name_by_index(model_desc, index):
    return _tensor(model_desc, index, "input").name


@entry("acl.mdl.get_output_name_by_index", lambda code: "")
def get_output_name_by_index(model_desc, index):
    return _tensor(model_desc, index, "output").name


@entry("acl.mdl.get_input_index_by_name", _id_ret)
def get_input_index_by_name(model_desc, name):
    """index, ret = get_input_index_by_name(desc, name)"""
    return _index_by_name(model_desc, name, "input"), C.ACL_SUCCESS


@entry("acl.mdl.get_output_index_by_name", _id_ret)
def get_output_index_by_name(model_desc, name):
    return _index_by_name(model_desc, name, "output"), C.ACL_SUCCESS


@entry("acl.mdl.get_input_data_type", lambda code: C.ACL_DT_UNDEFINED)
def get_input_data_type(model_desc, index):
    """the aclDataType of input `index` (ACL_DT_UNDEFINED, -1, when invalid)."""
    return dtypes.from_numpy(_tensor(model_desc, index, "input").dtype).acl


@entry("acl.mdl.get_output_data_type", lambda code: C.ACL_DT_UNDEFINED)
def get_output_data_type(model_desc, index):
    return dtypes.from_numpy(_tensor(model_desc, index, "output").dtype).acl


@entry("acl.mdl.get_input_format", lambda code: C.ACL_FORMAT_UNDEFINED)
def get_input_format(model_desc, index):
    """ACL_FORMAT_ND: om2gen keeps tensors in their ONNX layout, and records ND in .om files too."""
    _tensor(model_desc, index, "input")
    return C.ACL_FORMAT_ND


@entry("acl.mdl.get_output_format", lambda code: C.ACL_FORMAT_UNDEFINED)
def get_output_format(model_desc, index):
    _tensor(model_desc, index, "output")
    return C.ACL_FORMAT_ND


# ---- datasets ----

# a dynamic-shape model's input and output shapes (om2gen/acl/tensor_desc.py)
set_dataset_tensor_desc = tensor_desc.set_dataset_tensor_desc
get_dataset_tensor_desc = tensor_desc.get_dataset_tensor_desc

def create_dataset():
    """dataset = create_dataset(): an empty aclmdlDataset."""
    return registry.add(Dataset())


@entry("acl.mdl.destroy_dataset", _ret)
def destroy_dataset(dataset):
    """ret = destroy_dataset(dataset); its data buffers stay alive (destroy them separately)."""
    registry.remove(dataset, Dataset, "dataset")
    return C.ACL_SUCCESS


def add_dataset_buffer(dataset, data_buffer):
    """dataset, ret = add_dataset_buffer(dataset, data_buffer)"""
    return dataset, _add_dataset_buffer(dataset, data_buffer)


@entry("acl.mdl.add_dataset_buffer", _ret)
def _add_dataset_buffer(dataset, data_buffer):
    ds = registry.get(dataset, Dataset, "dataset")
    registry.get(data_buffer, DataBuffer, "data_buffer")
    ds.buffers.append(integer(data_buffer, "data_buffer"))
    return C.ACL_SUCCESS


@entry("acl.mdl.get_dataset_num_buffers", lambda code: 0)
def get_dataset_num_buffers(dataset):
    return len(registry.get(dataset, Dataset, "dataset").buffers)


@entry("acl.mdl.get_dataset_buffer", lambda code: 0)
def get_dataset_buffer(dataset, index):
    """data_buffer = get_dataset_buffer(dataset, index) (0 when invalid)."""
    ds = registry.get(dataset, Dataset, "dataset")
    i = integer(index, "index")
    if not 0 <= i < len(ds.buffers):
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"index {i} is out of range: the dataset holds "
                                                 f"{len(ds.buffers)} data buffer(s)")
    return ds.buffers[i]


# ---- dynamic shapes: gears (docs/gears.md) ----
# A gear model's last input is ascend_mbatch_shape_data (ACL_DYNAMIC_TENSOR_NAME): the setters
# write the gear's values (int32, the input's dtype) into its data buffer, after checking that
# they are exactly one of the model's gears, as ACL does.

def _gears_of(model_id, dynamic_type: int, what: str):
    loaded = models.get(model_id)
    g = loaded.model._gears
    if g is None:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"model {integer(model_id, 'model_id')} has no gears; {what} needs a "
                                                 "model compiled with --dynamic-batch-size, --dynamic-image-size or "
                                                 "--dynamic-dims")
    if g.dynamic_type != dynamic_type:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"model {integer(model_id, 'model_id')} has "
                                                 f"{gears_mod.TYPE_NAMES[g.dynamic_type]} gears; {what} sets "
                                                 f"{gears_mod.TYPE_NAMES[dynamic_type]} ones")
    return loaded, g


def _write_gear(loaded, g, dataset, index, values: list[int]) -> None:
    """Checks `values` against the gears and writes them into the shape-data buffer at `index`."""
    m = loaded.model
    i = integer(index, "index")
    shape_index = len(m.io_inputs) - 1
    if i != shape_index:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"index {i} is not the model's {gears_mod.SHAPE_DATA_INPUT} input; "
                                                 f"it is input {shape_index} (acl.mdl.get_input_index_by_name(desc, "
                                                 f"{gears_mod.SHAPE_DATA_INPUT!r}))")
    gear = g.find_values(values)
    if gear is None:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{values} is no gear of the model; its gears are "
                                                 f"{[list(v) for v in g.values]}")
    ds = registry.get(dataset, Dataset, "dataset")
    if len(ds.buffers) <= i:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"the dataset holds {len(ds.buffers)} data buffer(s); add one for "
                                                 f"{gears_mod.SHAPE_DATA_INPUT} (input {i}) first")
    buf = registry.get(ds.buffers[i], DataBuffer, f"data buffer {i} of the dataset")
    need = 4 * len(values)
    if buf.addr == 0 or buf.size < need:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"the {gears_mod.SHAPE_DATA_INPUT} data buffer holds {buf.size} bytes "
                                                 f"at {buf.addr:#x}; it needs {need} (acl.mdl.get_input_size_by_index)")
    data = ffi.new("int32_t[]", values)
    ffi.memmove(ffi.cast("void *", buf.addr), data, need)
    loaded.gear = gear


@entry("acl.mdl.set_dynamic_batch_size", _ret)
def set_dynamic_batch_size(model_id, dataset, index, batch_size):
    """ret = set_dynamic_batch_size(model_id, dataset, index, batch_size): the batch of the next
    execute; `index` is the ascend_mbatch_shape_data input's."""
    loaded, g = _gears_of(model_id, gears_mod.DYNAMIC_BATCH, "set_dynamic_batch_size")
    _write_gear(loaded, g, dataset, index, [integer(batch_size, "batch_size")])
    return C.ACL_SUCCESS


@entry("acl.mdl.set_dynamic_hw_size", _ret)
def set_dynamic_hw_size(model_id, dataset, index, height, width):
    """ret = set_dynamic_hw_size(model_id, dataset, index, height, width)"""
    loaded, g = _gears_of(model_id, gears_mod.DYNAMIC_IMAGE, "set_dynamic_hw_size")
    _write_gear(loaded, g, dataset, index, [integer(height, "height"), integer(width, "width")])
    return C.ACL_SUCCESS


@entry("acl.mdl.set_input_dynamic_dims", _ret)
def set_input_dynamic_dims(model_id, dataset, index, dims):
    """ret = set_input_dynamic_dims(model_id, dataset, index, dims): dims = {"name", "dimCount",
    "dims"} holding the dims of every input (ascend_mbatch_shape_data excepted) one after another,
    in input order, as get_input_dynamic_dims lists them; the dims a gear decides must be a gear."""
    loaded, g = _gears_of(model_id, gears_mod.DYNAMIC_DIMS, "set_input_dynamic_dims")
    if not isinstance(dims, dict) or not isinstance(dims.get("dims"), (list, tuple)):
        raise TypeError("dims must be a dict {'name': str, 'dimCount': int, 'dims': [int, ...]}")
    given = [integer(d, "dims") for d in dims["dims"]][:integer(dims.get("dimCount", len(dims["dims"])), "dimCount")]
    template = [d for n in g.inputs for d in g.origin_dims[n]]
    if len(given) != len(template):
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"dims holds {len(given)} dims; the model's inputs have "
                                                 f"{len(template)} in all ({_dims_text(g, 0)} at gear 0)")
    fixed = [(i, d, t) for i, (d, t) in enumerate(zip(given, template)) if t != -1 and d != t]
    if fixed:
        i, d, t = fixed[0]
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"dim {i} of dims is {d}, but it is a fixed dim of size {t}")
    _write_gear(loaded, g, dataset, index, _dynamic_values(g, given))
    return C.ACL_SUCCESS


def _dynamic_values(g, flat: list[int]) -> list[int]:
    """The gear values in flat dims of every input (the dims marked -1, in the user's order)."""
    at, per_input = 0, {}
    for n in g.inputs:
        k = len(g.origin_dims[n])
        per_input[n] = flat[at:at + k]
        at += k
    order = [n for n in g.order if n in g.dynamic]
    return [d for n in order for d, t in zip(per_input[n], g.origin_dims[n]) if t == -1]


def _dims_text(g, gear: int) -> str:
    return ", ".join(f"{n}{list(g.input_shapes[gear][n])}" for n in g.inputs)


def _desc_gears(model_desc, dynamic_type: int | None = None):
    desc = _filled(model_desc)
    g = desc.gears
    if g is None or (dynamic_type is not None and g.dynamic_type != dynamic_type):
        return None
    return g


@entry("acl.mdl.get_dynamic_batch", lambda code: ({"batchCount": 0, "batch": []}, code))
def get_dynamic_batch(model_desc):
    """batch_info, ret = get_dynamic_batch(desc): {"batchCount", "batch"}; 0 gears for a model
    without gears of the batch."""
    g = _desc_gears(model_desc, gears_mod.DYNAMIC_BATCH)
    batch = [] if g is None else [v[0] for v in g.values]
    return {"batchCount": len(batch), "batch": batch}, C.ACL_SUCCESS


@entry("acl.mdl.get_dynamic_hw", lambda code: ({"hwCount": 0, "hw": []}, code))
def get_dynamic_hw(model_desc, index):
    """hw_info, ret = get_dynamic_hw(desc, index): {"hwCount", "hw": [[h, w], ...]}; index -1."""
    integer(index, "index")
    g = _desc_gears(model_desc, gears_mod.DYNAMIC_IMAGE)
    hw = [] if g is None else [list(v) for v in g.values]
    return {"hwCount": len(hw), "hw": hw}, C.ACL_SUCCESS


@entry("acl.mdl.get_input_dynamic_gear_count", _id_ret)
def get_input_dynamic_gear_count(model_desc, index):
    """gear_count, ret = get_input_dynamic_gear_count(desc, -1): the gears of a --dynamic-dims
    model (0 for others)."""
    integer(index, "index")
    g = _desc_gears(model_desc, gears_mod.DYNAMIC_DIMS)
    return (0 if g is None else len(g)), C.ACL_SUCCESS


@entry("acl.mdl.get_input_dynamic_dims", lambda code: ([], code))
def get_input_dynamic_dims(model_desc, index, gear_count):
    """dims, ret = get_input_dynamic_dims(desc, -1, gear_count): per gear {"name": "",
    "dimCount", "dims"} with the dims of every input one after another, in input order."""
    integer(index, "index")
    g = _desc_gears(model_desc, gears_mod.DYNAMIC_DIMS)
    n = 0 if g is None else len(g)
    if integer(gear_count, "gear_count") < n:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"gear_count is {gear_count}; the model has {n} gears")
    out = []
    for i in range(n):
        flat = [d for name in g.inputs for d in g.input_shapes[i][name]]
        out.append({"name": "", "dimCount": len(flat), "dims": flat})
    return out, C.ACL_SUCCESS
