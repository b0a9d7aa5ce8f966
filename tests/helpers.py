"""Test helpers: build small ONNX models and check om2gen's results against ONNX Runtime."""
from __future__ import annotations

import json
import zipfile

import numpy as np
import onnx
import ort_exact
from onnx import TensorProto, helper, numpy_helper

import om2gen
from om2gen.formats.om2 import layout

_NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
               np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL,
               np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8,
               np.dtype(np.float64): TensorProto.DOUBLE}


def make_model(nodes, inputs: dict, outputs: list[str], initializers: dict | None = None, opset: int = 17,
               name: str = "test") -> onnx.ModelProto:
    """inputs: {name: np.ndarray (for dtype and shape)}; outputs: names (types left to inference)."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, _NP_TO_ONNX[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    # let onnx fill in the outputs' types, as an exporter would
    inferred = onnx.shape_inference.infer_shapes(model)
    model.graph.ClearField("output")
    model.graph.output.extend(inferred.graph.output)
    return model


def ort_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """ONNX Runtime's outputs (CPU EP); for an int8 model on a CPU where ORT's int8 products
    saturate, those of its exact uint8 form (tests/ort_exact.py)."""
    return ort_exact.run_exact(model, feeds, _ort_run)


def _ort_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_close(got: np.ndarray, ref: np.ndarray, what: str = "", tol: float = 1e-4) -> None:
    """The project's float32 rule: max abs error <= tol * max(1, max|reference|)."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    if ref.dtype.kind in "fc":
        finite = np.isfinite(ref)
        assert np.array_equal(np.isnan(got), np.isnan(ref)), f"{what}: NaN positions differ"
        assert np.array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)]), \
            f"{what}: infinities differ"
        bound = tol * max(1.0, float(np.max(np.abs(ref[finite]))) if finite.any() else 1.0)
        err = float(np.max(np.abs(got[finite].astype(np.float64) - ref[finite]))) if finite.any() else 0.0
        assert err <= bound, f"{what}: max abs error {err:.3g} > {bound:.3g}"
    else:
        np.testing.assert_array_equal(got, ref, err_msg=what)


def check_model(model: onnx.ModelProto, feeds: dict, tmp_path, tol: float = 1e-4, **compile_opts) -> dict:
    """Compiles `model`, runs it on `feeds` and compares every output with ONNX Runtime."""
    path = tmp_path / "model.om2"
    om2gen.compile(model, path, **compile_opts)
    with om2gen.load(path) as m:
        got = m.run(feeds)
    ref = ort_run(model, feeds)
    names = [o.name for o in model.graph.output]
    for name, r in zip(names, ref):
        assert_close(got[name], r, name, tol)
    return got


def compile_and_run(model: onnx.ModelProto, feeds: dict, tmp_path, **compile_opts) -> tuple[dict, list[dict]]:
    """Compiles `model` with the debug dumps and runs it: (outputs, the compiled graph's nodes as
    debug/ge_model.json has them), for tests of what the passes made of the model."""
    path = tmp_path / "model.om2"
    om2gen.compile(model, path, debug=True, **compile_opts)
    with om2gen.load(path) as m:
        got = m.run(feeds)
    with zipfile.ZipFile(path) as z:
        nodes = json.loads(z.read(layout.ge_model_json(0)))["nodes"]
    return got, nodes


def check_op(op_type: str, inputs: dict, attrs: dict | None = None, *, consts: dict | None = None,
             n_outputs: int = 1, opset: int = 17, tmp_path, tol: float = 1e-4, input_names=None) -> dict:
    """One node: `inputs` are graph inputs, `consts` initializers (both {name: array}).
    Input order is input_names if given, else inputs then consts."""
    consts = consts or {}
    order = input_names or (list(inputs) + list(consts))
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, order, outs, name=f"{op_type.lower()}_node", **(attrs or {}))
    model = make_model([node], inputs, outs, consts, opset)
    return check_model(model, inputs, tmp_path, tol)


def rand(*shape, seed=0, dtype=np.float32, low=-1.0, high=1.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape).astype(dtype)


def refresh_digests(manifest: dict, entries: dict) -> dict:
    """`manifest` with the size and digests (sha256, blake3) of every listed entry recomputed from
    `entries` {name: bytes}; entries no longer present are dropped from the list."""
    import hashlib

    import blake3
    manifest["entries"] = [dict(e, size=len(entries[e["name"]]), sha256=hashlib.sha256(entries[e["name"]]).hexdigest(),
                                blake3=blake3.blake3(entries[e["name"]]).hexdigest())
                           for e in manifest["entries"] if e["name"] in entries]
    return manifest


def refresh_om_digests(parts: list) -> list:
    """`parts` with MODEL_DEF's partition digests recomputed: the edit looks genuine, so what
    the loader checks after the digests is what the test reaches."""
    from om2gen.formats.om import integrity, proto
    from om2gen.formats.om.container import Partition
    from om2gen.formats.om.layout import ModelPartitionType as PT
    by_type = {p.type.name: bytes(p.data) for p in parts}
    out = []
    for p in parts:
        if p.type == PT.MODEL_DEF:
            try:
                md = proto.ModelDef.FromString(bytes(p.data))
            except Exception:
                out.append(p)
                continue
            if integrity.PARTITION_BLAKE3 in md.attr:
                digests = integrity.partition_digests(by_type, md)
                del md.attr[integrity.PARTITION_BLAKE3].list.s[:]
                md.attr[integrity.PARTITION_BLAKE3].list.s.extend(d.encode() for d in digests)
            p = Partition(p.type, md.SerializeToString(deterministic=True))
        out.append(p)
    return out


def without_dynamic_support(model: onnx.ModelProto, x: str, y: str, name: str) -> list:
    """Nodes y = Cast(QLinearSigmoid(Cast(x to uint8)) to float) whose middle node, named `name`,
    is an op without dynamic support (com.microsoft QLinearSigmoid: its kernel takes static shapes
    only), for tests of how a dynamic model's compile names such nodes; the model gains its
    scale and zero-point initializers and the com.microsoft opset."""
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    names = {i.name for i in model.graph.initializer}
    for k, v in (("qs_scale", np.array(0.05, np.float32)), ("qs_zero", np.array(128, np.uint8))):
        if k not in names:
            model.graph.initializer.append(numpy_helper.from_array(v, k))
    return [helper.make_node("Cast", [x], [f"{name}:q"], to=TensorProto.UINT8),
            helper.make_node("QLinearSigmoid", [f"{name}:q", "qs_scale", "qs_zero", "qs_scale", "qs_zero"],
                             [f"{name}:s"], name=name, domain="com.microsoft"),
            helper.make_node("Cast", [f"{name}:s"], [y], to=TensorProto.FLOAT)]
