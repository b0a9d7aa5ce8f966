"""Conv + Add (the residual connection): an Add (or a two-input Sum) of a pointwise (1x1, one group) float32 Conv's
output and another tensor of exactly that shape, where the Add is the Conv's only reader, goes
into the Conv kernel's store: the Conv becomes an om2gen.FusedConv with that tensor as its input
Z (ops/fused_conv.py), and conv_gemm.c.j2 adds it to each tile it has just computed, while the
tile is in cache, instead of a separate pass over memory. A Relu or Clip after the Add then fuses
too (conv_act runs after this pass; the kernel adds, then clamps).

The Conv takes the Add's place in the node order (the residual may be computed after the
Conv) and its output name, so a graph output stays what it was. Only pointwise convolutions
qualify: they always lower to the packed-GEMM kernel (ResNet's and MobileNetV2's last
convolution of a block is one).
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ops import fused_conv
from . import rewrite


def _pointwise_gemm(graph: Graph, conv) -> bool:
    w = graph.values.get(conv.inputs[1]) if len(conv.inputs) > 1 else None
    if w is None or len(w.shape) < 3 or any(d != 1 for d in w.shape[2:]):
        return False
    if int(conv.attrs.get("group", 1) or 1) != 1 or w.shape[0] * w.shape[1] == 1:
        return False     # grouped, or one channel in and out (the depthwise kernel's case)
    return all(int(s) == 1 for s in conv.attrs.get("strides") or [1]) and \
        not any(int(p) for p in conv.attrs.get("pads") or []) and \
        conv.attrs.get("auto_pad", "NOTSET") in ("NOTSET", "VALID", b"NOTSET", b"VALID")


def run(graph: Graph, ctx=None) -> int:
    producer = rewrite.producers(graph)
    users = graph.consumers()
    outputs = set(graph.outputs)
    fused = 0
    for add in list(graph.nodes):
        if add.op_type not in ("Add", "Sum") or add.domain or len(add.inputs) != 2 or len(add.outputs) != 1:
            continue
        for side in (0, 1):
            x, residual = add.inputs[side], add.inputs[1 - side]
            conv = producer.get(x)
            if not rewrite.sole_reader(conv, x, users, outputs) or conv.op_type != "Conv" or conv.domain \
                    or x == residual:
                continue
            vx, vr = graph.values.get(x), graph.values.get(residual)
            if vx is None or vr is None or vx.dtype.name != "float32" or vr.dtype != vx.dtype or vr.shape != vx.shape:
                continue
            if not _pointwise_gemm(graph, conv):
                continue
            bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
            rewrite.make_fused(conv, fused_conv.OP_TYPE, fused_conv.FusedConv.attrs)
            conv.inputs[:] = [conv.inputs[0], conv.inputs[1], bias, residual]
            rewrite.absorb(graph, conv, add)
            graph.nodes.remove(conv)
            graph.nodes[graph.nodes.index(add)] = conv
            fused += 1
            break
    return fused
