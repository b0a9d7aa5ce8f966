"""Constant: its value becomes a constant tensor at compile time (no kernel)."""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOpError
from ..ir import dtypes
from ..ir.graph import Value
from .registry import Op, register


@register("Constant", since=1)
class Constant(Op):
    def infer(self, node, ins):
        a = node.attrs
        if "value" in a:
            arr = np.asarray(a["value"])
        elif "value_float" in a:
            arr = np.array(a["value_float"], dtype=np.float32)
        elif "value_floats" in a:
            arr = np.array(a["value_floats"], dtype=np.float32)
        elif "value_int" in a:
            arr = np.array(a["value_int"], dtype=np.int64)
        elif "value_ints" in a:
            arr = np.array(a["value_ints"], dtype=np.int64)
        else:
            raise UnsupportedOpError(f"node {node.name!r} (Constant): attribute(s) {sorted(a)} are not supported "
                                     "(value, value_float(s), value_int(s))")
        arr = np.asarray(arr, order="C")
        return [Value("", dtypes.from_numpy(arr.dtype), tuple(arr.shape), arr)]
