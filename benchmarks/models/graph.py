"""A small graph builder over onnx.helper: unique names, seeded initializers, typed I/O."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Graph:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self._count = {}

    def name(self, prefix: str) -> str:
        n = self._count.get(prefix, 0)
        self._count[prefix] = n + 1
        return f"{prefix}_{n}"

    def const(self, prefix: str, array) -> str:
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def normal(self, prefix: str, shape, std: float) -> str:
        return self.const(prefix, (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)))

    def op(self, op_type: str, inputs, n_out: int = 1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.name(f"n_{op_type}"), **attrs))
        return outs[0] if n_out == 1 else outs

    def input(self, name: str, elem_type, shape) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def output(self, value: str, name: str, elem_type=TensorProto.FLOAT, shape=None) -> None:
        self.nodes.append(helper.make_node("Identity", [value], [name], name=self.name("n_output")))
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))

    def model(self, graph_name: str, doc: str):
        g = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="om2gen-benchmarks",
                              doc_string=doc)
        m.ir_version = 8
        return m
