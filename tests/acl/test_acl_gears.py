"""acl.mdl's gear functions (GE's dynamic batch / image size / dims API) on a gear model, with
GE's rules: the extra input ascend_mbatch_shape_data, buffers sized for the largest gear, the
values exactly a gear."""
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, ort_run

import om2gen
import om2gen.acl as acl
from om2gen.acl import constants as C

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import gear_models  # noqa: E402

SHAPE_DATA = "ascend_mbatch_shape_data"   # ACL_DYNAMIC_TENSOR_NAME


def ok(ret):
    assert ret == C.ACL_SUCCESS, acl.get_recent_err_msg()


class Geared:
    def __init__(self, path):
        self.model_id, ret = acl.mdl.load_from_file(str(path))
        ok(ret)
        self.desc = acl.mdl.create_desc()
        ok(acl.mdl.get_desc(self.desc, self.model_id))
        self.buffers, self.arrays = [], []

    def dataset(self, role: str):
        """One buffer per input (or output), each of the size get_*_size_by_index gives."""
        count = acl.mdl.get_num_inputs(self.desc) if role == "input" else acl.mdl.get_num_outputs(self.desc)
        size_of = acl.mdl.get_input_size_by_index if role == "input" else acl.mdl.get_output_size_by_index
        ds, arrays = acl.mdl.create_dataset(), []
        for i in range(count):
            arr = np.zeros(size_of(self.desc, i), np.uint8)
            buf = acl.create_data_buffer(acl.util.numpy_to_ptr(arr), arr.nbytes)
            acl.mdl.add_dataset_buffer(ds, buf)
            self.buffers.append(buf)
            arrays.append(arr)
        self.arrays.append(arrays)
        return ds, arrays

    def close(self):
        for b in self.buffers:
            acl.destroy_data_buffer(b)
        acl.mdl.destroy_desc(self.desc)
        acl.mdl.unload(self.model_id)


@pytest.fixture(scope="module", params=["om2", "om"])
def batch_path(tmp_path_factory, request):
    """The gear model as an OM2 archive and as a classic OM: ACL runs both alike."""
    path = tmp_path_factory.mktemp("acl_gears") / f"batch.{request.param}"
    om2gen.compile(gear_models.cnn_batch(), path, input_shapes={"x": (-1, 3, 16, 16)}, dynamic_batch_size="1,2,4",
                   format=request.param)
    return path


def test_dynamic_batch_through_the_acl_api(batch_path):
    proto = gear_models.cnn_batch()
    m = Geared(batch_path)
    try:
        index, ret = acl.mdl.get_input_index_by_name(m.desc, SHAPE_DATA)
        ok(ret)
        assert index == 1 and acl.mdl.get_num_inputs(m.desc) == 2
        dims, ret = acl.mdl.get_input_dims(m.desc, 0)
        assert dims["dims"] == [-1, 3, 16, 16]
        assert acl.mdl.get_input_size_by_index(m.desc, 0) == 4 * 3 * 16 * 16 * 4   # the largest gear's
        assert acl.mdl.get_dynamic_batch(m.desc) == ({"batchCount": 3, "batch": [1, 2, 4]}, 0)
        ins, in_arrays = m.dataset("input")
        outs, out_arrays = m.dataset("output")
        rng = np.random.default_rng(5)
        for batch in (2, 4, 1):
            x = rng.standard_normal((batch, 3, 16, 16)).astype(np.float32)
            in_arrays[0][:x.nbytes] = x.view(np.uint8).reshape(-1)
            ok(acl.mdl.set_dynamic_batch_size(m.model_id, ins, index, batch))
            ok(acl.mdl.execute(m.model_id, ins, outs))
            cur, ret = acl.mdl.get_cur_output_dims(m.desc, 0)
            assert cur["dims"] == [batch, 10]
            y = out_arrays[0][:batch * 10 * 4].view(np.float32).reshape(batch, 10)
            assert_close(y, ort_run(proto, {"x": x})[0], "y")
        assert acl.mdl.set_dynamic_batch_size(m.model_id, ins, index, 3) == C.ACL_ERROR_INVALID_PARAM
        assert "no gear" in acl.get_recent_err_msg()
        assert acl.mdl.set_dynamic_batch_size(m.model_id, ins, 0, 2) == C.ACL_ERROR_INVALID_PARAM
        assert acl.mdl.set_dynamic_hw_size(m.model_id, ins, index, 2, 2) == C.ACL_ERROR_INVALID_PARAM
        assert "dynamic batch" in acl.get_recent_err_msg()
        # a shape-data buffer written by hand with a value that is no gear: the model refuses the run
        in_arrays[1][:4] = np.array([3], np.int32).view(np.uint8)
        assert acl.mdl.execute(m.model_id, ins, outs) != C.ACL_SUCCESS
        assert "no gear" in acl.get_recent_err_msg()
    finally:
        m.close()


def test_dynamic_dims_and_image_size_queries(tmp_path):
    dims_path, hw_path = tmp_path / "dims.om2", tmp_path / "hw.om2"
    om2gen.compile(gear_models.encoder(), dims_path, input_shapes={"input_ids": (1, -1)}, dynamic_dims="8;16")
    om2gen.compile(gear_models.cnn_image(), hw_path, input_shapes={"x": (1, 3, -1, -1)},
                   dynamic_image_size="16,16;24,32")
    m = Geared(dims_path)
    try:
        count, ret = acl.mdl.get_input_dynamic_gear_count(m.desc, -1)
        assert (count, ret) == (2, 0)
        gears, ret = acl.mdl.get_input_dynamic_dims(m.desc, -1, count)
        assert [g["dims"] for g in gears] == [[1, 8], [1, 16]]
        ins, in_arrays = m.dataset("input")
        outs, out_arrays = m.dataset("output")
        ids = np.arange(16, dtype=np.int64).reshape(1, 16) % 50
        in_arrays[0][:ids.nbytes] = ids.view(np.uint8).reshape(-1)
        ok(acl.mdl.set_input_dynamic_dims(m.model_id, ins, 1, {"name": "", "dimCount": 2, "dims": [1, 16]}))
        ok(acl.mdl.execute(m.model_id, ins, outs))
        h = out_arrays[0][:16 * 16 * 4].view(np.float32).reshape(1, 16, 16)
        assert_close(h, ort_run(gear_models.encoder(), {"input_ids": ids})[0], "h")
        bad = {"name": "", "dimCount": 2, "dims": [2, 16]}
        assert acl.mdl.set_input_dynamic_dims(m.model_id, ins, 1, bad) == C.ACL_ERROR_INVALID_PARAM
        assert "fixed dim" in acl.get_recent_err_msg()
    finally:
        m.close()
    m = Geared(hw_path)
    try:
        assert acl.mdl.get_dynamic_hw(m.desc, -1) == ({"hwCount": 2, "hw": [[16, 16], [24, 32]]}, 0)
        assert acl.mdl.get_dynamic_batch(m.desc) == ({"batchCount": 0, "batch": []}, 0)
    finally:
        m.close()
