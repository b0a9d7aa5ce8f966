"""acl.mdl on both formats: loading, descriptions, execute / execute_async against ONNX Runtime,
and the error codes of wrong model ids, unloaded models, wrong datasets and bad files."""
import json
import zipfile

import numpy as np
import pytest
from conftest import FORMATS, two_io_onnx
from helpers import assert_close, ort_run

import om2gen.acl as acl
from om2gen.acl import constants as C
from om2gen.formats.om2 import layout

X = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], np.float32)
IDS = np.array([1, -2, 3, 1 << 40], np.int64)


def err():
    return acl.get_recent_err_msg() or ""


def ok(ret):
    assert ret == C.ACL_SUCCESS, acl.get_recent_err_msg()


class Loaded:
    """A loaded model with its desc, and helpers to build datasets over numpy arrays."""

    def __init__(self, path):
        self.model_id, ret = acl.mdl.load_from_file(str(path))
        ok(ret)
        self.desc = acl.mdl.create_desc()
        ok(acl.mdl.get_desc(self.desc, self.model_id))
        self.handles = []

    def dataset(self, arrays, sizes=None):
        ds = acl.mdl.create_dataset()
        for i, a in enumerate(arrays):
            buf = acl.create_data_buffer(acl.util.numpy_to_ptr(a), a.nbytes if sizes is None else sizes[i])
            assert acl.mdl.add_dataset_buffer(ds, buf) == (ds, 0)
            self.handles.append(buf)
        return ds

    def outputs(self):
        return [np.empty((2, 3), np.float32), np.empty(4, np.int64)]

    def close(self):
        for h in self.handles:
            acl.destroy_data_buffer(h)
        acl.mdl.destroy_desc(self.desc)
        acl.mdl.unload(self.model_id)


@pytest.fixture(params=FORMATS)
def two_io(request, two_io_models):
    m = Loaded(two_io_models[request.param])
    yield m
    m.close()


def test_descriptions(two_io):
    d = two_io.desc
    assert acl.mdl.get_num_inputs(d) == 2 and acl.mdl.get_num_outputs(d) == 2
    assert [acl.mdl.get_input_size_by_index(d, i) for i in range(2)] == [24, 32]
    assert [acl.mdl.get_output_size_by_index(d, i) for i in range(2)] == [24, 32]
    assert acl.mdl.get_input_dims(d, 0) == ({"name": "x", "dimCount": 2, "dims": [2, 3]}, 0)
    assert acl.mdl.get_input_dims_v2(d, 1) == ({"name": "ids", "dimCount": 1, "dims": [4]}, 0)
    assert acl.mdl.get_output_dims(d, 1) == ({"name": "s", "dimCount": 1, "dims": [4]}, 0)
    assert acl.mdl.get_cur_output_dims(d, 0) == ({"name": "y", "dimCount": 2, "dims": [2, 3]}, 0)
    assert [acl.mdl.get_input_name_by_index(d, i) for i in range(2)] == ["x", "ids"]
    assert [acl.mdl.get_output_name_by_index(d, i) for i in range(2)] == ["y", "s"]
    assert acl.mdl.get_input_index_by_name(d, "ids") == (1, 0)
    assert acl.mdl.get_output_index_by_name(d, "y") == (0, 0)
    assert [acl.mdl.get_input_data_type(d, i) for i in range(2)] == [0, 9]     # ACL_FLOAT, ACL_INT64
    assert [acl.mdl.get_output_data_type(d, i) for i in range(2)] == [0, 9]
    assert acl.mdl.get_input_format(d, 0) == acl.mdl.get_output_format(d, 1) == C.ACL_FORMAT_ND


def test_description_errors(two_io):
    d = two_io.desc
    assert acl.mdl.get_input_size_by_index(d, 2) == 0
    assert "input index 2 is out of range" in err()
    assert acl.mdl.get_output_dims(d, -1) == ({"name": "", "dimCount": 0, "dims": []}, C.ACL_ERROR_INVALID_PARAM)
    assert "output index -1" in err()
    assert acl.mdl.get_input_name_by_index(d, 5) == ""
    assert acl.mdl.get_output_data_type(d, 9) == C.ACL_DT_UNDEFINED
    assert acl.mdl.get_input_format(d, 9) == C.ACL_FORMAT_UNDEFINED
    acl.get_recent_err_msg()
    assert acl.mdl.get_input_index_by_name(d, "nope") == (0, C.ACL_ERROR_INVALID_PARAM)
    assert "no input named 'nope'" in err()

    empty = acl.mdl.create_desc()
    assert acl.mdl.get_num_inputs(empty) == 0
    assert "get_desc first" in err()
    assert acl.mdl.get_desc(empty, 987654) == C.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID
    assert "model id 987654" in err()
    assert acl.mdl.destroy_desc(empty) == 0
    assert acl.mdl.get_num_outputs(empty) == 0
    assert "not a live model description" in err()
    assert acl.mdl.destroy_desc(empty) == C.ACL_ERROR_INVALID_PARAM
    with pytest.raises(TypeError):
        acl.mdl.get_input_dims(d, "0")


def test_execute_matches_onnxruntime(two_io):
    ref = ort_run(two_io_onnx(), {"x": X, "ids": IDS})
    outs = two_io.outputs()
    ok(acl.mdl.execute(two_io.model_id, two_io.dataset([X, IDS]), two_io.dataset(outs)))
    for got, r, name in zip(outs, ref, ("y", "s")):
        assert_close(got, r, name)


def test_execute_async_on_a_stream(two_io):
    stream, ret = acl.rt.create_stream()
    ok(ret)
    ref = ort_run(two_io_onnx(), {"x": X, "ids": IDS})
    outs = two_io.outputs()
    ok(acl.mdl.execute_async(two_io.model_id, two_io.dataset([X, IDS]), two_io.dataset(outs), stream))
    ok(acl.rt.synchronize_stream(stream))
    for got, r, name in zip(outs, ref, ("y", "s")):
        assert_close(got, r, name)
    ok(acl.rt.destroy_stream(stream))


def test_execute_async_on_a_made_up_or_destroyed_stream_is_an_error(two_io):
    """The runtime looks a stream handle up among the live ones before using it (a made-up one
    crashed the process)."""
    outs = two_io.outputs()
    stream, ret = acl.rt.create_stream()
    ok(ret)
    ok(acl.rt.destroy_stream(stream))
    for bogus in (0x1234, stream):
        ret = acl.mdl.execute_async(two_io.model_id, two_io.dataset([X, IDS]), two_io.dataset(outs), bogus)
        assert ret != C.ACL_SUCCESS
        assert f"stream {bogus:#x} is not a live handle" in err()
    ok(acl.mdl.execute(two_io.model_id, two_io.dataset([X, IDS]), two_io.dataset(outs)))   # the model still runs
    assert_close(outs[1], ort_run(two_io_onnx(), {"x": X, "ids": IDS})[1], "s")


def test_execute_with_device_buffers_and_larger_sizes(two_io):
    """Buffers from acl.rt.malloc, larger than needed (allowed, as in ACL), reused by two runs."""
    d, mid = two_io.desc, two_io.model_id
    ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    mem = []
    for ds, count, size_of in ((ins, 2, acl.mdl.get_input_size_by_index), (outs, 2, acl.mdl.get_output_size_by_index)):
        for i in range(count):
            p, ret = acl.rt.malloc(size_of(d, i) + 64, C.ACL_MEM_MALLOC_HUGE_FIRST)
            ok(ret)
            mem.append(p)
            acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(p, size_of(d, i) + 64))
    for scale in (1.0, -3.0):
        for p, a in zip(mem, (X * scale, IDS)):
            data = a.tobytes()
            ok(acl.rt.memcpy(p, len(data) + 64, acl.util.bytes_to_ptr(data), len(data), C.ACL_MEMCPY_HOST_TO_DEVICE))
        ok(acl.mdl.execute(mid, ins, outs))
        y = np.frombuffer(acl.util.ptr_to_bytes(mem[2], 24), np.float32).reshape(2, 3)
        assert_close(y, np.maximum(X * scale, 0) * 2)
    for p in mem:
        ok(acl.rt.free(p))


def test_execute_errors(two_io):
    mid = two_io.model_id
    ins, outs = two_io.dataset([X, IDS]), two_io.dataset(two_io.outputs())

    assert acl.mdl.execute(mid + 1000, ins, outs) == C.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID
    assert "model id" in err()
    assert acl.mdl.execute(mid, two_io.dataset([X]), outs) == C.ACL_ERROR_INVALID_PARAM
    assert "holds 1 data buffer(s), the model has 2 input(s)" in err()
    assert acl.mdl.execute(mid, ins, two_io.dataset([X, IDS, X])) == C.ACL_ERROR_INVALID_PARAM
    assert "the model has 2 output(s)" in err()
    small = two_io.dataset([X, IDS], sizes=[24, 31])
    assert acl.mdl.execute(mid, small, outs) == C.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    assert "input 1 ('ids' int64[4]) needs 32 bytes, its data buffer holds 31" in err()
    assert acl.mdl.execute(mid, ins, two_io.dataset([X, IDS], sizes=[23, 32])) == C.ACL_ERROR_MODEL_OUTPUT_NOT_MATCH
    acl.get_recent_err_msg()
    assert acl.mdl.execute(mid, ins, two_io.handles[0]) == C.ACL_ERROR_INVALID_PARAM
    assert "is a data buffer, not a dataset" in err()

    null = acl.mdl.create_dataset()
    for size in (24, 32):
        acl.mdl.add_dataset_buffer(null, acl.create_data_buffer(0, size))
    assert acl.mdl.execute(mid, null, outs) == C.ACL_ERROR_INVALID_PARAM
    assert "NULL address" in err()

    gone = two_io.dataset([X, IDS])
    acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(gone, 0))
    assert acl.mdl.execute(mid, gone, outs) == C.ACL_ERROR_INVALID_PARAM
    assert "data buffer 0 of the input dataset" in err()

    stream, _ = acl.rt.create_stream()
    assert acl.mdl.execute_async(mid + 1000, ins, outs, stream) == C.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID
    assert acl.mdl.execute_async(mid, small, outs, stream) == C.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    assert acl.mdl.execute_async(mid, ins, null, stream) == C.ACL_ERROR_INVALID_PARAM   # no allocation when async
    assert "NULL address" in err()
    acl.rt.destroy_stream(stream)

    out_arrays = two_io.outputs()
    ok(acl.mdl.execute(mid, ins, two_io.dataset(out_arrays)))      # the model still runs after all that
    assert_close(out_arrays[1], IDS + IDS)


def test_execute_allocates_null_outputs(two_io):
    """As aclmdlExecute: an output data buffer with a NULL address gets device memory of the
    output's size, which the caller reads and frees."""
    ds = acl.mdl.create_dataset()
    bufs = [acl.create_data_buffer(0, 0) for _ in range(2)]
    for b in bufs:
        acl.mdl.add_dataset_buffer(ds, b)
    ok(acl.mdl.execute(two_io.model_id, two_io.dataset([X, IDS]), ds))
    assert [acl.get_data_buffer_size_v2(b) for b in bufs] == [24, 32]
    ptrs = [acl.get_data_buffer_addr(b) for b in bufs]
    assert_close(acl.util.ptr_to_numpy(ptrs[0], (2, 3), C.NPY_FLOAT32).copy(), np.maximum(X, 0) * 2)
    assert np.array_equal(acl.util.ptr_to_numpy(ptrs[1], (4,), C.NPY_INT64), IDS + IDS)
    for b, p in zip(bufs, ptrs):
        ok(acl.rt.free(p))                                       # runtime memory: aclrtFree accepts it
        ok(acl.destroy_data_buffer(b))
    ok(acl.mdl.destroy_dataset(ds))


@pytest.mark.parametrize("fmt", FORMATS)
def test_unloaded_model(fmt, two_io_models):
    m = Loaded(two_io_models[fmt])
    ins, outs = m.dataset([X, IDS]), m.dataset(m.outputs())
    ok(acl.mdl.unload(m.model_id))
    assert acl.mdl.execute(m.model_id, ins, outs) == C.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID
    assert "already unloaded" in err()
    assert acl.mdl.unload(m.model_id) == C.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID
    acl.get_recent_err_msg()
    assert acl.mdl.get_num_inputs(m.desc) == 2                   # a desc is a copy: it outlives the model
    again, ret = acl.mdl.load_from_file(str(two_io_models[fmt]))
    ok(ret)
    assert again != m.model_id                                   # ids are not reused
    ok(acl.mdl.unload(again))
    for h in m.handles:
        acl.destroy_data_buffer(h)
    acl.mdl.destroy_desc(m.desc)


@pytest.mark.parametrize("fmt", FORMATS)
def test_load_from_mem(fmt, two_io_models):
    data = two_io_models[fmt].read_bytes()
    host, ret = acl.rt.malloc_host(len(data))
    ok(ret)
    ok(acl.rt.memcpy(host, len(data), acl.util.bytes_to_ptr(data), len(data), C.ACL_MEMCPY_HOST_TO_HOST))
    model_id, ret = acl.mdl.load_from_mem(host, len(data))
    ok(ret)
    ok(acl.rt.memset(host, len(data), 0, len(data)))           # the model was copied: the memory may go
    ok(acl.rt.free_host(host))
    m = Loaded.__new__(Loaded)
    m.model_id, m.handles, m.desc = model_id, [], acl.mdl.create_desc()
    ok(acl.mdl.get_desc(m.desc, model_id))
    outs = m.outputs()
    ok(acl.mdl.execute(model_id, m.dataset([X, IDS]), m.dataset(outs)))
    assert_close(outs[0], np.maximum(X, 0) * 2)
    m.close()


def test_load_errors(tmp_path, two_io_models):
    assert acl.mdl.load_from_file(str(tmp_path / "missing.om")) == (0, C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
    assert "does not exist" in err()
    assert acl.mdl.load_from_file(str(tmp_path)) == (0, C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
    assert "is a directory" in err()
    assert acl.mdl.load_from_file("") == (0, C.ACL_ERROR_INVALID_PARAM)
    acl.get_recent_err_msg()
    garbage = tmp_path / "garbage.om"
    garbage.write_bytes(b"not a model at all" * 10)
    assert acl.mdl.load_from_file(str(garbage)) == (0, C.ACL_ERROR_PARSE_MODEL)
    msg = err()
    assert msg.startswith("acl.mdl.load_from_file: ") and "neither an OM2 archive" in msg
    for fmt in FORMATS:
        cut = tmp_path / f"truncated.{fmt}"
        cut.write_bytes(two_io_models[fmt].read_bytes()[:300])
        assert acl.mdl.load_from_file(str(cut)) == (0, C.ACL_ERROR_PARSE_MODEL), fmt
        assert err(), fmt
    with pytest.raises(TypeError):
        acl.mdl.load_from_file(12)

    newer = tmp_path / "newer_abi.om2"                           # built for another model ABI
    with zipfile.ZipFile(two_io_models["om2"]) as zin, zipfile.ZipFile(newer, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == layout.MANIFEST:
                manifest = json.loads(data)
                manifest["abi_version"] += 1
                data = json.dumps(manifest).encode()
            zout.writestr(info, data)
    assert acl.mdl.load_from_file(str(newer)) == (0, C.ACL_ERROR_DESERIALIZE_MODEL)
    assert "recompile the model" in err()

    blob = b"garbage!" * 8
    assert acl.mdl.load_from_mem(acl.util.bytes_to_ptr(blob), len(blob)) == (0, C.ACL_ERROR_PARSE_MODEL)
    acl.get_recent_err_msg()
    assert acl.mdl.load_from_mem(0, 64) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert "model is NULL" in err()
    assert acl.mdl.load_from_mem(acl.util.bytes_to_ptr(blob), 0) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert "model_size is 0" in err()


@pytest.mark.parametrize("fmt", FORMATS)
def test_unload_waits_for_queued_runs(fmt, two_io_models):
    """Unloading right after execute_async, without synchronize_stream, is safe: the queued runs
    finish first (their outputs are there once unload returns)."""
    m = Loaded(two_io_models[fmt])
    stream, _ = acl.rt.create_stream()
    ins = [X * (k + 1) for k in range(3)]                       # alive until the runs are done
    outs = [m.outputs() for _ in range(3)]
    for x, o in zip(ins, outs):
        ok(acl.mdl.execute_async(m.model_id, m.dataset([x, IDS]), m.dataset(o), stream))
    ok(acl.mdl.unload(m.model_id))
    for k, o in enumerate(outs):
        assert_close(o[0], np.maximum(X * (k + 1), 0) * 2, f"run {k}")
    ok(acl.rt.synchronize_stream(stream))
    ok(acl.rt.destroy_stream(stream))
    for h in m.handles:
        acl.destroy_data_buffer(h)
    acl.mdl.destroy_desc(m.desc)
