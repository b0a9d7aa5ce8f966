"""Layer normalization written out in primitives becomes one LayerNormalization node.

Exporters that predate LayerNormalization-17 (paddle2onnx, older torch) spell it
    m = ReduceMean(x, trailing axes)   d = x - m   v = ReduceMean(d^2)   (Pow(d, 2) or d * d)
    y = d / Sqrt(v + eps)  [* gamma]  [+ beta]
with gamma and beta constants over the normalized dims; two passes over the data in one kernel
(templates/kernels/normalize_rows.c.j2, statistics in double) replace eight or nine.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ops import registry
from . import rewrite

LAYERNORM_OPSET = 17


def run(graph: Graph, ctx=None) -> int:
    m = _Matcher(graph)
    made = 0
    for node in list(graph.nodes):
        if node.op_type == "Sqrt" and not node.domain and id(node) not in m.removed:
            made += m.try_rewrite(node)
    if made:
        graph.nodes = [n for n in graph.nodes if id(n) not in m.removed]
    return made


class _Matcher:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.producer = rewrite.producers(graph)
        self.users = graph.consumers()
        self.outputs = set(graph.outputs)
        self.removed: set[int] = set()

    def made_by(self, name: str, op_type: str) -> Node | None:
        n = self.producer.get(name)
        return n if n is not None and n.op_type == op_type and not n.domain and id(n) not in self.removed else None

    def only_user(self, name: str) -> Node | None:
        users = self.users.get(name, [])
        if name in self.outputs or len({id(u) for u in users}) != 1:
            return None
        return users[0]

    def const(self, name: str) -> np.ndarray | None:
        return rewrite.const_array(self.graph, name)

    def reduce_axis(self, rm: Node) -> int | None:
        """The first of the trailing axes a keepdims ReduceMean reduces, or None."""
        x = self.graph.values[rm.inputs[0]]
        op = registry.lookup(rm)
        try:
            axes = op.axes(rm, [self.graph.values[i] if i else None for i in rm.inputs])
        except Exception:   # non-constant axes: not this pattern
            return None
        rank = len(x.shape)
        if not op.attr(rm, "keepdims") or not axes or axes != list(range(axes[0], rank)):
            return None
        return axes[0]

    def try_rewrite(self, sqrt: Node) -> int:
        g = self.graph
        add_eps = self.made_by(sqrt.inputs[0], "Add")
        if add_eps is None or self.only_user(add_eps.outputs[0]) is not sqrt:
            return 0
        eps, var = self._const_operand(add_eps)
        rm2 = self.made_by(var, "ReduceMean") if var else None
        if eps is None or eps.size != 1 or rm2 is None or self.only_user(var) is not add_eps:
            return 0
        sq = self.producer.get(rm2.inputs[0])
        if sq is None or sq.domain or self.only_user(sq.outputs[0]) is not rm2:
            return 0
        if sq.op_type == "Pow":
            e = self.const(sq.input(1))
            if e is None or e.size != 1 or float(e.reshape(-1)[0]) != 2.0:
                return 0
            d1 = sq.inputs[0]
        elif sq.op_type == "Mul" and sq.inputs[0] == sq.inputs[1]:
            d1 = sq.inputs[0]
        else:
            return 0
        div = self.only_user(sqrt.outputs[0])
        if div is None or div.op_type != "Div" or div.inputs[1] != sqrt.outputs[0]:
            return 0
        d2 = div.inputs[0]
        sub1, sub2 = self.made_by(d1, "Sub"), self.made_by(d2, "Sub")
        if sub1 is None or sub2 is None or sub1.inputs != sub2.inputs:
            return 0
        x_name, mean = sub1.inputs
        rm1 = self.made_by(mean, "ReduceMean")
        if rm1 is None or rm1.inputs[0] != x_name:
            return 0
        x = g.values[x_name]
        axis = self.reduce_axis(rm1)
        if x.dtype.name != "float32" or axis is None or self.reduce_axis(rm2) != axis:
            return 0
        # every intermediate is read by the pattern only
        inner = {id(n) for n in (rm1, sub1, sub2, sq, rm2, add_eps, sqrt, div)}
        for n in (rm1, sub1, sub2, sq, rm2, add_eps, sqrt):
            out = n.outputs[0]
            if out in self.outputs or any(id(u) not in inner for u in self.users.get(out, [])):
                return 0
        norm_shape = x.shape[axis:]
        # sub1 is sub2 when the model computes x - mean once and reads it twice: list it once
        covered = list({id(n): n for n in (rm1, sub1, sub2, sq, rm2, add_eps, sqrt, div)}.values())
        gamma, beta = None, None
        mul = self.only_user(div.outputs[0])
        if mul is not None and mul.op_type == "Mul" and not mul.domain:
            gamma = self._affine(mul, div.outputs[0], norm_shape)
            if gamma is not None:
                covered.append(mul)
                add = self.only_user(mul.outputs[0])
                if add is not None and add.op_type == "Add" and not add.domain:
                    beta = self._affine(add, mul.outputs[0], norm_shape)
                    if beta is not None:
                        covered.append(add)
        last = covered[-1]
        if gamma is None:
            gamma = np.ones(norm_shape, np.float32)
        if g.values[last.outputs[0]].shape != x.shape:
            return 0
        consts = [i for n in covered for i in n.inputs if i and g.values[i].is_const]
        what = f"the LayerNormalization pattern ending in {last.name!r}"
        inputs = [x_name, rewrite.add_constant(g, f"{last.name}::ln_scale", gamma, sources=consts,
                                               transform=f"the scale of {what}")]
        if beta is not None:
            inputs.append(rewrite.add_constant(g, f"{last.name}::ln_bias", beta, sources=consts,
                                               transform=f"the bias of {what}"))
        ln = Node(f"{last.name}::layernorm", "LayerNormalization", inputs, [last.outputs[0]],
                  {"axis": axis, "epsilon": float(eps.reshape(-1)[0])}, "", LAYERNORM_OPSET,
                  fused_from=rewrite.sources(*covered))
        index = next(i for i, n in enumerate(g.nodes) if n is last)
        g.nodes.insert(index, ln)
        self.removed.update(id(n) for n in covered)
        for n in covered:
            if n is not last:
                for o in n.outputs:
                    g.values.pop(o, None)
        return 1

    def _const_operand(self, node: Node):
        """(constant, other input) of a binary node with one constant operand."""
        a, b = node.inputs[:2]
        if self.const(b) is not None:
            return self.const(b), a
        if self.const(a) is not None:
            return self.const(a), b
        return None, None

    def _affine(self, node: Node, through: str, norm_shape) -> np.ndarray | None:
        """The constant operand of `node` (the other being `through`) over the normalized dims."""
        a, b = node.inputs[:2]
        other = b if a == through else a if b == through else None
        c = self.const(other) if other else None
        if c is None or c.dtype != np.float32 or len(c.shape) > len(norm_shape):
            return None
        try:
            if tuple(np.broadcast_shapes(c.shape, norm_shape)) != tuple(norm_shape):
                return None
        except ValueError:
            return None
        return np.ascontiguousarray(np.broadcast_to(c, norm_shape))
