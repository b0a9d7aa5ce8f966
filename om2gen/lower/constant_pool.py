"""Constants placed where an earlier kernel set of the same archive keeps the same bytes
(--target x86_64-avx2,x86_64-avx512; docs/archive-format.md §2, *Several kernel sets*).

A model library has its constants' offsets compiled in, so two kernel sets can read one
constants blob only where each constant equal to an earlier set's sits at that set's offset.
Most of a network's constants are the same bytes for every set (biases, a MatMul's B panels of
16 columns, depthwise weights); what differs is what lowering packs per target (GEMM A panels of
MR rows, Winograd transforms). `place` moves a lowered Program's constants accordingly: one whose
bytes the pool holds to the pool's offset, the rest after all the pool holds, and every address
pointing into a constant with it. The sets' blobs then agree wherever both hold a constant, and
the archive stores their union once (formats/om2/kernel_sets.py).
"""
from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field

from ..ir.program import ArgRef, Program
from ..ir.tasks import ArgKind
from . import memplan


@dataclass
class Pool:
    """The constants of the sets placed so far: bytes -> offset in the union blob, and its size."""
    at: dict[bytes, int] = field(default_factory=dict)
    size: int = 0

    def record(self, program: Program) -> None:
        for c in program.constants:
            self.at.setdefault(c.array.tobytes(), c.offset)
        self.size = max(self.size, program.constants_size)


def place(program: Program, pool: Pool) -> None:
    """Moves `program`'s constants onto the pool's (the first set keeps its layout), then
    records them in it."""
    if pool.at:
        _move(program, pool)
    pool.record(program)


def _move(program: Program, pool: Pool) -> None:
    end = memplan.align(pool.size, memplan.ALIGN)
    moved: dict[int, int] = {}   # old offset -> new (constants sharing bytes in one model share an offset)
    spans = []                   # (old start, old end, new start), by old start
    for c in sorted(program.constants, key=lambda c: (c.offset, c.name)):
        new = moved.get(c.offset)
        if new is None:
            new = pool.at.get(c.array.tobytes())
        if new is None:
            new, end = end, memplan.align(end + c.nbytes, memplan.ALIGN)
        moved[c.offset] = new
        spans.append((c.offset, c.offset + c.nbytes, new))
        c.offset = new
    starts = [s for s, _, _ in spans]

    def offset(old: int) -> int:
        """Where a byte of the old layout is now: an address into a constant moves with it."""
        i = bisect.bisect_right(starts, old) - 1
        start, stop, new = spans[i] if i >= 0 else (0, -1, 0)
        assert start <= old < max(stop, start + 1), f"a constant slot at offset {old} points into no constant"
        return new + old - start

    def ref(r: ArgRef | None) -> ArgRef | None:
        return dataclasses.replace(r, offset=offset(r.offset)) if r is not None and r.kind == ArgKind.CONSTANT else r

    for t in program.tasks + program.load_tasks:
        t.args = [ref(a) for a in t.args]
    for v in program.views:
        v.place = ref(v.place)
    by_name = {c.name: c.offset for c in program.constants}
    program.graph_json = _moved_json(program.graph_json, offset, by_name)
    program.constants_size = max((memplan.align(c.offset + c.nbytes, memplan.ALIGN) for c in program.constants),
                                 default=0)


def _moved_json(doc, offset, by_name: dict):
    """The graph dump with every place in the constants (ArgRef.to_json()) and every listed
    constant's offset where it is now."""
    if isinstance(doc, list):
        return [_moved_json(v, offset, by_name) for v in doc]
    if not isinstance(doc, dict):
        return doc
    out = {k: _moved_json(v, offset, by_name) for k, v in doc.items()}
    if out.get("kind") == ArgKind.CONSTANT.name and isinstance(out.get("offset"), int):
        out["offset"] = offset(out["offset"])
    elif isinstance(out.get("name"), str) and out["name"] in by_name and isinstance(out.get("offset"), int) \
            and "transforms" in out:   # an entry of graph_json["constants"]
        out["offset"] = by_name[out["name"]]
    return out
