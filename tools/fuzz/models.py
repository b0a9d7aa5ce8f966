"""The seeded models the load fuzzer mutates: built with onnx.helper, compiled to .om2 and .om, with
fixed inputs and ONNX Runtime's outputs for them.

- ``mlp``: Gemm → Relu → Gemm → Softmax (two weight matrices and biases in the constants);
- ``cnn``: Conv → BatchNormalization → Relu → MaxPool → Conv → Relu → GlobalAveragePool → Flatten
  → Gemm → Softmax (several kernels, BatchNorm folded into constants);
- ``branch``: an ``If`` decided at run time (its condition is computed from the input), so the
  captured model holds label tasks (LABEL_SWITCH_BY_INDEX / LABEL_SET / LABEL_GOTO_EX).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MODEL_NAMES = ("mlp", "cnn", "branch")


@dataclasses.dataclass
class BaseModel:
    name: str
    onnx_path: Path
    paths: dict            # format ("om2" | "om") -> compiled file
    inputs: dict           # input name -> np.ndarray (the fixed inputs)
    reference: dict        # output name -> np.ndarray (ONNX Runtime on `inputs`)

    def data(self, fmt: str) -> bytes:
        return self.paths[fmt].read_bytes()


def _w(rng, name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _finish(nodes, name, inputs, outputs, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="om2gen-fuzz")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _mlp(rng):
    inits = [_w(rng, "w1", 32, 64), _w(rng, "b1", 64), _w(rng, "w2", 64, 16), _w(rng, "b2", 16)]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"], name="fc2"),
             helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1)]
    return _finish(nodes, "fuzz_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [4, 16])], inits)


def _cnn(rng):
    inits = [_w(rng, "c1_w", 8, 3, 3, 3), _w(rng, "c1_b", 8),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn_s"), _w(rng, "bn_b", 8),
             _w(rng, "bn_m", 8), numpy_helper.from_array(rng.uniform(0.5, 2.0, 8).astype(np.float32), "bn_v"),
             _w(rng, "c2_w", 16, 8, 3, 3), _w(rng, "c2_b", 16), _w(rng, "fc_w", 10, 16), _w(rng, "fc_b", 10)]
    nodes = [helper.make_node("Conv", ["image", "c1_w", "c1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["b1"], name="bn1"),
             helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "c2_w", "c2_b"], ["c2"], name="conv2", strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
             helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1)]
    return _finish(nodes, "fuzz_cnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])], inits)


def _branch(rng):
    then = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["t"], name="then_mul")], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 8])])
    other = helper.make_graph([helper.make_node("Sub", ["x", "k"], ["e"], name="else_sub")], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 8])])
    inits = [_w(rng, "k", 2, 8), numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"], name="gt"),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then, else_branch=other),
             helper.make_node("Tanh", ["y"], ["out"], name="tanh")]
    return _finish(nodes, "fuzz_branch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                   [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 8])], inits)


_BUILDERS = {"mlp": _mlp, "cnn": _cnn, "branch": _branch}


def fixed_inputs(model: onnx.ModelProto, seed: int) -> dict:
    rng = np.random.default_rng(seed + 7)
    out = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    return out


_SESSIONS: dict = {}


def ort_run(onnx_path: Path, feeds: dict) -> dict:
    """ONNX Runtime's outputs {name: array} for `feeds` (one session per model, kept)."""
    import onnxruntime as ort
    sess = _SESSIONS.get(str(onnx_path))
    if sess is None:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = _SESSIONS[str(onnx_path)] = ort.InferenceSession(str(onnx_path), so,
                                                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def build(work: Path, seed: int, formats=("om2", "om"), names=MODEL_NAMES) -> dict[str, BaseModel]:
    """Builds, compiles and references every model into `work`; {name: BaseModel}."""
    import om2gen
    work.mkdir(parents=True, exist_ok=True)
    models = {}
    for i, name in enumerate(names):
        model = _BUILDERS[name](np.random.default_rng([seed, i]))
        onnx_path = work / f"{name}.onnx"
        onnx.save(model, onnx_path)
        paths = {}
        for fmt in formats:
            paths[fmt] = work / f"{name}.{fmt}"
            om2gen.compile(str(onnx_path), paths[fmt], format=fmt)
        inputs = fixed_inputs(model, seed)
        models[name] = BaseModel(name, onnx_path, paths, inputs, ort_run(onnx_path, inputs))
    return models
