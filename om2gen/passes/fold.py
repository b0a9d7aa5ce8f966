"""Constant folding: a node whose inputs are all constant is evaluated at compile time.

Evaluation uses onnx's reference implementation (onnx.reference), the spec's own executable
semantics, so folded values equal what the operator defines; an op with an evaluate(node, ins)
of its own (ops/quantize.py: ONNX Runtime's rounding, opsets the reference lacks) uses that.
"""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ..errors import Om2Error
from ..ir.graph import Node, Value
from ..ops import registry

# Folding these would only move work from run time to archive size, or they are no-ops.
_NEVER_FOLD = {"Identity", "If", "Loop", "Scan"}
_MAX_FOLDED_BYTES = 64 << 20


def can_fold(node: Node, ins: list[Value | None]) -> bool:
    return (node.op_type not in _NEVER_FOLD and node.domain == "" and bool(node.inputs)
            and all(v is None or v.is_const for v in ins))


def small_enough(outputs: list[Value]) -> bool:
    """Whether outputs of these sizes (as the op's infer() predicts them) are worth evaluating:
    evaluate() would drop a bigger result anyway, after allocating it."""
    return sum(v.nbytes for v in outputs) <= _MAX_FOLDED_BYTES


def evaluate(node: Node, ins: list[Value | None]) -> list[np.ndarray] | None:
    """Evaluates one node on constant inputs; None when the result would be too large to keep."""
    own = getattr(_op(node), "evaluate", None)
    if own is not None:
        return own(node, ins)
    feeds = {}
    inputs = []
    for i, v in enumerate(ins):
        if v is None:
            inputs.append("")
            continue
        name = f"in{i}"
        inputs.append(name)
        feeds[name] = v.const
    outputs = [f"out{i}" for i in range(len(node.outputs))]
    attrs = [helper.make_attribute(k, numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v)
             for k, v in node.attrs.items()]
    proto_node = helper.make_node(node.op_type, inputs, outputs)
    proto_node.attribute.extend(attrs)
    model = helper.make_model(
        helper.make_graph([proto_node], "fold",
                          [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(feeds[n].dtype), feeds[n].shape)
                           for n in feeds],
                          [helper.make_empty_tensor_value_info(o) for o in outputs]),
        opset_imports=[helper.make_opsetid("", node.opset)])
    results = ReferenceEvaluator(model).run(None, feeds)
    arrays = [np.asarray(r, order="C") for r in results]  # keeps 0-d results 0-d
    if sum(a.nbytes for a in arrays) > _MAX_FOLDED_BYTES:
        return None
    return arrays


def _op(node: Node):
    """The node's registered op, or None: an op om2gen does not compile may still fold."""
    try:
        return registry.lookup(node)
    except Om2Error:
        return None
