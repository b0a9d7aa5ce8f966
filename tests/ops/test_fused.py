"""om2gen.FusedElementwise, the operator element-wise fusion makes (tests/passes has the rest)."""
import numpy as np
from helpers import check_model, make_model, rand
from onnx import helper

from om2gen.ir.dtypes import FLOAT32
from om2gen.ir.graph import Node, Value
from om2gen.ops import registry
from om2gen.ops.fused import DOMAIN, OP_TYPE, SPEC, FusedSpec, Operand, Step

COVERS = {"FusedElementwise"}


def test_lowering_reads_strided_operands_and_inlines_literals():
    """y = x^T * 2 over [3, 2], x of [2, 3] read through transposed strides."""
    spec = FusedSpec((3, 2), (Operand("x", (1, 3)),), (("float", "2.0f"),),
                     (Step("mul", "Mul", "x0 * x1", (("in", 0), ("lit", 0)), ("float", "float"), "float", "y",
                           "float32", (3, 2)),), (0,))
    node = Node("mul", OP_TYPE, ["x"], ["y"], {SPEC: spec}, DOMAIN, 1, fused_from=["t", "mul"])
    op = registry.lookup(node)
    x = Value("x", FLOAT32, (2, 3))
    (y,) = op.infer(node, [x])
    assert (y.dtype, y.shape) == (FLOAT32, (3, 2))
    call = op.lower(node, [x], [Value("y", FLOAT32, (3, 2))], None)
    assert call.template == "kernels/fused_elementwise.c.j2" and call.inputs == ["x"] and call.outputs == ["y"]
    assert call.params["literals"] == [{"ctype": "float", "value": "2.0f"}]
    assert call.params["operands"][0]["inner_stride"] == 3 and call.params["outer"][0]["strides"] == [1]


def test_fused_chain_matches_onnxruntime(tmp_path):
    x = rand(4, 5, 6, seed=1)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             helper.make_node("Mul", ["t", "k"], ["m"]), helper.make_node("Sigmoid", ["m"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"k": np.array(1.5, np.float32)})
    check_model(model, {"x": x}, tmp_path)
