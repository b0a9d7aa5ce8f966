"""Gears (docs/gears.md): one model compiled for several shapes, one chosen per run, checked
against ONNX Runtime at every gear."""
import json
import zipfile

import numpy as np
import onnx
import pytest

import om2gen
from om2gen.cli import main
from om2gen.errors import InputError, ShapeError

import gear_models
from helpers import assert_close, ort_run

pytestmark = pytest.mark.needs_cc


@pytest.fixture(scope="module")
def batch_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("gears") / "cnn_batch.om2"
    om2gen.compile(gear_models.cnn_batch(), path, input_shapes={"x": (-1, 3, 16, 16)}, dynamic_batch_size="1,2,4,8",
                   debug=True)
    return path


def run_and_compare(model, proto, feeds, tol=1e-4):
    got = model.run(feeds)
    for name, ref in zip([o.name for o in proto.graph.output], ort_run(proto, feeds)):
        assert_close(got[name], ref, name, tol)
    return got


def test_dynamic_batch_every_gear_matches_onnx_runtime(batch_model):
    proto = gear_models.cnn_batch()
    rng = np.random.default_rng(0)
    with om2gen.load(batch_model) as m:
        assert m.gears == [{"x": (b, 3, 16, 16)} for b in (1, 2, 4, 8)]
        assert m.inputs[0].shape == (-1, 3, 16, 16) and m.inputs[0].max_shape == (8, 3, 16, 16)
        for b in (1, 8, 2, 4, 1):   # switching gears between consecutive runs
            got = run_and_compare(m, proto, {"x": rng.standard_normal((b, 3, 16, 16)).astype(np.float32)})
            assert got["y"].shape == (b, 10)


def test_a_shape_that_is_no_gear_lists_the_gears(batch_model):
    with om2gen.load(batch_model) as m, pytest.raises(InputError) as e:
        m.run({"x": np.zeros((3, 3, 16, 16), np.float32)})
    assert "x[3, 3, 16, 16]" in str(e.value) and "x[4,3,16,16]" in str(e.value) and "pad_to_gear" in str(e.value)


def test_pad_to_gear_runs_a_smaller_batch_on_the_next_gear(batch_model):
    proto = gear_models.cnn_batch()
    x = np.random.default_rng(1).standard_normal((3, 3, 16, 16)).astype(np.float32)
    with om2gen.load(batch_model, pad_to_gear=True) as m:
        got = m.run({"x": x})
        assert got["y"].shape == (3, 10)
        assert_close(got["y"], ort_run(proto, {"x": x})[0], "y")
        with pytest.raises(InputError, match="no gear"):
            m.run({"x": np.zeros((9, 3, 16, 16), np.float32)})   # above the largest gear


def test_run_after_execute_raw_uses_its_own_gear_data(batch_model):
    """execute_raw points a gear's ascend_mbatch_shape_data at the caller's buffer; a later run()
    of that gear must not read it (the caller may have changed or freed it)."""
    proto = gear_models.cnn_batch()
    x = np.random.default_rng(4).standard_normal((2, 3, 16, 16)).astype(np.float32)
    with om2gen.load(batch_model) as m:
        inp = np.zeros(m.io_inputs[0].nbytes, np.uint8)
        inp[:x.nbytes] = x.reshape(-1).view(np.uint8)
        shape_data = np.array([2], np.int32)
        out = np.empty(m.outputs[0].nbytes, np.uint8)
        m.execute_raw([inp.ctypes.data, shape_data.ctypes.data], [out.ctypes.data])
        assert_close(out.view(np.float32)[:20].reshape(2, 10), ort_run(proto, {"x": x})[0], "y")
        shape_data[0] = 99   # the caller reuses its buffer
        run_and_compare(m, proto, {"x": x})


def test_fused_elementwise_nodes_read_their_own_gears_values(tmp_path):
    """An element-wise chain over an intermediate value (swish after a MatMul) fuses into one
    node per gear; each reads its own gear's value (a static model has no other to read)."""
    from onnx import TensorProto, helper, numpy_helper
    w = np.random.default_rng(5).standard_normal((8, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["s"]), helper.make_node("Sigmoid", ["s"], ["g"]),
         helper.make_node("Mul", ["s", "g"], ["m"]), helper.make_node("Add", ["m", "x"], ["y"])], "swish",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], [numpy_helper.from_array(w, "w")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    path = tmp_path / "swish.om2"
    om2gen.compile(proto, path, input_shapes={"x": (-1, 8)}, dynamic_batch_size=[1, 2, 4])
    rng = np.random.default_rng(6)
    with om2gen.load(path) as m:
        for b in (4, 1, 2):
            run_and_compare(m, proto, {"x": rng.standard_normal((b, 8)).astype(np.float32)})


def test_the_archive_stores_constants_once_and_sizes_memory_for_the_largest_gear(batch_model, tmp_path):
    static = tmp_path / "static.om2"
    om2gen.compile(gear_models.cnn_batch(), static, input_shapes={"x": (8, 3, 16, 16)})
    geared, single = zipfile.ZipFile(batch_model), zipfile.ZipFile(static)
    blob = "data/constants/constants_0"
    # the gear table is the only constant a static model does not have
    assert geared.getinfo(blob).file_size - single.getinfo(blob).file_size <= 64
    meta = json.loads(geared.read("data/model_0/model_meta.json"))
    static_meta = json.loads(single.read("data/model_0/model_meta.json"))
    assert meta["work_size"] == static_meta["work_size"]
    assert meta["dynamic_type"] == 1 and meta["dynamic_batch_info"] == [[1], [2], [4], [8]]
    assert meta["user_designate_shape_order"] == ["x"]
    assert meta["dynamic_output_shape"] == [f"{i},0,{b},10" for i, b in enumerate((1, 2, 4, 8))]
    assert meta["inputs"][-1]["name"] == "ascend_mbatch_shape_data" and meta["inputs"][-1]["shape"] == [1]
    assert meta["inputs"][0]["origin_input_dims"] == [-1, 3, 16, 16] and meta["inputs"][0]["shape"] == [8, 3, 16, 16]
    # kernels that take their shapes from the tiling data are shared between gears (which
    # convolutions are such kernels depends on the ISA's cost model, so not all need be)
    tasks = json.loads(geared.read("data/model_0/debug/task_info.json"))["tasks"]
    gears_of: dict[str, set[str]] = {}
    for t in tasks:
        if t["kernel"] and "_ascend_mbatch_batch_" in t["op_name"]:
            gears_of.setdefault(t["kernel"], set()).add(t["op_name"].rsplit("_", 1)[1])
    assert any(len(g) > 1 for k, g in gears_of.items() if k.startswith("Conv_"))
    assert any(len(g) > 1 for k, g in gears_of.items() if k.startswith("Gemm_"))


def test_dynamic_image_size(tmp_path):
    proto = gear_models.cnn_image()
    path = tmp_path / "image.om2"
    om2gen.compile(proto, path, input_shapes={"x": (1, 3, -1, -1)}, dynamic_image_size="16,16;24,32;32,20")
    rng = np.random.default_rng(2)
    with om2gen.load(path) as m:
        for h, w in ((24, 32), (16, 16), (32, 20)):
            got = run_and_compare(m, proto, {"x": rng.standard_normal((1, 3, h, w)).astype(np.float32)})
            assert got["y"].shape == (1, 8, h // 2, w // 2)
        with pytest.raises(InputError, match="dynamic image size"):
            m.run({"x": np.zeros((1, 3, 16, 24), np.float32)})


def test_encoder_sequence_length_as_dynamic_dims(tmp_path):
    """torch.onnx's Shape/Gather/Concat feeding Reshape fold per gear."""
    proto = gear_models.encoder()
    path = tmp_path / "encoder.om2"
    om2gen.compile(proto, path, input_shapes={"input_ids": (1, -1)}, dynamic_dims=[(8,), (16,), (32,)])
    rng = np.random.default_rng(3)
    with om2gen.load(path) as m:
        assert m.inputs[0].shape == (1, -1)
        for s in (32, 8, 16):
            got = run_and_compare(m, proto, {"input_ids": rng.integers(0, 50, (1, s)).astype(np.int64)})
            assert got["h"].shape == (1, s, 16)


def test_the_gear_options_are_recorded_in_the_manifest(batch_model):
    manifest = json.loads(zipfile.ZipFile(batch_model).read("manifest.json"))
    assert manifest["options"]["dynamic_batch_size"] == "1,2,4,8"
    assert manifest["options"]["input_shapes"] == {"x": [-1, 3, 16, 16]}


def test_a_symbolic_dim_without_a_gear_names_the_gear_options(tmp_path):
    with pytest.raises(ShapeError) as e:
        om2gen.compile(gear_models.cnn_batch(), tmp_path / "m.om2")
    assert "dynamic_batch_size=[1, 2, 4, 8]" in str(e.value)


def test_the_command_line_takes_atc_spellings(tmp_path, capsys):
    onnx_path, out = tmp_path / "cnn.onnx", tmp_path / "cnn.om2"
    onnx.save(gear_models.cnn_batch(), onnx_path)
    assert main(["compile", str(onnx_path), "-o", str(out), "--input_shape", "x:-1,3,16,16",
                 "--dynamic_batch_size", "2,4", "-q"]) == 0
    x = np.random.default_rng(4).standard_normal((3, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path)]) != 0
    assert "no gear" in capsys.readouterr().err
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path),
                 "--pad-to-gear"]) == 0
    assert_close(np.load(tmp_path / "y.npy"), ort_run(gear_models.cnn_batch(), {"x": x})[0], "y")
    assert main(["inspect", str(out)]) == 0
    assert "gear 1 [4]: x[4, 3, 16, 16] -> y[4, 10]" in capsys.readouterr().out


def test_the_graph_dump_has_each_gear_as_a_subgraph_of_the_case(batch_model):
    graph = json.loads(zipfile.ZipFile(batch_model).read("data/model_0/debug/ge_model.json"))
    case = next(n for n in graph["nodes"] if n["op_type"] == "Case")
    assert [s["name"] for s in case["subgraphs"]] == [f"batch_{i}" for i in range(4)]
    for i, (b, sub) in enumerate(zip((1, 2, 4, 8), case["subgraphs"])):
        x, = sub["inputs"]
        assert (x["name"], x["outer"], x["shape"]) == (f"x_ascend_mbatch_batch_{i}", "x", [b, 3, 16, 16])
        assert [(o["outer"], o["shape"]) for o in sub["outputs"]] == [("y", [b, 10])]
        assert sub["nodes"] and all(n["name"].endswith(f"_ascend_mbatch_batch_{i}") for n in sub["nodes"])
