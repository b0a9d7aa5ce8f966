"""Hostile and odd ONNX models get a typed om2gen error at compile time that names the node (or
input, or initializer) and says what is wrong: never an untyped traceback, and never an archive
that compiles and then fails at load. The models are the fuzzer's seeds (tools/onnx_mutants.py)
with one edit each; the last test is a small seeded run of tools/fuzz_compile.py."""
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import check_model
from onnx import TensorProto, helper, numpy_helper

import om2gen
from om2gen.frontend import limits
from om2gen.frontend.onnx_import import import_onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import fuzz_compile  # noqa: E402
import onnx_mutants  # noqa: E402


def with_attrs(model, node_name, **attrs):
    node = next(n for n in model.graph.node if n.name == node_name)
    for name, value in attrs.items():
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute(name, value)])
    return model


def with_init(model, name, value):
    t = next(t for t in model.graph.initializer if t.name == name)
    t.CopyFrom(numpy_helper.from_array(np.asarray(value), name))
    return model


def refused(model, error, *needles, **compile_opts):
    """Compiles `model` expecting `error`; every needle must be in its message. Returns the message."""
    with pytest.raises(error) as e:
        om2gen.compile(model, Path(compile_opts.pop("tmp")) / "o.om2", **compile_opts)
    msg = str(e.value)
    for n in needles:
        assert n in msg, (n, msg)
    return msg


# ---- convolution and pooling attributes ----

@pytest.mark.parametrize("node,op,attr,value", [
    ("conv1", "Conv", "strides", [0, 1]),              # was ZeroDivisionError
    ("pool1", "MaxPool", "strides", [0, 2]),           # was ZeroDivisionError
    ("pool2", "AveragePool", "strides", [2, 0]),       # was ZeroDivisionError
    ("up", "ConvTranspose", "strides", [0, 2]),        # was C that does not compile
    ("conv2", "Conv", "dilations", [-1, 2]),           # was compiled
    ("conv2", "Conv", "dilations", [0, 2]),            # was compiled
    ("pool1", "MaxPool", "dilations", [1, 0]),         # was C that does not compile
    ("up", "ConvTranspose", "dilations", [0, 1]),      # was compiled
    ("up", "ConvTranspose", "output_padding", [-1, 0]),
], ids=lambda v: str(v))
def test_stride_dilation_below_minimum(tmp_path, node, op, attr, value):
    msg = refused(with_attrs(onnx_mutants.cnn(), node, **{attr: value}), om2gen.ModelError,
                  f"node {node!r} ({op})", attr, str(value), tmp=tmp_path)
    assert "re-export" in msg


@pytest.mark.parametrize("node,op,attr,value", [
    ("conv2", "Conv", "strides", [1, (1 << 63) - 1]),   # was compiled, ran, and gave wrong values
    ("pool1", "MaxPool", "pads", [0, 0, 1 << 40, 0]),
    ("up", "ConvTranspose", "dilations", [1 << 31, 1]),
], ids=lambda v: str(v))
def test_window_attribute_longer_than_any_dim(tmp_path, node, op, attr, value):
    refused(with_attrs(onnx_mutants.cnn(), node, **{attr: value}), om2gen.UnsupportedOpError,
            f"node {node!r} ({op})", f"{attr} {value}", "2^31 - 1", tmp=tmp_path)


@pytest.mark.parametrize("node,op", [("conv1", "Conv"), ("pool1", "MaxPool"), ("up", "ConvTranspose")])
def test_negative_pads(tmp_path, node, op):
    refused(with_attrs(onnx_mutants.cnn(), node, pads=[-1, 0, 0, 0]), om2gen.ModelError,
            f"node {node!r} ({op})", "pads [-1, 0, 0, 0]", "negative", tmp=tmp_path)


@pytest.mark.parametrize("node,op,weight", [("conv1", "Conv", "cw1"), ("up", "ConvTranspose", "tw")])
def test_kernel_shape_not_the_weights(tmp_path, node, op, weight):
    refused(with_attrs(onnx_mutants.cnn(), node, kernel_shape=[5, 5]), om2gen.ShapeError,
            f"node {node!r} ({op})", "kernel_shape [5, 5]", repr(weight), tmp=tmp_path)


def test_weight_with_an_empty_kernel(tmp_path):
    model = with_init(onnx_mutants.cnn(), "cw2", np.zeros((8, 8, 0, 3), np.float32))
    with_attrs(model, "conv2", kernel_shape=[0, 3])
    refused(model, om2gen.ShapeError, "node 'conv2' (Conv)", "empty kernel", tmp=tmp_path)


# ---- sizes: wrapped int64 products and tensors no machine holds ----

def _declared_dim(model, i, value):
    model.graph.input[0].type.tensor_type.shape.dim[i].dim_value = value
    return model


def test_declared_dim_of_2_62_is_refused_not_wrapped(tmp_path):
    # 2^62 x 16 float32 is 2^68 bytes: numpy's int64 product wrapped it to 0 and the model compiled
    msg = refused(_declared_dim(onnx_mutants.mlp(), 0, 1 << 62), om2gen.ShapeError, "input 'x'",
                  "float32[4611686018427387904,16]", "2^66 elements", "2^31 - 1 per tensor", limits.ENV,
                  tmp=tmp_path)
    assert "declares" in msg


def test_pinned_shape_too_large_speaks_the_callers_words(tmp_path):
    model = onnx_mutants.mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    refused(model, om2gen.ShapeError, "input_shapes={'x': (1099511627776, 16)}", "64 TiB", tmp=tmp_path,
            input_shapes={"x": (1 << 40, 16)})
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    proc = subprocess.run([sys.executable, "-m", "om2gen", "compile", str(path), "-o", str(tmp_path / "o.om2"),
                           "--input-shape", f"x:{1 << 40},16"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--input-shape x:{1 << 40},16" in proc.stderr and "64 TiB" in proc.stderr, proc.stderr


@pytest.mark.parametrize("init,value,node,op", [
    ("cos_shape", [1 << 20, 1 << 10, 1 << 10], "fill", "ConstantOfShape"),   # 2^40 elements: failed only at load
    ("exp_shape", [1 << 40, 2, 3, 4], "expand", "Expand"),                   # was MemoryError in lowering
    ("repeats", [1, 1, 1, 1 << 40], "tile", "Tile"),
    ("r_limit", np.array(2.0 ** 40, np.float32), "range", "Range"),
    ("scales", np.array([1, 1, 2 ** 20, 2 ** 20], np.float32), "resize", "Resize"),   # compiled (33 s)
    ("pads", [0, 0, 0, (1 << 63) - 1, 0, 0, 0, 0], "pad", "Pad"),            # wrapped, then compiled
], ids=lambda v: v if isinstance(v, str) else None)
def test_huge_generated_tensor_is_refused_naming_the_node(tmp_path, init, value, node, op):
    refused(with_init(onnx_mutants.shapes(), init, value), om2gen.ShapeError, f"node {node!r} ({op})",
            "more than the 2^31 - 1 per tensor", tmp=tmp_path)


def test_empty_tensor_with_a_dim_beyond_int64(tmp_path):
    # Slice empties dim 1, then Pad adds 2^63 - 1 to dim 2: 0 elements, but a dim no int64 holds
    model = with_init(onnx_mutants.shapes(), "ends", [0, 3])
    with_init(model, "pads", [0, 0, (1 << 63) - 1, 0, 0, 0, 0, 0])
    refused(model, om2gen.ShapeError, "node 'pad' (Pad)", "float32[2,0,9223372036854775809,8]", "dim 2 is about 2^63",
            tmp=tmp_path)


def test_constant_of_shape_message_gives_the_size_and_the_shape_input(tmp_path):
    msg = refused(with_init(onnx_mutants.shapes(), "cos_shape", [1 << 20, 1 << 10, 1 << 10]), om2gen.ShapeError,
                  tmp=tmp_path)
    assert "float32[1048576,1024,1024]" in msg and "2^40 elements (4 TiB)" in msg
    assert "int64[3] = [1048576, 1024, 1024]" in msg


def test_a_big_constant_of_shape_is_not_evaluated_to_be_folded():
    """1 GiB is within the limit but above what folding keeps: the frontend must see that from
    the shape, not by evaluating the node (which allocated the whole tensor, then dropped it)."""
    model = with_init(onnx_mutants.shapes(), "cos_shape", [256, 1024, 1024])
    fill = model.graph.node[0]
    del model.graph.node[1:]
    del model.graph.output[:]
    model.graph.output.extend([helper.make_tensor_value_info(fill.output[0], TensorProto.FLOAT, [256, 1024, 1024])])
    tracemalloc.start()
    try:
        graph = import_onnx(model)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [n.op_type for n in graph.nodes] == ["ConstantOfShape"]   # left for a kernel to fill
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"


def test_a_tensor_too_big_for_the_kernels_index_arithmetic(tmp_path):
    # 16 x 2^27 = 2^31 elements (8 GiB): the MaxPool kernel multiplied its dims as C ints and did not
    # build ("integer overflow in expression of type 'int'"), a wall of compiler output
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])], "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16, 1 << 27])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 8, 1 << 26])]),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    refused(model, om2gen.ShapeError, "input 'x'", "float32[1,1,16,134217728]", "2^31 elements (8 GiB)",
            "32-bit", tmp=tmp_path)


def test_the_limit_is_an_environment_setting(tmp_path, monkeypatch):
    monkeypatch.setenv(limits.ENV, "256")   # the MLP's 16 x 32 weight has 512 elements
    refused(onnx_mutants.mlp(), om2gen.ShapeError, "initializer 'w1'", "512 elements (2 KiB)", "256 per tensor",
            tmp=tmp_path)
    monkeypatch.setenv(limits.ENV, "lots")
    refused(onnx_mutants.mlp(), om2gen.ShapeError, f"{limits.ENV}='lots' is not a tensor size", tmp=tmp_path)


# ---- initializers, shape inputs and values that cannot be read ----

def test_initializer_whose_data_does_not_fill_its_dims(tmp_path):
    model = onnx_mutants.mlp()
    t = next(t for t in model.graph.initializer if t.name == "b2")
    t.CopyFrom(onnx.TensorProto(name="b2", data_type=TensorProto.FLOAT, dims=[1], float_data=[0.0] * 8))
    refused(model, om2gen.ModelError, "initializer 'b2'", "does not match its dims", tmp=tmp_path)


def test_initializer_of_an_unsupported_dtype_is_named(tmp_path):
    model = onnx_mutants.mlp()
    next(t for t in model.graph.initializer if t.name == "w2").data_type = TensorProto.BFLOAT16
    refused(model, om2gen.UnsupportedOpError, "initializer 'w2'", "BFLOAT16", tmp=tmp_path)


@pytest.mark.parametrize("init,value", [("r_start", np.nan), ("r_limit", np.nan), ("r_delta", np.nan),
                                        ("r_start", np.inf), ("r_limit", -np.inf)])
def test_range_bounds_not_finite(tmp_path, init, value):
    # (a delta of inf is fine: the spec's length max(ceil((limit - start) / delta), 0) is 0)
    refused(with_init(onnx_mutants.shapes(), init, np.array(value, np.float32)), om2gen.ShapeError,
            "node 'range' (Range)", "finite", tmp=tmp_path)


def test_resize_scale_not_finite(tmp_path):
    refused(with_init(onnx_mutants.shapes(), "scales", np.array([1, 1, np.nan, 1], np.float32)), om2gen.ShapeError,
            "node 'resize' (Resize)", "positive finite", tmp=tmp_path)


def test_shape_input_holding_nan(tmp_path):
    # a float shape tensor (ONNX wants int64) with a NaN: was ValueError converting NaN to int
    model = with_init(onnx_mutants.shapes(), "exp_shape", np.array([2, np.nan, 3, 4], np.float32))
    refused(model, om2gen.ShapeError, "node 'expand' (Expand)", "integers", tmp=tmp_path)


@pytest.mark.parametrize("index", [4, -5, 1 << 31])
def test_gather_constant_index_out_of_range(tmp_path, index):
    # the kernel gathers zeros for an index out of range (ONNX Runtime fails at run time); a
    # constant one is a malformed model, refused when compiling
    model = with_init(onnx_mutants.seq(), "idx", [0, index])
    refused(model, om2gen.ShapeError, "node 'gather' (Gather)", f"hold {index}", "dim 1 of size 4", tmp=tmp_path)


def test_slice_of_a_scalar(tmp_path):
    model = onnx_mutants.shapes()
    rng = next(n for n in model.graph.node if n.name == "range")
    rng.op_type, rng.name = "Slice", "slice_scalar"   # reads r_start, a scalar, as its data
    refused(model, om2gen.ShapeError, "node 'slice_scalar' (Slice)", "scalar", tmp=tmp_path)


@pytest.mark.parametrize("node,op,attr,value", [
    ("reduce", "ReduceSum", "keepdims", 1 << 31),   # ORT reads it as 0, om2gen read it as 1
    ("pool2", "AveragePool", "ceil_mode", 7),
], ids=lambda v: str(v))
def test_flag_attribute_that_is_not_0_or_1(tmp_path, node, op, attr, value):
    seed = onnx_mutants.shapes() if node == "reduce" else onnx_mutants.cnn()
    refused(with_attrs(seed, node, **{attr: value}), om2gen.ModelError, f"node {node!r} ({op})",
            f"attribute {attr} is {value}", "0 or 1", tmp=tmp_path)


def test_flag_of_a_node_that_folds(tmp_path):
    # all inputs constant: the node is evaluated at compile time, but not with a malformed flag
    model = onnx_mutants.mlp()
    model.graph.node.insert(0, helper.make_node("ReduceSum", ["b2"], ["b2_sum"], name="sum_b2", keepdims=7))
    refused(model, om2gen.ModelError, "node 'sum_b2' (ReduceSum)", "attribute keepdims is 7", tmp=tmp_path)


def test_flag_the_op_does_not_read_is_checked_too(tmp_path):
    # om2gen's TopK always sorts; sorted=-2 still is malformed (ORT returned another order)
    refused(with_attrs(onnx_mutants.seq(), "topk", sorted=-2), om2gen.ModelError, "node 'topk' (TopK)",
            "attribute sorted is -2", tmp=tmp_path)


@pytest.mark.parametrize("elem_type", [TensorProto.BOOL, TensorProto.DOUBLE, TensorProto.BFLOAT16])
def test_output_declared_with_another_dtype(tmp_path, elem_type):
    # compiled, the archive returned float32 where the model declares another type
    model = onnx_mutants.mlp()
    model.graph.output[0].type.tensor_type.elem_type = elem_type
    refused(model, om2gen.ModelError, "graph output 'y'", TensorProto.DataType.Name(elem_type),
            "node 'softmax' (Softmax)", "float32", tmp=tmp_path)


def test_pad_of_an_empty_slice_compiles_and_runs(tmp_path):
    # the Slice is empty (nothing to compute, no task) but the Pad after it is not: lowering had
    # no address for the Slice's output (KeyError)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    model = onnx.helper.make_model(helper.make_graph(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["s"], name="empty_slice"),
         helper.make_node("Pad", ["s", "pads"], ["y"], name="pad", mode="constant")],
        "empty", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 4])],
        [numpy_helper.from_array(np.array([2], np.int64), "starts"), numpy_helper.from_array(np.array([2], np.int64), "ends"),
         numpy_helper.from_array(np.array([1], np.int64), "axes"),
         numpy_helper.from_array(np.array([0, 1, 0, 0, 1, 0], np.int64), "pads")]),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    got = check_model(model, {"x": x}, tmp_path)
    assert got["y"].shape == (2, 2, 4) and not got["y"].any()


def test_cli_gives_one_line_naming_the_node(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(with_attrs(onnx_mutants.cnn(), "conv1", strides=[0, 1]), path)
    proc = subprocess.run([sys.executable, "-m", "om2gen", "compile", str(path), "-o", str(tmp_path / "o.om2")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == om2gen.ModelError.exit_code, proc.stderr
    assert proc.stderr.startswith("om2gen: error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert "node 'conv1' (Conv): strides [0, 1]" in proc.stderr
    assert not (tmp_path / "o.om2").exists()


# ---- the fuzzer ----

def test_seeded_fuzz_run_has_no_untyped_errors():
    results = fuzz_compile.run(60, seed=12, jobs=2, timeout=120, stage="lower")
    assert len(results) == 60
    bad = [r for r in results if r.kind in fuzz_compile.BAD]
    assert not bad, fuzz_compile.summary(results)
    kinds = {r.kind for r in results}
    assert {"typed", "ok"} <= kinds, fuzz_compile.summary(results)   # the run reached both outcomes
