"""BatchNormalization folding: an inference BatchNormalization whose statistics are constants is
a per-channel y = x * s + t (s = scale / sqrt(var + eps), t = B - mean * s). After a Conv,
ConvTranspose, Gemm or 2-D MatMul with constant weights that nothing else reads, s goes into the
weights of each output channel and t into the bias, at compile time (in float64, rounded once
to float32), and the BatchNormalization node disappears.

A BatchNormalization that cannot fold stays: it lowers to one per-channel scale-and-shift
kernel (ops/norm.py), which element-wise fusion can merge with what follows.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ops import registry
from . import rewrite


def run(graph: Graph, ctx=None) -> int:
    producer = rewrite.producers(graph)
    users = graph.consumers()
    outputs = set(graph.outputs)
    folded = set()
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.domain:
            continue
        affine = _affine(graph, bn)
        x = bn.inputs[0]
        p = producer.get(x)
        if affine is None or not rewrite.sole_reader(p, x, users, outputs):
            continue
        fold = _FOLDS.get(p.op_type)
        if p.domain or fold is None or not fold(graph, p, *affine, bn):
            continue
        rewrite.absorb(graph, p, bn)   # the producer now computes the BatchNormalization's output
        folded.add(id(bn))
    graph.nodes = [n for n in graph.nodes if id(n) not in folded]
    return len(folded)


def _affine(graph: Graph, bn: Node):
    """(s, t) in float64 if `bn` is an inference BatchNormalization with constant statistics."""
    ins = [graph.values[i] if i else None for i in bn.inputs]
    if len(ins) < 5 or any(v is None or not v.is_const for v in ins[1:5]) or len([o for o in bn.outputs if o]) != 1:
        return None
    if ins[0].dtype.name != "float32":
        return None
    op = registry.lookup(bn)
    eps = float(op.attr(bn, "epsilon"))
    scale, bias, mean, var = (np.asarray(v.const, np.float64).reshape(-1) for v in ins[1:5])
    s = scale / np.sqrt(var + eps)
    return s, bias - mean * s


def _const_f32(graph: Graph, name: str) -> np.ndarray | None:
    v = graph.values.get(name) if name else None
    if v is None or not v.is_const or v.dtype.name != "float32":
        return None
    return np.asarray(v.const, np.float64)


def _bias(graph: Graph, node: Node, i: int, channels: int) -> np.ndarray | None:
    """The node's bias input i as float64 [channels] (zeros when absent), None if not a constant."""
    if len(node.inputs) <= i or not node.inputs[i]:
        return np.zeros(channels)
    b = _const_f32(graph, node.inputs[i])
    return None if b is None or b.size != channels else b.reshape(-1)


def _conv(graph: Graph, conv: Node, s, t, bn: Node) -> bool:
    w = _const_f32(graph, conv.input(1))
    if w is None or w.shape[0] != s.size:
        return False
    b = _bias(graph, conv, 2, s.size)
    if b is None:
        return False
    w = w * s.reshape((-1,) + (1,) * (w.ndim - 1))
    _set_inputs(graph, conv, w, b * s + t, bn)
    return True


def _conv_transpose(graph: Graph, conv: Node, s, t, bn: Node) -> bool:
    """The weight is C x M/group x kernel; output channel g * M/group + j reads W[c, j] for the
    input channels c of group g."""
    w = _const_f32(graph, conv.input(1))
    group = int(registry.lookup(conv).attr(conv, "group"))
    if w is None or w.ndim < 3 or w.shape[0] % group or w.shape[1] * group != s.size:
        return False
    b = _bias(graph, conv, 2, s.size)
    if b is None:
        return False
    c, mg = w.shape[:2]
    grouped = w.reshape((group, c // group, mg) + w.shape[2:])
    grouped = grouped * s.reshape((group, 1, mg) + (1,) * (w.ndim - 2))
    _set_inputs(graph, conv, grouped.reshape(w.shape), b * s + t, bn)
    return True


def _gemm(graph: Graph, gemm: Node, s, t, bn: Node) -> bool:
    """Y = alpha * A' B' + beta * C over [M, N]; the channel is N: column n of B' scales by s[n]
    and C becomes beta * C * s + t (beta 1)."""
    if gemm.opset < 7:
        return False   # legacy broadcast rules for C
    op = registry.lookup(gemm)
    b = _const_f32(graph, gemm.input(1))
    if b is None or b.ndim != 2:
        return False
    trans_b = bool(op.attr(gemm, "transB"))
    if (b.shape[0] if trans_b else b.shape[1]) != s.size:
        return False
    b = b * (s.reshape(-1, 1) if trans_b else s.reshape(1, -1))
    beta = float(op.attr(gemm, "beta"))
    if gemm.input(2):
        c = _const_f32(graph, gemm.input(2))
        if c is None:
            return False
        c = beta * c * s + t
    else:
        c = t
    _set_inputs(graph, gemm, b, c, bn, first=1)
    gemm.attrs["beta"] = 1.0
    return True


def _matmul(graph: Graph, mm: Node, s, t, bn: Node) -> bool:
    """A 2-D MatMul by a constant [K, N]: the channel is N, so it becomes a Gemm with the
    columns scaled and t as C."""
    a = graph.values[mm.inputs[0]]
    b = _const_f32(graph, mm.input(1))
    if len(a.shape) != 2 or b is None or b.ndim != 2 or b.shape[1] != s.size:
        return False
    mm.op_type, mm.opset, mm.attrs = "Gemm", max(mm.opset, 13), {}
    _set_inputs(graph, mm, b * s.reshape(1, -1), t, bn, first=1)
    return True


def _set_inputs(graph: Graph, node: Node, w: np.ndarray, bias: np.ndarray, bn: Node, first: int = 1) -> None:
    """Points inputs `first` and `first + 1` of the node at new constants (the old ones may be
    shared with other nodes), derived from them and the statistics of `bn`."""
    old = [node.input(first), node.input(first + 1)]
    stats = list(bn.inputs[1:5])
    names = [rewrite.add_constant(graph, f"{node.name}::bn_folded_{what}", arr.astype(np.float32),
                                  sources=[src, *stats],
                                  transform=f"BatchNormalization {bn.name!r} folded into the {what} of "
                                            f"{node.op_type} {node.name!r}")
             for what, arr, src in (("weight", w, old[0]), ("bias", bias, old[1]))]
    node.inputs = list(node.inputs[:first]) + names + list(node.inputs[first + 2:])


_FOLDS = {"Conv": _conv, "ConvTranspose": _conv_transpose, "Gemm": _gemm, "MatMul": _matmul}
