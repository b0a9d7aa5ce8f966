"""Gears: the few static shapes one model is compiled for, one chosen per run (ATC's
--dynamic_batch_size, --dynamic_image_size and --dynamic_dims; GE_DYNAMIC_SHAPES.md 1a).

The input shapes mark the varying dims -1 (--input-shape "x:-1,3,224,224"); each gear gives the
values of those dims, in input order:

- dynamic batch: one value per gear, for dim 0 of every input marked -1 (only dim 0 may be -1);
- dynamic image size: H,W per gear, for the inputs whose H and W (by --input-format) are -1;
- dynamic dims: one value per -1 dim of all inputs, in the order the inputs are given.

An input the user does not shape takes the model's own declared dims, with its symbolic ones as
-1: `--dynamic-batch-size 1,2,4` alone gears a model whose inputs declare a symbolic batch.

`GearSpec` is what the rest of the compiler sees: the dynamic type (GE's DynamicInputType), the
templates with -1 dims, the gear values (model_meta's dynamic_batch_info) and the user's shape
order (user_designate_shape_order); `shapes(i)` is the static shape of every input at gear i.
"""
from __future__ import annotations

import enum
import operator
import re
from dataclasses import dataclass

from ..advice import gear_option, shape_option
from ..errors import ShapeError
from ..ir import gears as ir_gears
from ..ir.gears import DYNAMIC, input_shapes

MIN_GEARS, MAX_GEARS = 2, 100          # ATC's bounds (--dynamic_batch_size.md)
FORMATS = ("NCHW", "NHWC", "ND")
_HW = {"NCHW": (2, 3), "NHWC": (1, 2)}


class DynamicType(enum.IntEnum):
    """GE's DynamicInputType (framework_types_internal.h): model_meta's dynamic_type (the numbers
    are ir/gears.py's, which the runtime and the OM format read)."""
    FIXED = 0
    DYNAMIC_BATCH = ir_gears.DYNAMIC_BATCH
    DYNAMIC_IMAGE = ir_gears.DYNAMIC_IMAGE
    DYNAMIC_DIMS = ir_gears.DYNAMIC_DIMS


# the option (Python keyword) of each type, as advice.gear_option spells it
OPTION = {DynamicType.DYNAMIC_BATCH: "dynamic_batch_size", DynamicType.DYNAMIC_IMAGE: "dynamic_image_size",
          DynamicType.DYNAMIC_DIMS: "dynamic_dims"}


@dataclass(frozen=True)
class GearSpec:
    dynamic_type: DynamicType
    templates: dict[str, tuple[int, ...]]      # every run-time input's dims, -1 where a gear decides
    order: tuple[str, ...]                     # user_designate_shape_order: the inputs in the user's order
    gears: tuple[tuple[int, ...], ...]         # per gear, the values of the -1 dims (dynamic_batch_info)

    @property
    def dynamic_inputs(self) -> tuple[str, ...]:
        """The inputs with a -1 dim, in the user's order."""
        return tuple(n for n in self.order if DYNAMIC in self.templates[n])

    @property
    def shape_data_size(self) -> int:
        """Elements of ascend_mbatch_shape_data: one per value of a gear (batch 1, image 2, dims n)."""
        return len(self.gears[0])

    def shapes(self, index: int) -> dict[str, tuple[int, ...]]:
        """{input: static dims} at gear `index`: the -1 dims filled in the user's input order."""
        return input_shapes(self.dynamic_type, self.templates, self.order, self.gears[index])

    def describe(self, index: int) -> str:
        """'x[4,3,224,224]' (each dynamic input at gear `index`)."""
        shapes = self.shapes(index)
        return ", ".join(f"{n}[{','.join(map(str, shapes[n]))}]" for n in self.dynamic_inputs)

    def listing(self) -> str:
        """Every gear, for an error: 'gear 0: x[1,3,224,224]; gear 1: x[2,3,224,224]'."""
        return "; ".join(f"gear {i}: {self.describe(i)}" for i in range(len(self.gears)))

    def find(self, shapes: dict[str, tuple[int, ...]]) -> int | None:
        """The gear whose shapes equal `shapes` on every dynamic input, or None."""
        for i in range(len(self.gears)):
            at = self.shapes(i)
            if all(tuple(shapes.get(n, ())) == at[n] for n in self.dynamic_inputs):
                return i
        return None


def parse(text, option: str, group_size: int | None) -> tuple[tuple[int, ...], ...]:
    """ATC's value syntax: "1,2,4,8" (batch: one value per gear) or "224,224;448,448" (';' between
    gears, ',' between values); a trailing separator is allowed. From Python also a sequence of
    ints (batch) or of int sequences. group_size: the values of one gear."""
    if isinstance(text, (str, bytes)):
        text = text.decode() if isinstance(text, bytes) else text
        if not re.fullmatch(r"[\d,; ]*", text):
            raise ShapeError(f"{gear_option(option)} {text!r}: only digits, ',' and ';' are allowed, e.g. "
                             f"{gear_option(option, _EXAMPLE[option])}")
        if option == "dynamic_batch_size":
            groups = [[v] for v in text.replace(";", ",").split(",") if v.strip()]
        else:
            groups = [g.split(",") for g in text.split(";") if g.strip()]
        try:
            gears = [tuple(int(v) for v in g if v.strip()) for g in groups]
        except ValueError:
            raise ShapeError(f"{gear_option(option)} {text!r}: a value is not an integer") from None
    else:
        try:
            gears = [tuple(operator.index(v) for v in ((g,) if isinstance(g, int) else g)) for g in text]
        except TypeError:
            raise ShapeError(f"{gear_option(option)}={text!r}: give a list of gears, e.g. "
                             f"{gear_option(option, _EXAMPLE[option])}") from None
    if not MIN_GEARS <= len(gears) <= MAX_GEARS:
        raise ShapeError(f"{gear_option(option)} gives {len(gears)} gear(s); give {MIN_GEARS} to {MAX_GEARS}")
    for g in gears:
        if group_size is not None and len(g) != group_size:
            raise ShapeError(f"{gear_option(option)}: the gear {','.join(map(str, g)) or '(empty)'} has "
                             f"{len(g)} value(s); each gear gives {group_size}"
                             + (" (one per -1 dim of the input shapes)" if option == "dynamic_dims" else ""))
        if any(v <= 0 for v in g):
            raise ShapeError(f"{gear_option(option)}: the gear {','.join(map(str, g))} has a value <= 0; "
                             "every value is a dim size >= 1")
    seen = set()
    for g in gears:
        if g in seen:
            raise ShapeError(f"{gear_option(option)} gives the gear {','.join(map(str, g))} twice")
        seen.add(g)
    return tuple(gears)


def atc_text(option: str, value) -> str:
    """The gears of an option in ATC's spelling ("1,2,4,8", "224,224;448,448"), however given."""
    gears = parse(value, option, None)
    sep = "," if option == "dynamic_batch_size" else ";"
    return sep.join(",".join(map(str, g)) for g in gears)


_EXAMPLE = {"dynamic_batch_size": [1, 2, 4, 8], "dynamic_image_size": [(224, 224), (448, 448)],
            "dynamic_dims": [(128,), (256,)]}


def resolve(*, input_shapes: dict, declared: list[tuple[str, tuple]], dynamic_batch_size=None,
            dynamic_image_size=None, dynamic_dims=None, input_format: str | None = None) -> GearSpec | None:
    """The gear spec of the options, or None when no gear option is given.

    input_shapes: the user's {input: dims}, -1 marking a dynamic dim, in the user's order.
    declared: [(input, dims)] of the model's run-time inputs, a dim an int or None (symbolic)."""
    given = {t: v for t, v in ((DynamicType.DYNAMIC_BATCH, dynamic_batch_size),
                               (DynamicType.DYNAMIC_IMAGE, dynamic_image_size),
                               (DynamicType.DYNAMIC_DIMS, dynamic_dims)) if v is not None}
    if not given:
        return None
    if len(given) > 1:
        names = [gear_option(OPTION[t]) for t in given]
        raise ShapeError(f"{' and '.join(names)} cannot be combined; give one of them (ATC's rule)")
    (kind, value), = given.items()
    option = OPTION[kind]
    fmt = (input_format or ("ND" if kind is DynamicType.DYNAMIC_DIMS else "NCHW")).upper()
    if fmt not in FORMATS:
        raise ShapeError(f"input format {input_format!r} is not one of {', '.join(FORMATS)}")
    templates, order = _templates(input_shapes, declared)
    dynamic = [n for n in order if DYNAMIC in templates[n]]
    if not dynamic:
        raise ShapeError(f"{gear_option(option)} needs a dim marked -1 to vary, but no input has one; mark it in "
                         f"{shape_option()}, e.g. {shape_option(order[0] if order else 'x', _marked(kind))}")
    if kind is DynamicType.DYNAMIC_BATCH:
        for n in dynamic:
            bad = [i for i, d in enumerate(templates[n]) if d == DYNAMIC and i != 0]
            if bad:
                raise ShapeError(f"{gear_option(option)}: only dim 0 (the batch) may be -1, but {n} has -1 at dim "
                                 f"{bad[0]}: {n}{_text(templates[n])}; use {gear_option('dynamic_dims')} to vary "
                                 "other dims")
        group = 1
    elif kind is DynamicType.DYNAMIC_IMAGE:
        for n in dynamic:
            dims = templates[n]
            marked = [i for i, d in enumerate(dims) if d == DYNAMIC]
            if fmt not in _HW or len(dims) != 4 or marked != list(_HW[fmt]):
                where = "H and W" if fmt not in _HW else f"H and W (dims {_HW[fmt][0]} and {_HW[fmt][1]} of {fmt})"
                raise ShapeError(f"{gear_option(option)}: only {where} of a 4-d input may be -1, both of them; "
                                 f"{n} is {n}{_text(dims)}")
        group = 2
    else:
        group = sum(templates[n].count(DYNAMIC) for n in dynamic)
    gears = parse(value, option, group)
    return GearSpec(kind, templates, tuple(order), gears)


def _templates(input_shapes: dict, declared: list[tuple[str, tuple]]):
    """Every run-time input's dims with -1s, in the user's order then the model's: a shaped input
    as shaped, an unshaped one as declared (symbolic dims -1)."""
    declared_dims = dict(declared)
    templates, order = {}, []
    for name, dims in input_shapes.items():
        if name not in declared_dims:
            continue    # pins.check_names reports it, listing the model's inputs
        templates[name] = tuple(int(d) for d in dims)
        order.append(name)
    for name, dims in declared:
        if name not in templates:
            if dims is None:
                raise ShapeError(f"input {name!r} has no declared shape; give it one with {shape_option(name)}")
            templates[name] = tuple(DYNAMIC if d is None else int(d) for d in dims)
            order.append(name)
    for name in order:
        if any(d < DYNAMIC for d in templates[name]):
            raise ShapeError(f"{shape_option(name, templates[name])}: a dim is -1 (set by a gear) or >= 0")
    return templates, order


def no_gears_for(where: str) -> str:
    """The error for a -1 dim (in `where`, the option that marked it) without a gear option."""
    return (f"{where} marks a dim -1 (dynamic) but no gear option says which values it takes; add "
            f"{gear_option('dynamic_batch_size', [1, 2, 4, 8])} (dim 0), "
            f"{gear_option('dynamic_image_size', [(224, 224), (448, 448)])} (H,W) or "
            f"{gear_option('dynamic_dims', [(128,), (256,)])} (any dims)")


def _marked(kind: DynamicType) -> tuple[int, ...]:
    return {DynamicType.DYNAMIC_BATCH: (-1, 3, 224, 224), DynamicType.DYNAMIC_IMAGE: (1, 3, -1, -1)}.get(kind, (1, -1))


def _text(dims) -> str:
    return "[" + ",".join(map(str, dims)) + "]"
