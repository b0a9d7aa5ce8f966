"""What every stage knows about a gear model (GE_DYNAMIC_SHAPES.md 1a): the names GE's multi-batch
clone gives the parts it adds, the rule that turns a gear's values into its input shapes, and
the text form of each gear's output shapes. The frontend builds the model with them, the OM
format writes and reads them, the runtime runs by them: one definition, so the three agree.
"""
from __future__ import annotations

# ACL_DYNAMIC_TENSOR_NAME (acl_mdl.h): the extra, last input that tells a run its gear
SHAPE_DATA_INPUT = "ascend_mbatch_shape_data"
# node names GE gives the parts it adds (multi_batch_clone_pass.cc)
CASE_NODE = "ascend_mbatch_shape_case"
MAP_INDEX_NODE = "ascend_mbatch_shape_mapindex"
TABLE_CONST = "ascend_mbatch_shape_const"
SUFFIX = "_ascend_mbatch_batch_"        # of every node and value of gear i: SUFFIX + str(i)
DYNAMIC = -1                            # kDynamicInputDim: a dim a gear decides
# GE's DynamicInputType (framework_types_internal.h)
DYNAMIC_BATCH, DYNAMIC_IMAGE, DYNAMIC_DIMS = 1, 2, 3
TYPE_NAMES = {DYNAMIC_BATCH: "dynamic batch", DYNAMIC_IMAGE: "dynamic image size", DYNAMIC_DIMS: "dynamic dims"}
STATIC_OUTPUT = -1                      # kStaticOutput: a dynamic-output-dims entry for every gear


def branch_key(index: int) -> str:
    """The Case region of gear `index` (ir.graph.REGIONS)."""
    return f"batch_{index}"


def batch_label(index: int) -> str:
    """GE's name of gear `index`: its subgraph's name and its nodes' _batch_label."""
    return f"Batch_{index}"


def input_shapes(kind: int, origin: dict[str, tuple[int, ...]], order, gear) -> dict[str, tuple[int, ...]]:
    """Every input's shape at a gear: its -1 dims take the gear's values in the user's order
    (`order`, user_designate_shape_order) — a batch or an H,W pair for every dynamic input, dims
    one value each. `origin`: each input's dims, -1 where a gear decides. A gear with too few
    values is a ValueError."""
    dynamic = [n for n in order if DYNAMIC in origin[n]]
    values = list(gear) if kind == DYNAMIC_DIMS else [v for _ in dynamic for v in gear]
    wanted = sum(origin[n].count(DYNAMIC) for n in dynamic)
    if len(values) != wanted:
        raise ValueError(f"the gear {list(gear)} gives {len(values)} dim values for the {wanted} dynamic dims of "
                         f"{', '.join(dynamic) or 'no input'}")
    it = iter(values)
    shapes = {n: tuple(next(it) if d == DYNAMIC else d for d in origin[n]) for n in order}
    for n, dims in origin.items():
        shapes.setdefault(n, tuple(dims))
    return shapes


def dynamic_output_dims(output_shapes) -> list[str]:
    """GE's ATTR_NAME_DYNAMIC_OUTPUT_DIMS / model_meta's dynamic_output_shape: per output
    "<gear>,<output>,<d0>,<d1>...", or one "-1,<output>,..." for an output of the same shape at
    every gear. `output_shapes`: per gear, every output's shape."""
    out = []
    for j in range(len(output_shapes[0]) if output_shapes else 0):
        shapes = [tuple(s[j]) for s in output_shapes]
        if all(s == shapes[0] for s in shapes):
            out.append(",".join(map(str, [STATIC_OUTPUT, j, *shapes[0]])))
        else:
            out += [",".join(map(str, [i, j, *s])) for i, s in enumerate(shapes)]
    return out


def parse_dynamic_output_dims(texts, gear_num: int, output_num: int) -> dict[tuple[int, int], tuple[int, ...]]:
    """{(gear, output): dims} of dynamic_output_dims' strings (an entry for gear -1 names every
    gear). Malformed text, an index out of range, a negative dim or an output given twice for a
    gear is a ValueError naming the entry."""
    out = {}
    for text in texts:
        try:
            gear, index, *dims = (int(x) for x in str(text).split(","))
        except ValueError:
            raise ValueError(f"output dims {str(text)!r} are not '<gear>,<output>,<dims...>' integers") from None
        if not (gear == STATIC_OUTPUT or 0 <= gear < gear_num) or not 0 <= index < output_num:
            raise ValueError(f"output dims {str(text)!r} name gear {gear} or output {index}; the model has "
                             f"{gear_num} gears and {output_num} outputs")
        if any(d < 0 for d in dims):
            raise ValueError(f"output dims {str(text)!r} hold a negative dim")
        for g in (range(gear_num) if gear == STATIC_OUTPUT else [gear]):
            if (g, index) in out:
                raise ValueError(f"output {index} has two shapes at gear {g} ({str(text)!r})")
            out[(g, index)] = tuple(dims)
    return out
