"""NonMaxSuppression (opset 10/11): per batch and class, the boxes kept best score first, each
unless a box kept before it overlaps it by more than the IoU threshold; int64[count, 3] rows
(batch, class, box), in ONNX Runtime's order and with its float arithmetic.

count is a data-dependent dim (docs/dynamic-shapes.md), at most batches * classes * the boxes a
class may keep: the smaller of the boxes and max_output_boxes_per_class when that is a constant.
Two SPMD passes (templates/kernels/nms.c.j2): one (batch, class) per work item selects into a
per-item row, then each block places its items' rows after those of the items before it and block
0 writes the count. The optional inputs may be constants (compiled in) or run-time tensors (read
by the kernel).
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError, ShapeError
from ..ir import dtypes, symbolic
from ..ir.graph import Value
from ..ir.program import KernelCall
from . import common
from .registry import Op, register


@register("NonMaxSuppression", since=10)
class NonMaxSuppression(Op):
    dynamic_shapes = True
    attrs = {"center_point_box": 0}

    def geometry(self, node, ins):
        """(batches, classes, boxes, the most a class keeps: an int, None for a run-time input)."""
        boxes, scores = ins[0], ins[1]
        for v, what in ((boxes, "boxes"), (scores, "scores")):
            common.require_float(node, v, what)
            if len(v.shape) != 3:
                raise ShapeError(f"node {node.name!r} (NonMaxSuppression): {what} {v.name!r} is "
                                 f"{v.describe()}; it must have rank 3")
        if boxes.shape[2] != 4 or boxes.shape[0] != scores.shape[0] or boxes.shape[1] != scores.shape[2]:
            raise ShapeError(f"node {node.name!r} (NonMaxSuppression): boxes {boxes.describe()} and scores "
                             f"{scores.describe()} must be [batches, boxes, 4] and [batches, classes, boxes]")
        if int(self.attr(node, "center_point_box")) not in (0, 1):
            raise ModelError(f"node {node.name!r} (NonMaxSuppression): center_point_box is "
                             f"{self.attr(node, 'center_point_box')}; ONNX defines 0 and 1")
        most = _scalar(ins, 2)
        keep = None if most is _RUNTIME else max(0, int(most if most is not None else 0))
        iou = _scalar(ins, 3)
        if iou is not _RUNTIME and iou is not None and not 0 <= float(iou) <= 1:
            raise ModelError(f"node {node.name!r} (NonMaxSuppression): iou_threshold is {float(iou)}; it must be "
                             "in [0, 1] (as ONNX Runtime requires)")
        return boxes.shape[0], scores.shape[1], boxes.shape[1], keep

    def infer(self, node, ins):
        batches, classes, spatial, keep = self.geometry(node, ins)
        per_class = spatial if keep is None else symbolic.smin(spatial, keep)
        return [common.out(dtypes.INT64, (common.count_dim(node, batches * classes * per_class), 3))]

    def lower(self, node, ins, outs, ctx):
        boxes, scores, y = ins[0], ins[1], outs[0]
        batches, classes, spatial, keep = self.geometry(node, ins)
        keep = spatial if keep is None else symbolic.smin(spatial, keep)
        items = batches * classes
        given = [boxes.name, scores.name]
        slots = {}
        for i, key in ((2, "max_slot"), (3, "iou_slot"), (4, "score_slot")):
            slots[key] = None
            if _scalar(ins, i) is _RUNTIME:
                slots[key] = len(given)
                given.append(ins[i].name)
        iou, score = _scalar(ins, 3), _scalar(ins, 4)
        tiling = {"items": items}
        select = {"phase": "select", "center_point_box": int(self.attr(node, "center_point_box")),
                  "classes": common.tiling_field(tiling, classes, "classes"),
                  "spatial": common.tiling_field(tiling, spatial, "spatial"),
                  "keep": common.tiling_field(tiling, keep, "keep"),
                  "iou": 0.0 if iou in (None, _RUNTIME) else float(iou),
                  "score": None if score in (None, _RUNTIME) else float(score), **slots,
                  "summary": f"NonMaxSuppression: {boxes.describe()}, {scores.describe()} -> {y.describe()} "
                             "(pass 1: select per batch and class)", "tiling_fields": list(tiling)}
        selected = Value(f"{node.name}::selected", dtypes.INT64, (items, keep))
        kept = Value(f"{node.name}::kept", dtypes.INT64, (items,))
        blocks = common.block_dim_for(items, spatial * 8)
        first = KernelCall("kernels/nms.c.j2", "NonMaxSuppression_select", select, given, [selected.name, kept.name],
                           block_dim=blocks, tiling=dict(tiling), workspace=blocks * spatial * 16,
                           temps=[selected, kept])
        compact_tiling = {"items": items}
        compact = {"phase": "compact", "classes": common.tiling_field(compact_tiling, classes, "classes"),
                   "keep": common.tiling_field(compact_tiling, keep, "keep"), "tiling_fields": list(compact_tiling),
                   "summary": f"NonMaxSuppression: {boxes.describe()}, {scores.describe()} -> {y.describe()}"}
        second = KernelCall("kernels/nms.c.j2", "NonMaxSuppression", compact, [selected.name, kept.name], [y.name],
                            block_dim=common.block_dim_for(items, keep), tiling=compact_tiling,
                            count_symbol=symbolic.symbols(y.shape[0]).pop().name)
        return [first, second]


_RUNTIME = object()     # an optional input that only the run knows


def _scalar(ins, i):
    """Optional input i's value: None when omitted, _RUNTIME when only the run knows it."""
    v = ins[i] if len(ins) > i else None
    if v is None:
        return None
    if not v.is_const:
        return _RUNTIME
    arr = np.asarray(v.const).reshape(-1)
    return arr[0] if arr.size else None
