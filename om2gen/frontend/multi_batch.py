"""One graph of all gears: GE's multi-batch clone (multi_batch_clone_pass.cc), over graphs that
are already static and optimized, one per gear.

The result has the user's inputs at their largest gear's shape plus the extra, last input
ascend_mbatch_shape_data (int32, one element per gear value); a MapIndex node turns that input
and the constant gear table into the index of the gear, and a Case node holds one region per gear
(`batch_<i>`), each the nodes of that gear's graph. Lowering emits the Case as GE's label/switch
tasks, so that the captured model picks the gear at replay.

Names follow GE's: every value and node of gear i gets the suffix `_ascend_mbatch_batch_<i>`,
except constants equal in every gear that has them (the weights), which are shared by name and so
stored once. A gear's inputs and outputs are values of their own (the gear's shape) that live at
the address of the model's input or output: the Case records them in CASE_IO (ir/graph.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import UnsupportedOpError
from ..ir import dtypes
from ..ir.gears import CASE_NODE, MAP_INDEX_NODE, SHAPE_DATA_INPUT, SUFFIX, TABLE_CONST, branch_key
from ..ir.graph import CASE_IO, LOOP_IO, ORIGIN_DIMS, REGIONS, Derivation, Graph, Node, Value
from .gears import GearSpec

INDEX_VALUE = MAP_INDEX_NODE + ":0"


def merge(spec: GearSpec, graphs: list[Graph]) -> Graph:
    """The model of all gears from graphs[i], the graph compiled at gear i (the same model,
    imported with spec.shapes(i) and optimized)."""
    first = graphs[0]
    for g in graphs:    # a gear is a static graph: a size its data decides has no place in one
        counted = next((n for n in g.nodes if any(o and not g.values[o].is_static for o in n.outputs)), None)
        if counted is not None:
            raise UnsupportedOpError(
                f"node {counted.name!r} ({counted.op_type}) makes an output whose size its data decides (a "
                "data-dependent count, docs/dynamic-shapes.md); gears compile a static graph per shape and cannot "
                "hold it: give the varying dims a range lo~hi instead of gears (a dynamic model)")
    values: dict[str, Value] = {}
    regions, case_io, source_ops = {}, {}, {}
    renames = []
    for i, g in enumerate(graphs):
        assert g.inputs == first.inputs and g.outputs == first.outputs, "gears of one model have the same I/O"
        rename = _renames(g, i, values)
        renames.append(rename)
        for old, new in rename.items():
            if new not in values:
                v = g.values[old]
                values[new] = Value(new, v.dtype, v.shape, v.const)
        nodes = [_renamed(n, rename, SUFFIX + str(i)) for n in g.nodes]
        regions[branch_key(i)] = (nodes, [rename[o] for o in g.outputs])
        case_io[i] = {rename[x]: x for x in [*g.inputs, *g.outputs] if not g.values[x].is_const}
        source_ops.update({name + SUFFIX + str(i): op for name, op in g.source_ops.items()})

    for name in first.inputs:
        v = max((g.values[name] for g in graphs), key=lambda v: v.size)
        values[name] = Value(name, v.dtype, v.shape)
    values[SHAPE_DATA_INPUT] = Value(SHAPE_DATA_INPUT, dtypes.BY_NAME["int32"], (spec.shape_data_size,))
    table = np.asarray(spec.gears, dtype=np.int32)
    values[TABLE_CONST] = Value(TABLE_CONST, dtypes.BY_NAME["int32"], table.shape, table)
    values[INDEX_VALUE] = Value(INDEX_VALUE, dtypes.BY_NAME["uint32"], ())
    for name in first.outputs:
        v = max((g.values[name] for g in graphs), key=lambda v: v.size)
        values[name] = Value(name, v.dtype, v.shape)

    map_index = Node(MAP_INDEX_NODE, "MapIndex", [SHAPE_DATA_INPUT, TABLE_CONST], [INDEX_VALUE], {}, "om2gen", 1)
    case = Node(CASE_NODE, "Case", [INDEX_VALUE], list(first.outputs),
                {REGIONS: regions, CASE_IO: case_io, "batch_num": len(graphs),
                 "dynamic_type": int(spec.dynamic_type), "user_designate_shape_order": list(spec.order),
                 ORIGIN_DIMS: {n: list(d) for n, d in spec.templates.items()},
                 **{f"pred_value_{i}": list(g) for i, g in enumerate(spec.gears)}}, "om2gen", 1)
    captured = sorted({x for nodes, _ in regions.values() for n in nodes for x in n.inputs if x}
                      - {o for nodes, _ in regions.values() for n in nodes for o in n.outputs})
    case.inputs += [x for x in captured if x in values and values[x].is_const]
    merged = Graph(first.name, values, [map_index, case], [*first.inputs, SHAPE_DATA_INPUT], list(first.outputs),
                   dict(first.opsets), first.source_digest, first.producer, source_ops)
    for i, g in enumerate(graphs):   # how each gear's constants were made, under the merged names
        rename = renames[i]
        for name, d in g.derivations.items():
            merged.derivations.setdefault(rename.get(name, name + SUFFIX + str(i)),
                                          Derivation(tuple(rename.get(x, x) for x in d.sources), d.transform))
    merged.derive(TABLE_CONST, [], "the gear table: each gear's values of ascend_mbatch_shape_data")
    return merged


def _renames(g: Graph, index: int, shared: dict[str, Value]) -> dict[str, str]:
    """{name in g: name in the merged graph}: constants equal to one already kept keep their name
    (stored once); every other value gets the gear's suffix."""
    out = {}
    for name, v in g.values.items():
        if v.is_const and (name not in shared or _same(shared[name], v)):
            out[name] = name
        else:
            out[name] = name + SUFFIX + str(index)
    return out


def _same(a: Value, b: Value) -> bool:
    return (a.is_const and a.dtype == b.dtype and a.shape == b.shape
            and np.asarray(a.const).tobytes() == np.asarray(b.const).tobytes())


def _renamed(n: Node, rename: dict[str, str], suffix: str) -> Node:
    """A copy of a gear's node (every field kept) under the gear's names."""
    node = dataclasses.replace(n, name=n.name + suffix, inputs=[rename.get(x, x) if x else "" for x in n.inputs],
                               outputs=[rename.get(x, x) if x else "" for x in n.outputs],
                               fused_from=[x + suffix for x in n.fused_from])
    _rename_regions(node, rename, suffix)
    return node


def _rename_regions(node: Node, rename: dict[str, str], suffix: str) -> None:
    """A gear's own If and Loop regions: their nodes get the gear's suffix and read and write the
    gear's values (a Loop's body inputs too)."""
    regions = node.attrs.get(REGIONS)
    if not regions:
        return
    node.attrs = dict(node.attrs)
    node.attrs[REGIONS] = {}
    for key, (nodes, names) in regions.items():
        renamed = [_renamed(n, rename, suffix) for n in nodes]
        node.attrs[REGIONS][key] = (renamed, [rename.get(x, x) for x in names])
    if LOOP_IO in node.attrs:
        io = node.attrs[LOOP_IO]
        node.attrs[LOOP_IO] = dataclasses.replace(io, inputs=[rename.get(x, x) for x in io.inputs])
