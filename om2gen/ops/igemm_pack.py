"""The 8-bit integer GEMM shared by the integer and quantized MatMul, Gemm and Conv ops
(runtime_abi/include/om2/om2_igemm.h): its register tile per target, the compile-time packing of
a constant B into the panels the micro-kernel reads, the tile split, and the operand shifts.

B panels: NR = 16 columns each, k in groups of 4, [K4][16][4] int8 of B' (B ^ 0x80 for uint8 B,
so B' = B - 128; int8 B as it is), k and columns past K and N zero, with colsum(B') per padded
column as int32. The layout is the same for every target (vpdpbusd reads it as it is; AVX2 and
the portable path widen it), so only the rows of the register tile depend on the target.
"""
from __future__ import annotations

import numpy as np

from . import common, gemm_pack

NR = 16
# Rows of the register tile: AVX-512 holds 8 x 32 int32 sums in 16 zmm (vpdpbusd, or vpmaddwd
# halves of 8 x 16); AVX2 3 x 16 in 12 ymm (two int32 halves per column); the portable path 4 x 16.
MR = {"x86_64-avx512": 8, "x86_64-avx2": 3, "x86_64": 4, "aarch64": 4}
# Below this much work a tile is not split further (int8 runs about 4x the float rate): a tile's
# work counted as its multiply-adds with K at least MIN_K_WORK (a small K's cost is in packing A
# and storing the output, per element of either). A B read from an input is packed again by each
# tile, so its tiles are split four times less finely.
MIN_MACS_PER_TILE = 1 << 21
MIN_K_WORK = 64
MAX_TILES = 16
MIN_TILE_ROWS = 32
# a column tile packs all of its rows of A again: at least this many columns share each packing
MIN_TILE_COLS = 128

FLIP = 0x80


def mr(target) -> int:
    return MR[target.name]


def signed(dtype) -> bool:
    return dtype.name == "int8"


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def pack_b(b: np.ndarray, b_signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """[..., K, N] bytes -> (panels [..., ceil(N/16), ceil(K/4), 16, 4] int8, colsum(B') [...,
    ceil(N/16) * 16] int32)."""
    *batch, k, n = b.shape
    shifted = b.astype(np.int16) - (0 if b_signed else 128)
    padded = np.zeros((*batch, _ceil(k, 4) * 4, _ceil(n, NR) * NR), np.int8)
    padded[..., :k, :n] = shifted
    colsum = padded.astype(np.int32).sum(axis=-2).astype(np.int32)
    k4, n16 = padded.shape[-2] // 4, padded.shape[-1] // NR
    panels = padded.reshape(*batch, k4, 4, n16, NR).transpose(*range(len(batch)), -2, -4, -1, -3)
    return np.ascontiguousarray(panels), np.ascontiguousarray(colsum)


def workspace_bytes(k: int, tile_n: int, b_packed: bool, target) -> int:
    """One block's workspace, as om2_igemm_ws_bytes lays it out."""
    k4, rows = _ceil(k, 4), mr(target)
    size = k4 * 4 * rows + 4 * rows + 64
    if not b_packed:
        size += _ceil(tile_n, NR) * (k4 * 64 + 4 * NR) + 64
    return size + 128


def split(m: int, n: int, k: int, target, items: int = 1, b_packed: bool = True) -> gemm_pack.Tiles:
    """Tiles of an M x N output for `items` such products: rows first (each row tile streams all of
    B once per panel of A: no repacking), columns only where the rows are too few, each column
    tile at least MIN_TILE_COLS wide (it packs A anew); a tile is a multiple of MR rows and of 32
    columns (two panels per micro-kernel call)."""
    rows = mr(target)
    per_tile = MIN_MACS_PER_TILE if b_packed else 4 * MIN_MACS_PER_TILE
    total = max(1, min(MAX_TILES, (m * n * max(k, MIN_K_WORK) * items) // per_tile))
    if total > 2:
        total = total // 2 * 2
    want = max(1, total // items)
    tiles_m = max(1, min(want, _ceil(m, max(MIN_TILE_ROWS, rows))))
    tiles_n = max(1, min(_ceil(want, tiles_m), _ceil(n, MIN_TILE_COLS)))
    tile_m = _ceil(_ceil(m, tiles_m), rows) * rows
    tile_n = _ceil(_ceil(n, tiles_n), 32) * 32
    return gemm_pack.Tiles(tile_m, tile_n, _ceil(m, tile_m), _ceil(n, tile_n))


def block_dim(items: int) -> int:
    return max(1, min(items, common.MAX_BLOCKS))
