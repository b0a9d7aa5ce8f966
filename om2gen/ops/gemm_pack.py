"""The packed GEMM shared by Conv, MatMul and Gemm (runtime_abi/include/om2/om2_gemm.h): at the
blocking of its target (toolchain/blocking.py), compile-time packing of constant operands into
the panel layout the micro-kernel reads, and the split of one GEMM into SPMD tiles.

A panels: MR rows each, stored k-major ([K][MR]), rows past M zero. B panels: NR columns each,
stored k-major ([K][NR]), columns past N zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import symbolic
from ..toolchain.blocking import Blocking
from . import common

# Below this many multiply-adds per tile a launch is not split further.
MIN_MACS_PER_TILE = 1 << 21
MAX_TILES = 16          # small tiles balance busy cores, where the split repacks nothing
MIN_TILE = 128          # tile side when splitting it makes the other operand be packed again
ENOUGH_TILES = 4        # below this many tiles, the other side splits too (up to this many in all)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def pack_a(a: np.ndarray, mr: int) -> np.ndarray:
    """[..., M, K] -> [..., ceil(M/mr), K, mr] (zero rows past M)."""
    *batch, m, k = a.shape
    padded = np.zeros((*batch, _ceil(m, mr) * mr, k), np.float32)
    padded[..., :m, :] = a
    return np.ascontiguousarray(padded.reshape(*batch, -1, mr, k).swapaxes(-1, -2))


def pack_b(b: np.ndarray, nr: int) -> np.ndarray:
    """[..., K, N] -> [..., ceil(N/nr), K, nr] (zero columns past N)."""
    *batch, k, n = b.shape
    padded = np.zeros((*batch, k, _ceil(n, nr) * nr), np.float32)
    padded[..., :n] = b
    return np.ascontiguousarray(padded.reshape(*batch, k, -1, nr).swapaxes(-2, -3))


@dataclass(frozen=True)
class Tiles:
    tile_m: int
    tile_n: int
    tiles_m: int
    tiles_n: int


def split(m: int, n: int, k: int, bl: Blocking, items: int = 1, *, a_packed_at_run_time: bool,
          b_packed_at_run_time: bool) -> Tiles:
    """Tiles of an M x N output (sides multiples of MR and NR) so that `items` independent GEMMs of
    this size give the cores enough blocks. Every column tile packs its own copy of a run-time A
    and every row tile its own copy of a run-time B, so a side whose split repacks the other
    operand keeps tiles of at least MIN_TILE (the repacking is then a small share of the tile's
    work); the side with the smaller minimum splits first, the other only when the first gives
    fewer than ENOUGH_TILES."""
    macs = m * n * max(k, 1)
    # tiles in all a multiple of ENOUGH_TILES: blocks of equal work then divide evenly over 2 or 4 cores;
    # below that 2, never 3 (two cores would run 2 + 1), and 2 already for half a tile's minimum work
    # each (on one core a second block costs a microsecond; on two it halves a 20-70 us task)
    total = min(MAX_TILES, (macs * items) // MIN_MACS_PER_TILE)
    if total >= ENOUGH_TILES:
        total = total // ENOUGH_TILES * ENOUGH_TILES
    elif total >= 2 or macs * items >= MIN_MACS_PER_TILE:
        total = 2
    want = max(1, total // items)
    min_m = MIN_TILE if b_packed_at_run_time else 2 * bl.mr
    min_n = MIN_TILE if a_packed_at_run_time else 3 * bl.nr
    if min_n <= min_m:
        tiles_n = max(1, min(want, _ceil(n, min_n)))
        tiles_m = 1 if tiles_n >= ENOUGH_TILES else max(1, min(_ceil(ENOUGH_TILES, tiles_n), _ceil(m, min_m)))
    else:
        tiles_m = max(1, min(want, _ceil(m, min_m)))
        tiles_n = 1 if tiles_m >= ENOUGH_TILES else max(1, min(_ceil(ENOUGH_TILES, tiles_m), _ceil(n, min_n)))
    tile_n = _ceil(_ceil(n, tiles_n), bl.nr) * bl.nr
    tile_m = _ceil(_ceil(m, tiles_m), bl.mr) * bl.mr
    return Tiles(tile_m, tile_n, _ceil(m, tile_m), _ceil(n, tile_n))


# A product of at most this many rows with a packed constant B runs om2/om2_gemv.h (OM2_GEMV_MAX_ROWS):
# it streams each B panel once over the whole K and reads A in place.
GEMV_MAX_ROWS = 4
# Packed B bytes a column tile of such a product streams at least (about a microsecond from L3).
GEMV_MIN_TILE_BYTES = 1 << 16


def split_gemv(m: int, n: int, k: int, bl: Blocking, items: int = 1) -> Tiles:
    """Column tiles of a product of few rows over a packed constant B (om2/om2_gemv.h). Nothing is
    packed at run time, so tiles only need to stream enough of B to pay for their launch: up to
    MAX_TILES of at least GEMV_MIN_TILE_BYTES over all `items`, in all a multiple of ENOUGH_TILES
    (so that 2 or 4 cores get equal shares); rows are never split (each tile reads all of A)."""
    panels = _ceil(n, bl.nr)
    stream = items * panels * max(k, 1) * bl.nr * 4
    total = min(MAX_TILES, stream // GEMV_MIN_TILE_BYTES)
    total = total // ENOUGH_TILES * ENOUGH_TILES if total >= ENOUGH_TILES else total
    per_tile = _ceil(panels, max(1, min(panels, total // items)))
    return Tiles(m, per_tile * bl.nr, 1, _ceil(panels, per_tile))


def transposed_pays(rows: int, cols: int, bl: Blocking) -> bool:
    """Whether C^T = B^T A^T wastes less of the register tile than C = A B when C has `rows` x `cols`:
    columns are padded to whole NR-wide vectors, while a short last row panel runs a short kernel."""
    waste = _ceil(cols, bl.nr) * bl.nr / cols
    waste_t = _ceil(rows, bl.nr) * bl.nr / rows
    return waste > 1.1 and waste_t < waste


def workspace_floats(t: Tiles, bl: Blocking, pack_a_at_run_time: bool, transposed: bool = False) -> int:
    """One block's buffers, as om2_gemm_rect lays them out: B's packing buffer (unless B is a packed
    constant, it is KC x min(tile_n, NC) columns), then A's when A is packed at run time, then the
    transposed product's accumulator (the tile in whole register tiles)."""
    b = bl.kc * _ceil(min(t.tile_n, bl.nc), bl.nr) * bl.nr
    a = bl.kc * _ceil(min(t.tile_m, bl.mc), bl.mr) * bl.mr if pack_a_at_run_time else 0
    acc = _ceil(t.tile_m, bl.mr) * bl.mr * _ceil(t.tile_n, bl.nr) * bl.nr if transposed else 0
    return a + b + acc


def block_dim(items: int) -> int:
    """Blocks of a launch of `items` tiles: one tile each (blocks are claimed dynamically, so the
    cores balance themselves), at most common.MAX_BLOCKS."""
    if isinstance(items, symbolic.Expr):
        return symbolic.smax(1, symbolic.smin(items, common.MAX_BLOCKS))
    return max(1, min(items, common.MAX_BLOCKS))


def split_dynamic(m, n, k, bl: Blocking, items=1, *, a_packed_at_run_time: bool, b_packed_at_run_time: bool) -> Tiles:
    """split() for a dynamic model's GEMM: the tile sizes are split()'s at the largest sizes the
    ranges give (a tile shape that suits the biggest run), the tile counts the run's:
    ceil(M / tile_m) and ceil(N / tile_n)."""
    def most(d):
        hi = symbolic.planned_bound(d)    # (an .om's unbounded dim: at its planning size)
        if hi is None:
            raise symbolic.Undecidable(f"the largest value of {symbolic.text(d)}")
        return hi
    t = split(most(m), most(n), most(k), bl, most(items), a_packed_at_run_time=a_packed_at_run_time,
              b_packed_at_run_time=b_packed_at_run_time)
    tile_m, tiles_m = _dynamic_side(m, t.tile_m, t.tiles_m, bl.mr)
    tile_n, tiles_n = _dynamic_side(n, t.tile_n, t.tiles_n, bl.nr)
    return Tiles(tile_m, tile_n, tiles_m, tiles_n)


def _dynamic_side(extent, tile: int, tiles: int, unit: int):
    """(tile, tiles) of one side of a dynamic GEMM: a static side keeps split()'s tile; a dynamic
    one keeps the tile count split() gives its largest size (while whole units last), its tiles
    shrinking with the run's size, so a small run still spreads over the blocks the largest one
    would. Never larger than the largest size's tile: that workspace bounds every run's."""
    if not isinstance(extent, symbolic.Expr) or symbolic.unbounded(extent):
        # (an unbounded side, in an .om: the planned tile, as many as the run needs)
        return tile, symbolic.ceildiv(extent, tile)
    count = symbolic.smin(tiles, symbolic.ceildiv(extent, unit))
    # (at least one unit: what the arithmetic gives, and what the bounds then see)
    size = symbolic.smax(unit, symbolic.ceildiv(symbolic.ceildiv(extent, count), unit) * unit)
    return size, symbolic.ceildiv(extent, size)


def largest(t: Tiles) -> Tiles:
    """The tiles at the largest sizes their ranges give: what sizes a dynamic GEMM's workspace."""
    return Tiles(*(v if isinstance(v, int) else symbolic.upper_bound(v) for v in (t.tile_m, t.tile_n, t.tiles_m,
                                                                                   t.tiles_n)))
