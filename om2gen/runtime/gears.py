"""Gears at run time: the gear a run's input shapes are, read from model_meta.json's GE keys
(dynamic_batch_info, dynamic_type, dynamic_output_shape, user_designate_shape_order and the
inputs' origin_input_dims; docs/gears.md).

A gear model's last input is ascend_mbatch_shape_data (int32, the gear's values): Model.run
fills it from the shapes of the arrays it is given, the ACL API from aclmdlSetDynamicBatchSize
and its peers. The model checks it again before it replays, against its own gear table.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ArchiveError, InputError
# the type numbers and names and SHAPE_DATA_INPUT are the runtime's too (acl.mdl, runtime/model.py)
from ..ir.gears import (DYNAMIC_BATCH, DYNAMIC_DIMS, DYNAMIC_IMAGE, SHAPE_DATA_INPUT, TYPE_NAMES,  # noqa: F401
                        input_shapes, parse_dynamic_output_dims)


@dataclass(frozen=True)
class Gears:
    dynamic_type: int
    inputs: tuple[str, ...]                          # the user's inputs, in the model's order
    origin_dims: dict[str, tuple[int, ...]]          # each user input's dims, -1 where a gear decides
    values: tuple[tuple[int, ...], ...]              # per gear: the shape data (dynamic_batch_info)
    input_shapes: tuple[dict[str, tuple[int, ...]], ...]    # per gear: every user input's shape
    output_shapes: tuple[tuple[tuple[int, ...], ...], ...]  # per gear: every output's shape
    order: tuple[str, ...] = ()                      # user_designate_shape_order: the gear values' order
    _by_shapes: dict = field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.values)

    @property
    def batch_outputs(self) -> frozenset[int]:
        """The outputs whose dim 0 is the batch at every gear (pad_to_gear cuts them back)."""
        return frozenset(j for j in range(len(self.output_shapes[0]))
                         if all(s[j] and s[j][0] == v[0] for s, v in zip(self.output_shapes, self.values)))

    @property
    def dynamic(self) -> tuple[str, ...]:
        """The inputs with a dim a gear decides."""
        return tuple(n for n in self.inputs if -1 in self.origin_dims[n])

    def key(self, shapes) -> tuple:
        """What identifies a gear: the shapes of the dynamic inputs, in order."""
        return tuple(tuple(shapes[n]) for n in self.dynamic)

    def find(self, shapes) -> int | None:
        """The gear of these input shapes ({name: shape}), or None."""
        return self._by_shapes.get(self.key(shapes))

    def find_values(self, values) -> int | None:
        """The gear whose shape data equals `values`, or None."""
        values = tuple(int(v) for v in values)
        return next((i for i, g in enumerate(self.values) if g == values), None)

    def listing(self) -> str:
        """'x[1,3,224,224], x[2,3,224,224]' (every gear's dynamic inputs)."""
        return "; ".join(", ".join(f"{n}[{','.join(map(str, s[n]))}]" for n in self.dynamic)
                         for s in self.input_shapes)

    def select(self, shapes) -> int:
        """The gear of these shapes; a shape that is no gear is an InputError listing the gears."""
        gear = self.find(shapes)
        if gear is None:
            given = ", ".join(f"{n}{list(shapes[n])}" for n in self.dynamic)
            raise InputError(f"the input shapes {given} are no gear of this model ({TYPE_NAMES[self.dynamic_type]}); "
                             f"its gears are: {self.listing()}. Feed one of them, load with pad_to_gear=True to run "
                             "a smaller batch on the next gear up, or recompile with the shape among the gears")
        return gear

    def gear_up(self, shapes) -> int | None:
        """pad_to_gear: the smallest gear whose batch holds the given one (dynamic batch only)."""
        batch = {int(shapes[n][0]) for n in self.dynamic}
        rest_ok = all(tuple(shapes[n][1:]) == self.input_shapes[0][n][1:] for n in self.dynamic)
        if len(batch) != 1 or not rest_ok:
            return None
        b = batch.pop()
        fits = [(g[0], i) for i, g in enumerate(self.values) if g[0] >= b]
        return min(fits)[1] if fits else None


def from_meta(meta: dict, where: str) -> Gears | None:
    """The gears of a model_meta.json (None for a static model); inconsistent keys are an
    ArchiveError."""
    info = meta.get("dynamic_batch_info")
    if not info:
        return None
    try:
        kind = int(meta["dynamic_type"])
        ios = meta["inputs"]
        if not ios or ios[-1]["name"] != SHAPE_DATA_INPUT:
            raise ValueError(f"its last input is not {SHAPE_DATA_INPUT}")
        users = ios[:-1]
        origin = {d["name"]: tuple(int(x) for x in d.get("origin_input_dims", d["shape"])) for d in users}
        values = tuple(tuple(int(v) for v in g) for g in info)
        if values and ios[-1]["shape"] != [len(values[0])]:
            raise ValueError(f"{SHAPE_DATA_INPUT} does not hold one value per gear dim")
        outs = [tuple(int(x) for x in d["shape"]) for d in meta["outputs"]]
        given = parse_dynamic_output_dims(meta.get("dynamic_output_shape") or [], len(values), len(outs))
        out_shapes = tuple(tuple(given.get((g, j), s) for j, s in enumerate(outs)) for g in range(len(values)))
        return _gears(kind, [d["name"] for d in users], origin, values, meta.get("user_designate_shape_order"),
                      out_shapes)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ArchiveError(f"{where}: model_meta.json describes its gears inconsistently ({exc}); the archive is "
                           "corrupt or was written by another tool: recompile it") from None


def from_table(table, inputs: list[str], where: str) -> Gears:
    """The gears of a Program read from a classic OM (ir.program.GearTable, which
    formats/om/reader.py has checked); `inputs`: the Program's input names, the shape data last."""
    try:
        return _gears(table.dynamic_type, inputs[:-1], {n: tuple(d) for n, d in table.origin_dims.items()},
                      tuple(tuple(v) for v in table.values), table.order,
                      tuple(tuple(tuple(s) for s in outs) for outs in table.output_shapes))
    except (KeyError, TypeError, ValueError) as exc:
        raise ArchiveError(f"{where}: the model's gears are inconsistent ({exc}); the file is corrupt") from None


def _gears(kind: int, users: list[str], origin: dict, values: tuple, order, out_shapes: tuple) -> Gears:
    """The Gears of these facts, each gear's input shapes by GE's rule (ir/gears.py); a ValueError
    where the facts disagree."""
    if kind not in TYPE_NAMES or len(values) < 2 or len({len(g) for g in values}) != 1:
        raise ValueError("dynamic_type or dynamic_batch_info is malformed")
    order = [n for n in order or users if n in origin]
    in_shapes = tuple(input_shapes(kind, origin, order, g) for g in values)
    gears = Gears(kind, tuple(users), origin, values, in_shapes, out_shapes, tuple(order))
    for i, shapes in enumerate(in_shapes):
        gears._by_shapes.setdefault(gears.key(shapes), i)
    return gears


def shape_data(gears: Gears) -> list[np.ndarray]:
    """Per gear, the int32 array ascend_mbatch_shape_data holds."""
    return [np.asarray(g, dtype=np.int32) for g in gears.values]
