"""QDQ folding around Conv, MatMul and Gemm into the integer kernels (ops/int_conv.py,
ops/int_matmul.py), as ONNX Runtime's QDQ transformer does it on the CPU provider (its
ConvNodeGroupSelector, MatMulNodeGroupSelector, GemmNodeGroupSelector and their actions), so
that the results are ORT's for the same model:

- DQ(x), DQ(w), [DQ(bias int32)] -> Conv -> Q  ==>  QLinearConv(x, xs, xz, w, ws, wz, ys, yz, bias)
- DQ(a), DQ(b) -> MatMul -> Q  ==>  QLinearMatMul; without the Q  ==>  com.microsoft MatMulIntegerToFloat
- DQ(A), DQ(B), [DQ(C int32), beta 1] -> Gemm [-> Q]  ==>  com.microsoft QGemm (float output without the Q)

Every data input must come from a DequantizeLinear (a weight's, folded into a float constant at
import, is read back from graph.dequantized), the Q must be the op's only reader, and a Relu or
Clip between the op and the Q is dropped where the Q's range makes it redundant (ORT's
IsClipMadeRedundantByQ). Types as ORT's selectors compare them (qdq_types.py): the activation's
and the output's must agree, and an int8 activation ORT did not convert to uint8 stays float
(x86: int8 QLinearConv/QLinearMatMul are not allowed). The bias goes in as it is: ORT takes the
int32 tensor, its scale assumed x_scale * w_scale (what ORT's quantizer writes).

Where the pattern is incomplete, or the integer kernels cannot take it (per-axis activation
parameters, a weight that is not a constant, a 3-D Conv, a dynamic shape, a weight quantized
along another axis than the output channels), the float path stays: DequantizeLinear -> float
op -> QuantizeLinear, the model's own arithmetic.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ops.qlinear import MS
from . import rewrite
from .qdq_types import Quantized, converted, dequantized, drop_unread, eight_bit, in_graph, quantized


def run(graph: Graph, ctx=None, unsigned: set[str] | None = None) -> int:
    """unsigned: the int8 tensors ORT makes uint8 (qdq_types.converted of the graph before any
    QDQ folding), found here if not given."""
    unsigned = converted(graph) if unsigned is None else unsigned
    made, added = 0, set()
    for node in list(graph.nodes):
        if node.domain or node.op_type not in _FOLD:
            continue
        producer = rewrite.producers(graph)
        users = graph.consumers()
        made += _FOLD[node.op_type](graph, node, producer, users, set(graph.outputs), (unsigned, added))
    drop_unread(graph, added)
    return made


def _inputs(graph, node, producer, seen, count) -> list[Quantized] | None:
    """The DequantizeLinear behind each present data input, if every one has one."""
    present = [n for n in node.inputs[:count] if n]
    dqs = [dequantized(graph, n, producer, *seen) for n in present]
    return dqs if all(d is not None for d in dqs) else None


def _output(graph, node, users, outputs, unsigned):
    """(the QuantizeLinear that is the op's only reader, a redundant Relu/Clip between them or
    None, whether any reader is a QuantizeLinear): ORT's choice of the Q side. A Relu/Clip is the
    op's only reader, read only by the Q; the Q must be the only reader and take per-tensor
    8-bit parameters, else there is no Q side (q None) although a Q reads the output."""
    out = node.outputs[0]
    readers = users.get(out, [])
    clip = None
    if len(readers) == 1 and not readers[0].domain and readers[0].op_type in ("Relu", "Clip") and \
            len(users.get(readers[0].outputs[0], [])) == 1 and readers[0].outputs[0] not in outputs:
        clip = readers[0]
        readers = users[clip.outputs[0]]
    has_q = clip is not None or any(r.op_type == "QuantizeLinear" and not r.domain for r in readers)
    if not has_q or len(readers) != 1 or out in outputs or len([o for o in node.outputs if o]) != 1:
        return None, None, has_q
    q = quantized(graph, readers[0], unsigned)
    if q is None or not _activation(graph, q) or (clip is not None and not _clip_redundant(graph, clip, q)):
        return None, None, has_q
    return q, clip, has_q


def _clip_redundant(graph: Graph, clip: Node, q: Quantized) -> bool:
    """Whether the Q's range lies inside what the Relu/Clip lets through (ORT's rule)."""
    scale = rewrite.const_array(graph, q.scale)
    zp_arr = rewrite.const_array(graph, q.zero_point) if q.zero_point else np.zeros(1, np.uint8)
    if scale is None or zp_arr is None:
        return False
    lo, hi = (-128, 127) if q.dtype == "int8" else (0, 255)
    zp = int(zp_arr.reshape(-1)[0])
    if clip.op_type == "Relu":
        return zp == lo
    if clip.opset < 11:
        cmin, cmax = clip.attrs.get("min", -np.inf), clip.attrs.get("max", np.inf)
    else:
        bounds = [rewrite.const_array(graph, clip.input(i)) if clip.input(i) else np.float32(b)
                  for i, b in ((1, -np.inf), (2, np.inf))]
        if any(b is None for b in bounds):
            return False
        cmin, cmax = (float(np.asarray(b).reshape(-1)[0]) for b in bounds)
    s = float(scale.reshape(-1)[0])
    with np.errstate(over="ignore", invalid="ignore"):
        qmin, qmax = np.rint(np.float32(cmin) / np.float32(s)) + zp, np.rint(np.float32(cmax) / np.float32(s)) + zp
    return bool(qmin <= lo and qmax >= hi)


def _activation(graph: Graph, side: Quantized) -> bool:
    """An activation side the integer kernels take: 8-bit, one float32 scale and zero point."""
    return eight_bit(side) and side.per_tensor(graph) and graph.values[side.scale].dtype.name == "float32"


def _weight(graph: Graph, side: Quantized, channels: int, axis: int) -> bool:
    """A weight side: 8-bit, float32 scales per tensor or along `axis` (the output channels)."""
    if not eight_bit(side) or graph.values[side.scale].dtype.name != "float32":
        return False
    if side.per_tensor(graph):
        return True
    rank = len(graph.values[side.data].shape)
    return side.axis % rank == axis and graph.values[side.scale].shape == (channels,)


def _bias(graph: Graph, side: Quantized, channels: int) -> bool:
    v = graph.values[side.data]
    return side.dtype == "int32" and v.is_const and v.size in (1, channels) and len(v.shape) <= 1


def _params(graph: Graph, side: Quantized) -> list[str]:
    return [side.data, side.scale, _zero_point(graph, side)]


def _zero_point(graph: Graph, side: Quantized) -> str:
    """The side's zero point, or (absent) a 0 of its type, as ORT's action fills it in."""
    if side.zero_point:
        return side.zero_point
    return rewrite.add_constant(graph, f"{side.data}_zero_point", np.zeros((), side.dtype), sources=[],
                                transform="the absent zero point (0)")


def _replace(graph: Graph, node: Node, replacement: Node, dqs, q: Quantized | None, clip: Node | None) -> int:
    """Puts `replacement` where `node` was and drops the Q (and Relu/Clip) it absorbs; the
    DequantizeLinear nodes go with dead-code removal once nothing else reads them."""
    present = in_graph(graph, [d.node for d in dqs])
    gone = [n for n in (clip, q.node if q is not None else None) if n is not None]
    replacement.fused_from = rewrite.sources(*present, node, *gone)
    graph.nodes[graph.nodes.index(node)] = replacement
    for n in (node, clip):
        if n is not None and q is not None:
            graph.values.pop(n.outputs[0], None)
    graph.nodes = [n for n in graph.nodes if not any(n is g for g in gone)]
    return 1


def _conv(graph, node, producer, users, outputs, seen) -> int:
    dqs = _inputs(graph, node, producer, seen, 3)
    if dqs is None or len(dqs) != len([n for n in node.inputs if n]):
        return 0
    q, clip, _ = _output(graph, node, users, outputs, seen[0])
    if q is None:
        return 0
    x, w, bias = dqs[0], dqs[1], (dqs[2] if len(dqs) > 2 else None)
    xv, wv = graph.values[x.data], graph.values[w.data]
    if x.kind != q.kind or x.kind == "int8" or not _activation(graph, x):
        return 0
    if not wv.is_const or len(xv.shape) not in (3, 4) or not xv.is_static or not graph.values[q.data].is_static:
        return 0
    channels = wv.shape[0]
    if not _weight(graph, w, channels, 0) or (bias is not None and not _bias(graph, bias, channels)):
        return 0
    inputs = _params(graph, x) + _params(graph, w) + [q.scale, _zero_point(graph, q)]
    if bias is not None:
        inputs.append(_full(graph, bias, channels))
    replacement = Node(node.name, "QLinearConv", inputs, list(q.node.outputs), dict(node.attrs), opset=10)
    return _replace(graph, node, replacement, dqs, q, clip)


def _full(graph: Graph, side: Quantized, n: int) -> str:
    """An int32 bias of N values (one value broadcast, as ORT reads it, made N)."""
    v = graph.values[side.data]
    if v.shape == (n,):
        return side.data
    return rewrite.add_constant(graph, f"{side.data}_per_channel", np.full(n, np.asarray(v.const).reshape(-1)[0],
                                                                          np.int32),
                                sources=[side.data], transform="one bias value for each output channel")


def _matmul(graph, node, producer, users, outputs, seen) -> int:
    dqs = _inputs(graph, node, producer, seen, 2)
    if dqs is None or len(dqs) != 2:
        return 0
    a, b = dqs
    av, bv, yv = graph.values[a.data], graph.values[b.data], graph.values[node.outputs[0]]
    if a.kind == "int8" or not (_activation(graph, a) and av.is_static and bv.is_static and yv.is_static):
        return 0
    n = bv.shape[-1]
    if not _weight(graph, b, n, len(bv.shape) - 1) or (not b.per_tensor(graph) and len(bv.shape) != 2):
        return 0
    q, clip, has_q = _output(graph, node, users, outputs, seen[0])
    if has_q:
        if q is None or a.kind != q.kind:
            return 0
        inputs = _params(graph, a) + _params(graph, b) + [q.scale, _zero_point(graph, q)]
        replacement = Node(node.name, "QLinearMatMul", inputs, list(q.node.outputs), opset=10)
        return _replace(graph, node, replacement, dqs, q, clip)
    inputs = [a.data, b.data, a.scale, b.scale, _zero_point(graph, a), _zero_point(graph, b)]
    replacement = Node(node.name, "MatMulIntegerToFloat", inputs, list(node.outputs), domain=MS, opset=1)
    return _replace(graph, node, replacement, dqs, None, None)


def _gemm(graph, node, producer, users, outputs, seen) -> int:
    dqs = _inputs(graph, node, producer, seen, 3)
    if dqs is None or len(dqs) != len([n for n in node.inputs if n]) or len(dqs) < 2:
        return 0
    a, b = dqs[0], dqs[1]
    c = dqs[2] if len(dqs) > 2 else None
    if a.kind == "int8" and b.kind != "int8":
        return 0
    alpha, beta = float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("beta", 1.0))
    trans_b = int(node.attrs.get("transB", 0))
    yv = graph.values[node.outputs[0]]
    n = yv.shape[-1]
    if not (_activation(graph, a) and yv.is_static and _weight(graph, b, n, 0 if trans_b else 1)):
        return 0
    if c is not None and (beta != 1.0 or not _bias(graph, c, n)):
        return 0
    q, clip, has_q = _output(graph, node, users, outputs, seen[0])
    if has_q and (q is None or a.kind != q.kind or alpha != 1.0):
        return 0
    attrs = {k: node.attrs[k] for k in ("alpha", "transA", "transB") if k in node.attrs}
    inputs = _params(graph, a) + _params(graph, b) + [_full(graph, c, n) if c is not None else ""]
    if has_q:
        replacement = Node(node.name, "QGemm", inputs + [q.scale, _zero_point(graph, q)], list(q.node.outputs), attrs,
                           domain=MS, opset=1)
        return _replace(graph, node, replacement, dqs, q, clip)
    replacement = Node(node.name, "QGemm", inputs, list(node.outputs), attrs, domain=MS, opset=1)
    return _replace(graph, node, replacement, dqs, None, None)


_FOLD = {"Conv": _conv, "MatMul": _matmul, "Gemm": _gemm}
