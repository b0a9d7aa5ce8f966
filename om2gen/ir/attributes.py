"""ONNX node attributes as the graph keeps them: Python values (str, int, float, lists of them,
numpy arrays for tensors, GraphProto for subgraphs)."""
from __future__ import annotations

import onnx
from onnx import numpy_helper


def attribute_value(attr: onnx.AttributeProto):
    """An ONNX attribute's value: strings decoded, tensors as arrays."""
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
    return value
