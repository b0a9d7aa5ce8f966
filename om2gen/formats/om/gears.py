"""A gear model's MODEL_DEF, as GE's multi-batch clone leaves it (GE_DYNAMIC_SHAPES.md 1a;
multi_batch_clone_pass.cc, multi_batch_copy_graph.cc, multi_batch_pass.cc): GE's attribute
names and what goes where (formats/om/graph_def.py builds the ops).

Where it is: the root graph's Case op holds the gear table (_batch_num, _pred_value_<i>,
mbatch_dynamic_type, user_designate_shape_order) and names one subgraph per gear
(OpDef.subgraph_name, each a further ModelDef.graph entry "Batch_<i>"); a dynamic input's Data
ops say its dims with -1 (_mbatch_origin_input_dims); each gear subgraph's Data ops have the
gear's input shapes; the root NetOutput lists every output's shape per gear
(_dynamic_output_dims), which the subgraphs' NetOutputs repeat.
"""
from __future__ import annotations

from ...ir.gears import DYNAMIC
from ...ir.program import GearTable
from .model_def_attrs import attr_of

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
