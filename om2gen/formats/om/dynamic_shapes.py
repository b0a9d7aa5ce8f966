"""A dynamic-shape model in a classic OM (the RT2 path, docs/dynamic-shapes.md): GE keeps -1 in
an unknown dim and the range of each dim in the tensor descriptor's "shape_range" (and
"origin_shape_range") attribute, a ListListInt of [lo, hi] per dim, hi -1 where unbounded
(GeTensorDesc::SetShapeRange); such a tensor's size is -1. The file header says
is_unknow_model 1. The model inputs' and outputs' descriptors (Data, NetOutput) carry the ranges
and, as size, the bytes the task list's logical memory gives them."""
from __future__ import annotations

import math

from ...errors import ArchiveError
from ...ir import symbolic
from . import proto

SHAPE_RANGE = "shape_range"
ORIGIN_SHAPE_RANGE = "origin_shape_range"


def _ranges(dims) -> list[tuple[int, int]]:
    return [(int(lo), -1 if math.isinf(hi) else int(hi)) for lo, hi in map(symbolic.bounds, dims)]


def mark(graph, program) -> None:
    """Sets the ranges and sizes of the root graph's Data and NetOutput descriptors."""
    d = program.dynamic
    for op in graph.op:
        if op.type == "Data":
            index = int(op.attr["index"].i)
            for td in (*op.input_desc, *op.output_desc):
                _set(td, d.input_dims[index], program.inputs[index].nbytes)
        elif op.type == "NetOutput":
            for td, dims, io in zip(op.input_desc, d.output_dims, program.outputs):
                _set(td, dims, io.nbytes)


def _set(td, dims, nbytes: int) -> None:
    lli = proto.AttrDef.ListListInt
    value = proto.AttrDef(list_list_int=lli(list_list_i=[lli.ListInt(list_i=[lo, hi]) for lo, hi in _ranges(dims)]))
    td.attr[SHAPE_RANGE].CopyFrom(value)
    td.attr[ORIGIN_SHAPE_RANGE].CopyFrom(value)
    td.size = nbytes


def shape_range(td, what: str) -> list[tuple[int, int]] | None:
    """A descriptor's [lo, hi] per dim (None: it has none); one that does not fit its shape is refused."""
    if SHAPE_RANGE not in td.attr:
        return None
    rows = [tuple(int(x) for x in r.list_i) for r in td.attr[SHAPE_RANGE].list_list_int.list_list_i]
    if len(rows) != len(td.shape.dim) or any(len(r) != 2 or r[0] < 0 or (r[1] != -1 and r[1] < r[0]) for r in rows):
        raise ArchiveError(f"{what}: its shape_range {rows} does not fit its shape {list(td.shape.dim)}; the OM is "
                           "corrupt")
    return rows


def ranges(graph) -> tuple[dict, dict]:
    """The ranges of a root graph's inputs (Data ops, by index) and outputs (NetOutput's inputs, by
    position), of those that have them: ({input: [(lo, hi)] per dim}, {output: ...})."""
    ins, outs = {}, {}
    for op in graph.op:
        if op.type == "Data" and op.output_desc:
            rows = shape_range(op.output_desc[0], f"input {op.name!r}")
            if rows is not None:
                ins[int(op.attr["index"].i)] = rows
        elif op.type == "NetOutput":
            for j, td in enumerate(op.input_desc):
                rows = shape_range(td, f"output {j}")
                if rows is not None:
                    outs[j] = rows
    return ins, outs
