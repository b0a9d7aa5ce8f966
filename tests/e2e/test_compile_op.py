"""Single-op compile (om2gen/cli/single_op.py, `om2gen compile-op`): one operator → an archive that runs
like ONNX Runtime on the same one-node model; GE op types through the GE frontend's mapping;
every bad description a typed error and no file."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import assert_close, ort_run, rand
from onnx import helper

import om2gen
from om2gen.cli import main
from om2gen.cli.op_spec import parse_attr, parse_const, parse_input
from om2gen.cli.single_op import build_model, compile_op, newest_opset
from om2gen.errors import ModelError, NeedsConstantError, ShapeError, UnsupportedOpError
from om2gen.formats.om.container import read_om
from om2gen.formats.om.inspect import inspect_om


def _run(path, feeds):
    with om2gen.load(path) as m:
        return m.run(feeds)


def _check(tmp_path, op, inputs, attrs, feeds, **kw):
    """compile_op + run vs ONNX Runtime on build_model's one-node model (the model compile_op compiles)."""
    model = build_model(op, inputs, attrs, **{k: v for k, v in kw.items() if k in ("outputs", "opset", "frontend")})
    path = compile_op(op, inputs, attrs, tmp_path / f"{op}.om2", **kw)
    got = _run(path, feeds)
    ref = ort_run(model, feeds)
    assert list(got) == [o.name for o in model.graph.output]
    for (name, g), r in zip(got.items(), ref):
        assert_close(g, r, f"{op} {name}")
    return model, got


def test_conv_with_constant_weights_and_bias(tmp_path):
    w, b = rand(8, 3, 3, 3, seed=1), rand(8, seed=2)
    model, got = _check(tmp_path, "Conv", ["x:float32:1,3,12,12", ("w", w), ("b", b)],
                        {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {"x": rand(1, 3, 12, 12, seed=3)})
    assert [i.name for i in model.graph.input] == ["x"]
    assert sorted(i.name for i in model.graph.initializer) == ["b", "w"]
    assert got["Y"].shape == (1, 8, 6, 6)
    assert model.opset_import[0].version == newest_opset()


def test_an_op_whose_output_count_the_data_decides(tmp_path):
    """NonZero's count is a named dim of the one-node model (docs/dynamic-shapes.md)."""
    x = np.array([[0, 1.5, 0], [2, 0, -1]], np.float32)
    model, got = _check(tmp_path, "NonZero", ["x:float32:2,3"], None, {"x": x})
    assert got["Y"].shape == (2, 3)
    assert model.graph.output[0].type.tensor_type.shape.dim[1].dim_param


def test_matmul_both_inputs_at_run_time(tmp_path):
    _check(tmp_path, "MatMul", ["a:float32:2,5,7", "b:float32:7,3"], None,
           {"a": rand(2, 5, 7, seed=4), "b": rand(7, 3, seed=5)})


def test_add_broadcasts(tmp_path):
    _, got = _check(tmp_path, "Add", ["x:float32:2,3,4", "y:float32:1,4"], None,
                    {"x": rand(2, 3, 4, seed=6), "y": rand(1, 4, seed=7)}, outputs=["sum"])
    assert got["sum"].shape == (2, 3, 4)


def test_softmax_axis_from_cli_text(tmp_path):
    x = rand(3, 4, 5, seed=8)
    model, got = _check(tmp_path, "Softmax", ["x:float32:3,4,5"], ["axis=1"], {"x": x})
    assert helper.get_attribute_value(model.graph.node[0].attribute[0]) == 1
    np.testing.assert_allclose(got["output"].sum(axis=1), 1.0, rtol=1e-5)


def test_reshape_with_constant_shape(tmp_path):
    x = rand(2, 3, 4, seed=9)
    _, got = _check(tmp_path, "Reshape", ["x:float32:2,3,4", "shape:int64:2=4,-1"], None, {"x": x})
    np.testing.assert_array_equal(got["reshaped"], x.reshape(4, 6))


def test_const_from_npy_file(tmp_path):
    w = rand(6, 4, seed=10)
    np.save(tmp_path / "w.npy", w)
    x = rand(3, 6, seed=11)
    _, got = _check(tmp_path, "MatMul", ["x:float32:3,6", f"w:float32:6,4={tmp_path / 'w.npy'}"], None, {"x": x})
    assert_close(got["Y"], x @ w)


def test_ge_conv2d_matches_the_onnx_conv_it_stands_for(tmp_path):
    """GE Conv2D: NCHW strides, pads [top, bottom, left, right]; checked against a hand-built ONNX
    Conv run by ONNX Runtime (pads [t, l, b, r]), not against om2gen's own translation."""
    w, x = rand(4, 3, 3, 3, seed=12), rand(1, 3, 9, 9, seed=13)
    path = compile_op("Conv2D", ["x:float32:1,3,9,9", ("filter", w)],
                      ["strides=1,1,2,2", "pads=1,0,2,1", "dilations=1,1,1,1"], tmp_path / "conv2d.om2")
    got = _run(path, {"x": x})
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 2, 0, 1])
    graph = helper.make_graph([node], "ref", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_empty_tensor_value_info("y")],
                              [helper.make_tensor("w", 1, w.shape, w.ravel())])
    ref = ort_run(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {"x": x})[0]
    assert list(got) == ["y"]
    assert_close(got["y"], ref)


def test_ge_matmulv2_transpose(tmp_path):
    a, b = rand(3, 5, seed=14), rand(4, 5, seed=15)
    path = compile_op("MatMulV2", ["x1:float32:3,5", "x2:float32:4,5"], {"transpose_x2": True},
                      tmp_path / "mm.om2", outputs=["out"])
    assert_close(_run(path, {"x1": a, "x2": b})["out"], a @ b.T)


def test_ge_frontend_forces_the_ge_meaning_of_a_shared_name(tmp_path):
    """MatMul is an ONNX op type and a GE one (with transpose_x1/x2): --frontend ge picks GE's."""
    model = build_model("MatMul", ["a:float32:5,3", "b:float32:5,4"], ["transpose_x1=true"], frontend="ge")
    assert [n.op_type for n in model.graph.node] == ["Gemm"]
    with pytest.raises(ModelError, match="no attribute 'transpose_x1'"):
        build_model("MatMul", ["a:float32:5,3", "b:float32:5,4"], ["transpose_x1=true"])


def test_format_om_writes_a_classic_om_file(tmp_path):
    path = compile_op("Relu", ["x:float32:2,8"], None, tmp_path / "relu.om", format="om")
    read_om(path)   # validates header, partition table and partitions
    model = inspect_om(path)["models"][0]
    assert [op["type"] for op in model["ops"]] == ["Data", "Relu", "NetOutput"]
    assert model["inputs"] == [{"name": "x", "desc": "float32[2, 8]"}]


def test_format_follows_the_extension(tmp_path, capsys):
    """-o relu.om without --format (CLI and Python) writes a classic OM file, as om2gen compile does."""
    assert main(["compile-op", "Relu", "--input", "x:float32:2,8", "-o", str(tmp_path / "cli.om"), "-q"]) == 0
    path = compile_op("Relu", ["x:float32:2,8"], None, tmp_path / "api.om")
    x = rand(2, 8, seed=4)
    for p in (tmp_path / "cli.om", path):
        read_om(p)
        with om2gen.load(p) as m:
            assert m.format == "om"
            (got,) = m.run({"x": x}).values()
            assert_close(got, np.maximum(x, 0))


def test_optional_outputs_by_name_and_skipped_inputs(tmp_path):
    x = rand(1, 1, 4, 4, seed=16)
    _, got = _check(tmp_path, "MaxPool", ["x:float32:1,1,4,4"], {"kernel_shape": [2, 2]}, {"x": x},
                    outputs=["y", "indices"])
    assert got["indices"].dtype == np.int64
    _, got = _check(tmp_path, "Clip", ["x:float32:6", None, "hi:float32:=0.25"], None, {"x": x.ravel()[:6]})
    assert got["output"].max() <= 0.25


def test_split_output_count_from_num_outputs():
    model = build_model("Split", ["x:float32:6,2"], ["axis=0", "num_outputs=3"])
    assert [o.name for o in model.graph.output] == ["outputs_0", "outputs_1", "outputs_2"]
    assert [list(d.dim_value for d in o.type.tensor_type.shape.dim) for o in model.graph.output] == [[2, 2]] * 3


def test_custom_operator_of_a_library(tmp_path):
    """ScaleShift of the sample custom-op library: y0 = x*alpha + beta, y1 = x*alpha - beta."""
    sample = Path(__file__).resolve().parents[2] / "samples" / "custom_op"
    subprocess.run([sys.executable, str(sample / "build.py"), "--out", str(tmp_path / "lib")], check=True,
                   timeout=600, capture_output=True)
    libs = sorted((tmp_path / "lib").glob("*.so"))
    with pytest.raises(UnsupportedOpError, match="unknown operator 'ScaleShift'"):
        build_model("ScaleShift", ["x:float32:2,4,8,8"], None)
    path = compile_op("ScaleShift", ["x:float32:2,4,8,8"], ["alpha:float=2", "beta=0.5"], tmp_path / "ss.om2",
                      outputs=["y0", "y1"], custom_op_libs=libs)
    x = rand(2, 4, 8, 8, seed=19)
    got = _run(path, {"x": x})
    assert_close(got["y0"], x * np.float32(2) + np.float32(0.5))
    assert_close(got["y1"], x * np.float32(2) - np.float32(0.5))


def test_cli_compile_op_then_run(tmp_path, capsys):
    w = rand(4, 2, 1, 1, seed=17)
    np.save(tmp_path / "w.npy", w)
    out, onnx_path = tmp_path / "op.om2", tmp_path / "op.onnx"
    rc = main(["compile-op", "Conv", "--input", "x:float32:1,2,5,5",
                   "--const", f"w:float32:4,2,1,1={tmp_path / 'w.npy'}", "--attr", "group:int=1",
                   "--attr", "kernel_shape=1,1", "--output", "y", "-o", str(out), "--save-onnx", str(onnx_path), "-q"])
    assert rc == 0 and f"wrote {out}" in capsys.readouterr().out
    x = rand(1, 2, 5, 5, seed=18)
    assert_close(_run(out, {"x": x})["y"], ort_run(onnx.load(onnx_path), {"x": x})[0])


def test_cli_error_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "bad.om2"
    rc = main(["compile-op", "Softmax", "--input", "x:float32:2,3", "--attr", "axis=one", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == ModelError.exit_code
    assert err.count("\n") == 1 and "attribute 'axis' of Softmax" in err and "is not INT" in err
    assert list(tmp_path.iterdir()) == []


# --- errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize("op, inputs, attrs, kw, error, match", [
    ("Cnov", ["x:float32:1"], None, {}, UnsupportedOpError, r"unknown operator 'Cnov'.*did you mean Conv"),
    ("softmax", ["x:float32:1"], None, {}, UnsupportedOpError, r"did you mean Softmax"),
    ("Det", ["x:float32:2,2"], None, {}, UnsupportedOpError, r"Det is an ONNX operator, but om2gen has no kernel"),
    ("Conv", ["x:float32:1,3,8,8"], None, {"frontend": "ge"}, UnsupportedOpError,
     r"not a GE op type om2gen maps \(did you mean Conv2D"),
    ("Conv", ["x:float32:1,3,8,8"], None, {}, ModelError, r"Conv needs input\(s\) 1 \(W\)"),
    ("Conv", ["x:float32:1,3,8,8", None, "b:float32:4"], None, {}, ModelError, r"input 1 \(W\) is required"),
    ("Relu", ["x:float32:2", "y:float32:2"], None, {}, ModelError, r"Relu takes at most 1 input"),
    ("Cast", ["x:float32:2"], None, {}, ModelError, r"Cast requires attribute 'to' \(INT\)"),
    ("Softmax", ["x:float32:2"], {"axis": 1.5}, {}, ModelError, r"1.5 is not INT"),
    ("Softmax", ["x:float32:2"], ["axis:floats=1"], {}, ModelError, r"the schema types it INT, not FLOATS"),
    ("Softmax", ["x:float32:2"], ["axes=0"], {}, ModelError, r"no attribute 'axes' \(did you mean axis\?\)"),
    ("Add", ["x:float32:2", "y:int64:2"], None, {}, ModelError, r"is int64 but input 0 \('x'\) is float32"),
    ("Conv", ["x:int64:1,1,3,3", "w:int64:1,1,1,1"], None, {}, ModelError, r"is int64; T allows: .*float"),
    ("Add", ["x:float32:2,3", "y:float32:4"], None, {}, ShapeError, r"do not broadcast"),
    ("Relu", ["x:float32:3=1,2,3"], None, {}, ModelError, r"every operand is a constant"),
    ("Relu", ["x:float32:3"], None, {"outputs": ["x"]}, ModelError, r"output name 'x' is used twice"),
    ("Gelu", ["x:float32:3"], None, {"opset": 17}, ModelError, r"not defined at opset 17; ONNX has it from opset 20"),
    ("Upsample", ["x:float32:1,1,2,2", "s:float32:4=1,1,2,2"], None, {}, ModelError, r"deprecated at opset"),
    ("Reshape", ["x:float32:6", "s:int64:1"], None, {}, NeedsConstantError, r"--const s:int64:1=V0"),
    ("Split", ["x:float32:6"], None, {}, ModelError, r"variadic output; name the outputs with --output"),
    ("Conv2D", ["x:float32:1,3,8,8", "w:float32:4,3,3,3"], ["strides=2"], {}, ModelError,
     r"GE op Conv2D: the inputs or attributes do not have the form it expects"),
    ("Conv2D", ["x:float32:1,3,8,8"], None, {}, ModelError, r"input 1 is missing"),
    ("Conv2D", ["x:float32:1,3,8,8", "w:float32:4,3,3,3"], None, {"opset": 13}, ModelError,
     r"GE ops translate to ONNX opset 17"),
])
def test_bad_descriptions_are_typed_errors_and_write_nothing(tmp_path, op, inputs, attrs, kw, error, match):
    with pytest.raises(error, match=match):
        compile_op(op, inputs, attrs, tmp_path / "op.om2", **kw)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("parse, text, match", [
    (parse_input, "x:float32", r"--input 'x:float32': expected NAME:DTYPE:SHAPE"),
    (parse_input, "x:flaot32:1", r"unknown dtype 'flaot32' \(did you mean float32\?\)"),
    (parse_input, "x:float32:1,a", r"SHAPE must be integers"),
    (parse_input, "x:float32:-2", r"dims must be >= 0, or -1 where a gear option"),
    (parse_const, "w:float32:-1=1", r"dims must be >= 0"),
    (parse_input, "x:float32:2=1,2", r"a constant operand is given with --const"),
    (parse_const, "s:int64:2", r"--const 's:int64:2': expected NAME:DTYPE:SHAPE=FILE.npy"),
    (parse_const, "s:int64:2=1,2,3", r"3 value\(s\) given, shape \[2\] needs 2"),
    (parse_const, "s:int64:2=1,x", r"must be int64 numbers"),
    (parse_const, "s:int8:1=300", r"must be int8 numbers"),
    (parse_const, "w:float32:2=missing.npy", r"cannot read missing.npy as a .npy array"),
    (parse_attr, "axis", r"--attr 'axis': expected K=V or K:TYPE=V"),
    (parse_attr, "axis:integer=1", r"unknown attribute type 'integer'"),
])
def test_malformed_arguments_name_the_argument_and_the_form(parse, text, match):
    with pytest.raises(ModelError, match=match):
        parse(text)


def test_const_file_shape_and_dtype_are_checked(tmp_path):
    np.save(tmp_path / "w.npy", np.zeros((2, 3), np.float32))
    with pytest.raises(ModelError, match=r"holds shape \[2, 3\], not \[3, 2\]"):
        parse_const(f"w:float32:3,2={tmp_path / 'w.npy'}")
    with pytest.raises(ModelError, match=r"holds float32, which does not convert to int64"):
        parse_const(f"w:int64:2,3={tmp_path / 'w.npy'}")
    assert parse_const(f"w={tmp_path / 'w.npy'}").shape == (2, 3)


def test_attr_texts_are_typed_by_the_schema():
    model = build_model("Gemm", ["a:float32:2,3", "b:float32:3,4"], ["alpha=2", "transB:int=0"])
    attrs = {a.name: helper.get_attribute_value(a) for a in model.graph.node[0].attribute}
    assert attrs == {"alpha": 2.0, "transB": 0}
    model = build_model("ReduceSum", ["x:float32:2,3", "axes:int64:1=1"], ["keepdims=0"], opset=13)
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [2]
    model = build_model("Transpose", ["x:float32:2,3,4"], ["perm=2,0,1"])
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [4, 2, 3]


def test_gears_for_one_operator(tmp_path):
    """A -1 dim and a gear option: one archive for every gear, each like ONNX Runtime."""
    w = rand(8, 3, 3, 3, seed=4)
    out = compile_op("Conv", ["x:float32:-1,3,8,8", ("w", w)], {"pads": [1, 1, 1, 1]}, tmp_path / "conv.om2",
                     dynamic_batch_size=[1, 3])
    ref_model = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(w, "w")]), opset_imports=[helper.make_opsetid("", 17)])
    with om2gen.load(out) as m:
        assert m.gears == [{"x": (1, 3, 8, 8)}, {"x": (3, 3, 8, 8)}]
        for batch in (3, 1):
            x = rand(batch, 3, 8, 8, seed=batch)
            assert_close(list(m.run({"x": x}).values())[0], ort_run(ref_model, {"x": x})[0], f"batch {batch}")


def test_gears_from_the_command_line_and_a_minus_one_without_them(tmp_path, capsys):
    path = tmp_path / "relu.om2"
    assert main(["compile-op", "Relu", "--input", "x:float32:16,-1", "--dynamic-dims", "4;8", "-o", str(path),
                 "-q"]) == 0
    with om2gen.load(path) as m:
        x = rand(16, 8, seed=2)
        assert np.array_equal(list(m.run({"x": x}).values())[0], np.maximum(x, 0))
    assert main(["compile-op", "Relu", "--input", "x:float32:16,-1", "-o", str(tmp_path / "no.om2"), "-q"]) != 0
    err = capsys.readouterr().err
    assert "--input x:float32:16,-1 marks a dim -1" in err and "--dynamic-dims" in err
    assert "--input-shape" not in err and not (tmp_path / "no.om2").exists()
    with pytest.raises(ShapeError, match=r"input 'x:float32:16,-1' marks .* dynamic_dims="):
        compile_op("Relu", ["x:float32:16,-1"], {}, tmp_path / "no.om2")
