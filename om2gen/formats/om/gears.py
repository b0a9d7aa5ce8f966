"""A gear model's MODEL_DEF, as GE's multi-batch clone leaves it (GE_DYNAMIC_SHAPES.md 1a;
multi_batch_clone_pass.cc, multi_batch_copy_graph.cc, multi_batch_pass.cc): GE's attribute
names, what goes where (formats/om/graph_def.py builds the ops) and the reader that turns them
back into the Program's GearTable, checking everything a hostile file could get wrong.

Where it is: the root graph's Case op holds the gear table (_batch_num, _pred_value_<i>,
mbatch_dynamic_type, user_designate_shape_order) and names one subgraph per gear
(OpDef.subgraph_name, each a further ModelDef.graph entry "Batch_<i>"); a dynamic input's Data
ops say its dims with -1 (_mbatch_origin_input_dims); each gear subgraph's Data ops have the
gear's input shapes; the root NetOutput lists every output's shape per gear
(_dynamic_output_dims), which the subgraphs' NetOutputs repeat.
"""
from __future__ import annotations

import math

from ...errors import ArchiveError
from ...ir import dtypes
from ...ir.gears import (DYNAMIC, DYNAMIC_BATCH, DYNAMIC_DIMS, DYNAMIC_IMAGE, SHAPE_DATA_INPUT, batch_label,
                         input_shapes, parse_dynamic_output_dims)
from ...ir.program import GearTable, IoDesc
from .model_def_attrs import attr_kind, attr_of

# GE's attribute names (graph_metadef/graph/attr/ge_attr_define.cc)
BATCH_NUM = "_batch_num"                        # ATTR_NAME_BATCH_NUM, Case: the number of gears
PRED_VALUE = "_pred_value"                      # ATTR_NAME_PRED_VALUE + "_<i>", Case: gear i's shape data
DYNAMIC_TYPE = "mbatch_dynamic_type"            # ATTR_DYNAMIC_TYPE, Case: DynamicInputType
SHAPE_ORDER = "user_designate_shape_order"      # ATTR_USER_DESIGNEATE_SHAPE_ORDER, Case: the user's input order
INSERTED_BY_MBATCH = "mbatch-inserted-node"     # ATTR_INSERT_BY_MBATCH: the Case and the shape-data Data
BATCH_LABEL = "_batch_label"                    # ATTR_NAME_BATCH_LABEL: every op of gear i's subgraph, "Batch_<i>"
DYNAMIC_OUTPUT_DIMS = "_dynamic_output_dims"    # ATTR_NAME_DYNAMIC_OUTPUT_DIMS, NetOutput: "<gear>,<output>,<dims>"
ORIGIN_INPUT_DIMS = "_mbatch_origin_input_dims"  # ATTR_MBATCH_ORIGIN_INPUT_DIMS, a dynamic input's Data ops
PARENT_NODE_INDEX = "_parent_node_index"        # ATTR_NAME_PARENT_NODE_INDEX: which Case input / output it is
CASE_NAME = "mbatch-switch-name"                # a dynamic input's root Data: the Case that switches on it
HOST_TENSOR = "_host_tensor"                    # ATTR_NAME_HOST_TENSOR, the shape-data Data
# the shape-data Data's own marks (CreateIndexDataNode)
SHAPE_DATA_MARKS = {"_is_multi_batch_shape_data": True, "_ge_attr_lowering_func": "multi_batch_shape_data",
                    INSERTED_BY_MBATCH: True, HOST_TENSOR: True}
MAX_GEARS = 128     # ACL_MAX_BATCH_NUM: the most gears aclmdlGetDynamicBatch and its peers can hand back


def pred_value(index: int) -> str:
    return f"{PRED_VALUE}_{index}"


def set_attrs(op, values: dict) -> None:
    """Sets op attributes from bools, ints, strings and lists of ints or of strings."""
    for key, value in values.items():
        a = attr_of(value)
        assert a is not None, f"attribute {key}: {value!r} has no plain GE form"
        op.attr[key].CopyFrom(a)


def case_attrs(table: GearTable) -> dict:
    """The Case op's gear attributes (CreateRootGraph, StampDynamicType)."""
    out = {BATCH_NUM: len(table.values), DYNAMIC_TYPE: int(table.dynamic_type), SHAPE_ORDER: list(table.order),
           INSERTED_BY_MBATCH: True}
    out.update({pred_value(i): list(v) for i, v in enumerate(table.values)})
    return out


def origin_dims_attrs(table: GearTable, name: str) -> dict:
    """A user input's Data ops: its dims with -1 where a gear decides, for a dynamic input only (GE)."""
    dims = table.origin_dims.get(name)
    return {ORIGIN_INPUT_DIMS: list(dims)} if dims is not None and DYNAMIC in dims else {}


def user_input_attrs(table: GearTable, name: str, case: str) -> dict:
    """A user input's root Data op (SetMaxShapeToData): a dynamic one names the Case too."""
    dims = origin_dims_attrs(table, name)
    return {**dims, CASE_NAME: case} if dims else {}


def shape_data_attrs() -> dict:
    """The ascend_mbatch_shape_data Data op's marks (CreateIndexDataNode)."""
    return dict(SHAPE_DATA_MARKS)


# ---------------------------------------------------------------------------------------------
# reading

def gear_case(graph):
    """The root graph's gear Case op (a Case with _batch_num), or None for a static model."""
    cases = [op for op in graph.op if op.type == "Case" and BATCH_NUM in op.attr]
    if len(cases) > 1:
        raise ArchiveError(f"the root graph has {len(cases)} Case ops with {BATCH_NUM} "
                           f"({', '.join(c.name for c in cases)}); a gear model has one")
    return cases[0] if cases else None


def _get(op, key: str, kind: str, what: str):
    if key not in op.attr:
        raise ArchiveError(f"{what} has no {key} attribute; the gear model is incomplete")
    a = op.attr[key]
    which = a.WhichOneof("value")
    if kind == "list_i" and (which == "list" and not len(a.list.s) and not len(a.list.f)):
        return [int(v) for v in a.list.i]
    if kind == "list_s" and which == "list" and not len(a.list.i) and not len(a.list.f):
        try:
            return [v.decode("utf-8") for v in a.list.s]
        except UnicodeDecodeError:
            raise ArchiveError(f"{what} attribute {key} holds a name that is not UTF-8") from None
    if kind == "i" and which == "i":
        return int(a.i)
    wanted = {"i": "an int", "list_i": "a list of ints", "list_s": "a list of strings"}[kind]
    raise ArchiveError(f"{what} attribute {key} is {attr_kind(a)}, not {wanted}; the OM is corrupt")


def read_table(md, case, inputs: list[IoDesc], outputs: list[IoDesc], loop_bodies=frozenset()) -> GearTable:
    """The GearTable of a gear model's MODEL_DEF (`case`: its root Case op; `inputs`/`outputs`:
    the Program's, from the root graph's Data and NetOutput ops). Every part is checked against
    the others: the gear values against the shape-data input, each input's -1 dims against its
    largest shape, each gear's shapes against the buffers, the subgraphs against the Case
    (loop_bodies: the names of the subgraphs that are Loop bodies, not gears)."""
    root = md.graph[0]
    what = f"Case op {case.name!r}"
    n = _get(case, BATCH_NUM, "i", what)
    if not 2 <= n <= MAX_GEARS:
        raise ArchiveError(f"{what} says {BATCH_NUM} {n}; a gear model has 2 to {MAX_GEARS} gears")
    kind = _get(case, DYNAMIC_TYPE, "i", what)
    if kind not in (DYNAMIC_BATCH, DYNAMIC_IMAGE, DYNAMIC_DIMS):
        raise ArchiveError(f"{what} says {DYNAMIC_TYPE} {kind}; GE's gear types are {DYNAMIC_BATCH} (batch), "
                           f"{DYNAMIC_IMAGE} (image size) and {DYNAMIC_DIMS} (dims)")
    values = [_get(case, pred_value(i), "list_i", what) for i in range(n)]
    _check_values(values, kind, what)

    if not inputs or inputs[-1].name != SHAPE_DATA_INPUT:
        raise ArchiveError(f"a gear model's last input is {SHAPE_DATA_INPUT}; this one's is "
                           f"{inputs[-1].name if inputs else 'missing'}")
    shape_data = inputs[-1]
    if shape_data.dtype != "int32" or shape_data.shape != (len(values[0]),):
        raise ArchiveError(f"{SHAPE_DATA_INPUT} is {shape_data.dtype}{list(shape_data.shape)}; the gears give "
                           f"{len(values[0])} values each, so it must be int32[{len(values[0])}]")
    users = inputs[:-1]
    names = [d.name for d in users]
    origin = _origin_dims(root, users)
    order = _get(case, SHAPE_ORDER, "list_s", what) if SHAPE_ORDER in case.attr else list(names)
    if len(set(order)) != len(order) or any(x not in origin for x in order):
        raise ArchiveError(f"{what}: {SHAPE_ORDER} {order} must name each of the inputs {names} at most once")
    try:
        in_shapes = [input_shapes(kind, origin, order, v) for v in values]
    except ValueError as exc:
        raise ArchiveError(f"{what}: {exc}; the gear values do not fit the inputs' -1 dims") from None
    for i, shapes in enumerate(in_shapes):
        for d in users:
            if _nbytes(d.dtype, shapes[d.name]) > d.nbytes:
                raise ArchiveError(f"gear {i} gives input {d.name!r} the shape {list(shapes[d.name])}, larger than its "
                                   f"buffer {list(d.shape)}")
    out_shapes = _output_shapes(root, n, outputs)
    _check_subgraphs(md, case, in_shapes, out_shapes, names, loop_bodies)
    return GearTable(kind, values, order, {k: list(v) for k, v in origin.items()},
                     [[shapes[x] for x in names] + [shape_data.shape] for shapes in in_shapes], out_shapes)


def _check_values(values, kind: int, what: str) -> None:
    width = {DYNAMIC_BATCH: 1, DYNAMIC_IMAGE: 2}.get(kind, len(values[0]))
    meaning = {DYNAMIC_BATCH: "the batch", DYNAMIC_IMAGE: "H,W"}.get(kind, "one per -1 dim")
    for i, v in enumerate(values):
        if len(v) != width or not v:
            raise ArchiveError(f"{what}: {pred_value(i)} holds {len(v)} values; every gear gives {width or 1} "
                               f"({meaning})")
        if any(x < 1 for x in v):
            raise ArchiveError(f"{what}: {pred_value(i)} is {v}; gear values are dim sizes >= 1")
    if len({tuple(v) for v in values}) != len(values):
        raise ArchiveError(f"{what}: two gears have the same values ({values}); each gear is a different shape")


def _origin_dims(root, users: list[IoDesc]) -> dict[str, tuple[int, ...]]:
    """Each user input's dims, -1 where a gear decides (its Data op's _mbatch_origin_input_dims;
    a static input: its shape). A fixed dim must be the buffer's."""
    data = {op.name: op for op in root.op if op.type == "Data"}
    origin = {}
    for d in users:
        op = data.get(d.name)
        if op is None or ORIGIN_INPUT_DIMS not in op.attr:
            origin[d.name] = tuple(d.shape)
            continue
        dims = tuple(_get(op, ORIGIN_INPUT_DIMS, "list_i", f"Data op {op.name!r}"))
        if len(dims) != len(d.shape) or any(x != DYNAMIC and x != s for x, s in zip(dims, d.shape)):
            raise ArchiveError(f"Data op {op.name!r}: {ORIGIN_INPUT_DIMS} {list(dims)} does not fit its shape "
                               f"{list(d.shape)} (the same rank, -1 or the same size in every dim)")
        origin[d.name] = dims
    if not any(DYNAMIC in dims for dims in origin.values()):
        raise ArchiveError(f"no input has a dim a gear decides (-1 in {ORIGIN_INPUT_DIMS}); the gears vary nothing")
    return origin


def _output_shapes(root, n: int, outputs: list[IoDesc]) -> list[list[tuple[int, ...]]]:
    """Per gear, every output's shape: the root NetOutput's _dynamic_output_dims, which must give
    each output at each gear a shape that fits its buffer."""
    nets = [op for op in root.op if op.type == "NetOutput"]
    if len(nets) != 1:
        raise ArchiveError(f"the root graph has {len(nets)} NetOutput ops; a model has one")
    what = f"NetOutput op {nets[0].name!r}"
    try:
        given = parse_dynamic_output_dims(_get(nets[0], DYNAMIC_OUTPUT_DIMS, "list_s", what), n, len(outputs))
    except ValueError as exc:
        raise ArchiveError(f"{what}: {DYNAMIC_OUTPUT_DIMS}: {exc}") from None
    shapes = []
    for g in range(n):
        row = []
        for j, d in enumerate(outputs):
            if (g, j) not in given:
                raise ArchiveError(f"{what}: {DYNAMIC_OUTPUT_DIMS} gives output {j} no shape at gear {g}")
            s = given[(g, j)]
            if _nbytes(d.dtype, s) > d.nbytes:
                raise ArchiveError(f"{what}: at gear {g} output {j} is {list(s)}, larger than its buffer "
                                   f"{list(d.shape)}")
            row.append(s)
        shapes.append(row)
    return shapes


def _check_subgraphs(md, case, in_shapes, out_shapes, names: list[str], loop_bodies) -> None:
    """The Case names one subgraph per gear, Batch_<i>, and they are exactly the other graphs of
    MODEL_DEF but the Loop bodies; each gear's Data ops and NetOutput inputs have that gear's shapes."""
    others = [g for g in md.graph[1:] if g.name not in loop_bodies]
    graphs = {g.name: g for g in others}
    listed = list(case.subgraph_name)
    expected = [batch_label(i) for i in range(len(in_shapes))]
    if listed != expected or len(graphs) != len(others) or set(graphs) != set(listed):
        raise ArchiveError(f"Case op {case.name!r} names the subgraphs {listed} and MODEL_DEF holds "
                           f"{[g.name for g in others]}; a gear model has one per gear: {expected}")
    for i, name in enumerate(listed):
        nets = 0
        for op in graphs[name].op:
            where = f"subgraph {name} op {op.name!r}"
            if op.type == "Data" and PARENT_NODE_INDEX in op.attr:
                p = _get(op, PARENT_NODE_INDEX, "i", where)
                if not 0 <= p <= len(names):
                    raise ArchiveError(f"{where}: {PARENT_NODE_INDEX} {p}, the Case has {len(names) + 1} inputs")
                shapes = [tuple(td.shape.dim) for td in op.output_desc]
                if p and shapes != [in_shapes[i][names[p - 1]]]:
                    raise ArchiveError(f"{where} stands for input {names[p - 1]!r}, which gear {i} shapes "
                                       f"{list(in_shapes[i][names[p - 1]])}; the op says "
                                       f"{[list(x) for x in shapes]}")
            elif op.type == "NetOutput":
                nets += 1
                got = [tuple(td.shape.dim) for td in op.input_desc]
                if got != [tuple(s) for s in out_shapes[i]]:
                    raise ArchiveError(f"{where}: gear {i}'s outputs are {[list(s) for s in got]}, the root "
                                       f"NetOutput's {DYNAMIC_OUTPUT_DIMS} says {[list(s) for s in out_shapes[i]]}")
                parents = [_get(td, PARENT_NODE_INDEX, "i", f"{where} input {j}") for j, td in enumerate(op.input_desc)]
                if parents != list(range(len(parents))):
                    raise ArchiveError(f"{where}: its inputs' {PARENT_NODE_INDEX} are {parents}; input j of a gear's "
                                       f"NetOutput is the Case's output j")
        if nets != 1:
            raise ArchiveError(f"subgraph {name} has {nets} NetOutput ops; a gear's subgraph has one")


def _nbytes(dtype: str, shape) -> int:
    return dtypes.BY_NAME[dtype].itemsize * math.prod(shape)
