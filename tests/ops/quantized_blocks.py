"""Small float models for the quantization tool's tests (tests/ops/test_quantized_models.py,
tests/passes/test_qdq_gemm.py): a BERT-like attention block with MatMuls and a Gemm head."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ, HIDDEN, HEADS = 8, 32, 2
BLOCK_SHAPE = (1, SEQ, HIDDEN)


def attention_block(seed: int = 0) -> onnx.ModelProto:
    """x [1, 8, 32] -> q, k, v projections (MatMul + Add) -> two heads -> softmax(q k^T / sqrt(d)) v ->
    output projection + residual -> flattened -> Gemm (transB) -> y [1, 10]."""
    rng = np.random.default_rng(seed)
    head = HIDDEN // HEADS

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    inits = {"wq": w(HIDDEN, HIDDEN), "wk": w(HIDDEN, HIDDEN), "wv": w(HIDDEN, HIDDEN), "wo": w(HIDDEN, HIDDEN),
             "bq": w(HIDDEN) * 0.1, "bk": w(HIDDEN) * 0.1, "bv": w(HIDDEN) * 0.1,
             "wg": (rng.standard_normal((10, SEQ * HIDDEN)) / np.sqrt(SEQ * HIDDEN)).astype(np.float32),
             "bg": w(10) * 0.1, "heads": np.array([1, SEQ, HEADS, head], np.int64),
             "merged": np.array([1, SEQ, HIDDEN], np.int64), "flat": np.array([1, SEQ * HIDDEN], np.int64),
             "scale": np.array(1 / np.sqrt(head), np.float32)}
    nodes = []
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{p}"], [f"{p}0"]),
                  helper.make_node("Add", [f"{p}0", f"b{p}"], [f"{p}1"]),
                  helper.make_node("Reshape", [f"{p}1", "heads"], [f"{p}2"]),
                  helper.make_node("Transpose", [f"{p}2"], [p], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["q", "k"], ["s0"]),
              helper.make_node("Mul", ["s0", "scale"], ["s1"]),
              helper.make_node("Softmax", ["s1"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["c0"]),
              helper.make_node("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["c1", "merged"], ["c2"]),
              helper.make_node("MatMul", ["c2", "wo"], ["o"]),
              helper.make_node("Add", ["o", "x"], ["r"]),
              helper.make_node("Reshape", ["r", "flat"], ["f"]),
              helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, BLOCK_SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 10))],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
