"""Static memory plan: every intermediate tensor gets an offset in one workspace.

Greedy best-fit over task order: a buffer is free again once the last task reading it has
run, so later tensors reuse the memory of dead ones. Offsets are aligned for vector loads.
"""
from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


def align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


@dataclass
class Buffer:
    key: str
    size: int
    first: int    # index of the task that writes it
    last: int     # index of the last task that reads it (>= first)


def plan(buffers: list[Buffer]) -> tuple[dict[str, int], int]:
    """Returns (offset per buffer key, total workspace size)."""
    offsets: dict[str, int] = {}
    free: list[tuple[int, int]] = []        # (offset, size), kept sorted by offset
    live: list[Buffer] = []
    end = 0
    for buf in sorted(buffers, key=lambda b: (b.first, -b.size, b.key)):
        # release what died before this buffer's writer runs
        for dead in [b for b in live if b.last < buf.first]:
            live.remove(dead)
            free = _release(free, offsets[dead.key], align(dead.size))
        size = align(max(buf.size, 1))
        fit = [(o, s) for o, s in free if s >= size]
        if fit:
            o, s = min(fit, key=lambda f: (f[1], f[0]))
            free.remove((o, s))
            if s > size:
                free.append((o + size, s - size))
                free.sort()
            offsets[buf.key] = o
        elif free and free[-1][0] + free[-1][1] == end:
            # grow the last free block at the end of the arena instead of leaving it unused
            o, s = free.pop()
            offsets[buf.key] = o
            end = o + size
        else:
            offsets[buf.key] = end
            end += size
        live.append(buf)
    return offsets, end


def _release(free: list[tuple[int, int]], offset: int, size: int) -> list[tuple[int, int]]:
    merged = sorted(free + [(offset, size)])
    out: list[tuple[int, int]] = []
    for o, s in merged:
        if out and out[-1][0] + out[-1][1] == o:
            out[-1] = (out[-1][0], out[-1][1] + s)
        else:
            out.append((o, s))
    return out
