"""Winograd F(m x m, 3 x 3) for 3x3 stride-1 convolutions (runtime_abi/include/om2/om2_winograd.h).

The transforms come from Toom-Cook interpolation points, exactly (rational arithmetic): G
transforms the weights here at compile time, and B^T (input) and A^T (output) become straight-
line vector code in the kernel source. F(2,3) uses the points 0, 1, -1; F(4,3) uses 0, -1, 1,
1/2, -2, which keep its float32 error 2-4x below the textbook 0, +-1, +-2 (Barabasz et al., "Error
analysis and improving the accuracy of Winograd convolution", 2020): about 5e-6 of the output's
magnitude at 512 input channels, against 1e-4 allowed.

A plan fixes m per shape with a cost model of the kernel's work (products, transforms and the
transformed weights' memory traffic) against the im2col GEMM's, and splits the work into SPMD
blocks: tile blocks sized so their transformed input stays in L2, times ranges of output channels
when an image has too few tiles to keep the cores busy (each range transforms the input again).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..codegen.literals import c_float
from ..ir import symbolic
from ..toolchain.blocking import Blocking
from . import gemm_pack

POINTS = {2: (0, 1, -1), 4: (0, -1, 1, Fraction(1, 2), -2)}
R = 3                               # kernel taps per dim

# F(4,3) sums a longer chain of larger transform coefficients: above this many input channels
# its error would come within 10x of the 1e-4 tolerance, so F(2,3) (or im2col) is used instead.
MAX_CHANNELS_F4 = 1024
V_L2_SHARE = 3 / 8                  # of the L2: a tile block's transformed input (96 Ki floats on Zen 4's 1 MiB)
MIN_ITEMS = 4                       # blocks a launch should offer the cores, if the shape allows
MIN_K_RANGE = 64                    # output channels per block below which ranges stop splitting
BALANCE_PANELS = 16                 # an image with up to this many panels of tiles gets a block per panel
# cost model, in vector-FMA-instruction units; calibrated on Zen 4 (benchmarks/bench_kernels.py)
GEMM_EFFICIENCY = 0.80              # the im2col GEMM, packing included
WINO_EFFICIENCY = 0.90              # the Winograd products (no packing: V is built in place)
INPUT_OPS = {2: 9.0, 4: 26.0}       # vector ops per (input channel, vector of tiles)
OUTPUT_OPS = {2: 6.0, 4: 12.0}      # vector ops per (output channel, vector of tiles)
U_BYTES_PER_CYCLE = 6.0             # transformed weights streamed per tile block from L3/DRAM
# Where the transformed weights U come from (weights_at_load): stored in the archive, or made at load
# by a load task from the raw filters g. Load-time costs, measured on Zen 4 (2 vCPUs) with
# `python benchmarks/winograd_weights.py --calibrate` (docs/performance.md, "Winograd weights at
# load"): a stored MB costs a fresh process's first load and run 0.48-1.3 ms when the archive is not
# in the page cache (read, checked, mapped, first touched: the first load after a download or a
# reboot, which this weighs), 0.18-0.24 ms when it is; the load task 0.18 ms per MB of U it writes.
MAP_MS_PER_MB = 0.5                 # a stored constant, cold (the measured range's low end)
TRANSFORM_MS_PER_MB = 0.18          # the load task, per MB of U (its first touch of the buffer included)
LOAD_TASK_MS = 0.025                # a load task's launch and wait, whatever its size


def _frac(v) -> Fraction:
    return v if isinstance(v, Fraction) else Fraction(v)


def _solve_column(a: list[list[Fraction]], rhs: list[Fraction], n: int) -> list[Fraction]:
    """The exact solution of an overdetermined but consistent system a x = rhs (n unknowns)."""
    rows = [list(r) + [b] for r, b in zip(a, rhs)]
    pivots = []
    r = 0
    for col in range(n):
        piv = next((i for i in range(r, len(rows)) if rows[i][col] != 0), None)
        if piv is None:
            continue
        rows[r], rows[piv] = rows[piv], rows[r]
        inv = 1 / rows[r][col]
        rows[r] = [v * inv for v in rows[r]]
        for i in range(len(rows)):
            if i != r and rows[i][col] != 0:
                f = rows[i][col]
                rows[i] = [v - f * w for v, w in zip(rows[i], rows[r])]
        pivots.append(col)
        r += 1
    assert pivots == list(range(n)), "Winograd points give a singular system"
    assert all(all(v == 0 for v in row) for row in rows[r:]), "Winograd system is inconsistent"
    return [rows[i][n] for i in range(n)]


@functools.lru_cache(maxsize=None)
def matrices(m: int) -> tuple[tuple, tuple, tuple]:
    """(B^T [a][a], G [a][3], A^T [m][a]) of F(m, 3), as exact fractions (a = m + 2); solved once
    per m and process."""
    pts = [_frac(p) for p in POINTS[m]]
    n = m + R - 1
    at = [[pts[j] ** i for j in range(n - 1)] + [Fraction(int(i == m - 1))] for i in range(m)]
    g = []
    for pj in pts:
        f = Fraction(1)
        for pl in pts:
            if pl != pj:
                f *= pj - pl
        g.append([pj ** k / f for k in range(R)])
    g.append([Fraction(int(k == R - 1)) for k in range(R)])
    # B^T from y_i = sum_k g_k d_{i+k}: sum_j AT[i][j] G[j][k] BT[j][l] = [l == i + k], column by column
    coef = [[at[i][j] * g[j][k] for j in range(n)] for i in range(m) for k in range(R)]
    cols = [_solve_column(coef, [Fraction(int(l == i + k)) for i in range(m) for k in range(R)], n)
            for l in range(n)]
    bt = [[cols[l][j] for l in range(n)] for j in range(n)]
    return tuple(map(tuple, bt)), tuple(map(tuple, g)), tuple(map(tuple, at))


TRANSFORM_CHUNK = 4096              # filters per step of transform_weights (its float64 temporaries stay in L2)


def g_terms(m: int) -> list[list[tuple[int, np.float32]]]:
    """Per row of G (F(m, 3)), its nonzero entries as (column, the float nearest it), in column
    order: the terms both transforms of the weights sum, left to right (a zero entry is no term:
    0 * g would turn an infinite weight into NaN, and both sides skip the same ones)."""
    _, g, _ = matrices(m)
    return [[(j, np.float32(float(v))) for j, v in enumerate(row) if v != 0] for row in g]


def transform_weights(w: np.ndarray, m: int) -> np.ndarray:
    """[K, C, 3, 3] -> U [a*a, K, C] = G g G^T per (k, c), position xi = xh * a + xw. In float32, in
    a fixed order that the load task's kernel (templates/kernels/winograd_weights.c.j2) repeats
    operation for operation: t[xh, kw] = sum over G[xh]'s terms (kh, G[xh,kh]) of G[xh,kh] g[kh,kw],
    then U[xh, xw] = sum over G[xw]'s terms (kw, G[xw,kw]) of t[xh,kw] G[xw,kw], each sum left to
    right (g_terms): the weights transformed at load are these bytes exactly. (Element-wise numpy:
    no BLAS, whose summation order is its own. Float, as the kernel's 16 lanes a vector: the
    transform's rounding, a few float ulps of each weight, is 10x below F(4x4, 3x3)'s own error.)"""
    terms = g_terms(m)
    a = m + 2
    k, c = w.shape[:2]
    flat = np.asarray(w, np.float32).reshape(k * c, 3, 3)
    out = np.empty((a * a, k * c), np.float32)

    def dot(row, pick):
        (j, v), *rest = row
        acc = pick(j) * v
        for j, v in rest:
            acc = acc + pick(j) * v
        return acc
    for lo in range(0, k * c, TRANSFORM_CHUNK):
        x = flat[lo:lo + TRANSFORM_CHUNK]                                         # [n, kh, kw]
        t = np.stack([dot(row, lambda kh: x[:, kh, :]) for row in terms], axis=1)  # [n, xh, kw]
        u = np.stack([dot(row, lambda kw: t[:, :, kw]) for row in terms], axis=2)  # [n, xh, xw]
        out[:, lo:lo + len(x)] = u.reshape(len(x), a * a).T
    return out.reshape(a * a, k, c)


def transform_weights_code(m: int) -> dict:
    """The load task's two stages as C expressions over float x[9][MR], g[a][3][MR] (lane r, column
    kw): what transform_weights computes, term for term (g_terms; literals exact, in hex)."""
    terms = g_terms(m)

    def dot(row, operand):
        return " + ".join(f"{operand(j)} * {float(v).hex()}f" for j, v in row)
    return {"rows": [dot(row, lambda kh: f"x[{3 * kh} + kw][r]") for row in terms],
            "cols": [dot(row, lambda kw: f"g[xh][{kw}][r]") for row in terms]}


def _linear(coefs: list[Fraction], var: str) -> str:
    """C expression of sum_l coefs[l] * var[l] over om2_vf values (ones added, FMAs for the rest)."""
    terms = [(c, l) for l, c in enumerate(coefs) if c != 0]
    if not terms:
        return "om2_v_zero()"
    terms.sort(key=lambda t: (t[0] != 1, t[0] != -1))
    c, l = terms[0]
    expr = f"{var}[{l}]" if c == 1 else f"om2_v_mul(om2_v_set1({c_float(float(c))}), {var}[{l}])"
    for c, l in terms[1:]:
        if c == 1:
            expr = f"om2_v_add({expr}, {var}[{l}])"
        elif c == -1:
            expr = f"om2_v_sub({expr}, {var}[{l}])"
        else:
            expr = f"om2_v_fma(om2_v_set1({c_float(float(c))}), {var}[{l}], {expr})"
    return expr


def transform_code(m: int) -> dict:
    """The 1-D transforms as C expressions: bt[j] = (B^T d)[j] over d[], at[i] = (A^T s)[i] over s[]."""
    bt, _, at = matrices(m)
    return {"bt": [_linear(row, "d") for row in bt], "at": [_linear(row, "s") for row in at]}


@dataclass(frozen=True)
class Plan:
    m: int
    TH: int
    TW: int
    tile_block: int     # tiles per block (a multiple of NR)
    tile_blocks: int    # per image
    k_range: int        # output channels per block (a multiple of MR)
    k_ranges: int
    layout: dict        # one block's workspace: offsets and ws_floats (layout())

    @property
    def ws_floats(self) -> int:
        return self.layout["ws_floats"]

    @property
    def tiles(self) -> int:
        return self.TH * self.TW


def applicable(g: dict, packed_w: bool) -> bool:
    """2-D 3x3 convolution, stride 1, no dilation, one group, constant weights."""
    return packed_w and g["G"] == 1 and (g["D"], g["KD"], g["KH"], g["KW"]) == (1, 1, 3, 3) and \
        (g["SH"], g["SW"], g["DH"], g["DW"]) == (1, 1, 1, 1)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _align(n: int, to: int = 16) -> int:
    return _ceil(n, to) * to


def layout(g: dict, m: int, tw: int, tile_block: int, bl: Blocking, narrowest: int | None = None
           ) -> dict[str, int]:
    """One block's workspace (Om2WinoLayout in om2/om2_winograd.h), float offsets 64-byte aligned,
    and its size (ws_floats). narrowest: a dynamic model's fewest tiles per row (its row ends are
    then the most), tw and g its widest image's."""
    a, vl = m + 2, bl.vl
    tbp = _ceil(tile_block, bl.nr) * bl.nr
    rs = _align((tbp + tw) * m + a + vl, vl)           # the tile rows back to back, and what vectors overrun
    ers = _align((tile_block - 1) // (narrowest or tw) + 2 + vl, vl)  # every tile row's ends, one vector's overrun
    regions = [("v", a * a * g["C"] * tbp), ("mb", a * a * bl.mr * bl.nr), ("zero", g["W"]), ("rowbuf", m * m * vl),
               ("rv", 2 * a * rs), ("ext", 2 * a * 2 * ers), ("tab", _ceil(tbp, vl) * (vl + 2))]
    out, at = {"tbp": tbp, "rs": rs, "ers": ers}, 0
    for name, size in regions:
        if name != "v":
            out[name] = at
        at = _align(at + size)
    out["ws_floats"] = at
    return out


def plan(g: dict, m: int, bl: Blocking) -> Plan:
    a = m + 2
    th, tw = _ceil(g["OH"], m), _ceil(g["OW"], m)
    tiles = th * tw
    panels = _ceil(tiles, bl.nr)
    fit = max(1, int(bl.l2_bytes * V_L2_SHARE) // 4 // (a * a * g["C"] * bl.nr))
    # enough tile blocks for the cores where the image has the panels (they transform no input twice);
    # up to BALANCE_PANELS panels, one each: blocks of whole panels then divide evenly over the cores
    blocks = max(_ceil(panels, fit), min(panels, max(BALANCE_PANELS, _ceil(MIN_ITEMS, g["N"]))))
    tile_block = _ceil(_ceil(tiles, blocks), bl.nr) * bl.nr
    blocks = _ceil(tiles, tile_block)
    items = g["N"] * blocks
    k_ranges = max(1, min(_ceil(MIN_ITEMS, items), g["M"] // MIN_K_RANGE))
    k_range = _ceil(_ceil(g["M"], k_ranges), bl.mr) * bl.mr
    k_ranges = _ceil(g["M"], k_range)
    return Plan(m, th, tw, tile_block, blocks, k_range, k_ranges, layout(g, m, tw, tile_block, bl))


def over_range(g: dict, most: dict, p: Plan, bl: Blocking) -> Plan:
    """A dynamic model's plan (its image size dynamic), from `p`, the plan of its largest sizes
    (`most`): that tile block and output-channel split, the tile counts the run's, and a
    workspace that holds every size in range (rows as long as the widest image's, row ends as
    many as a one-tile-wide image has)."""
    th, tw = symbolic.ceildiv(g["OH"], p.m), symbolic.ceildiv(g["OW"], p.m)
    return Plan(p.m, th, tw, p.tile_block, symbolic.ceildiv(th * tw, p.tile_block), p.k_range, p.k_ranges,
                layout(most, p.m, p.TW, p.tile_block, bl, narrowest=1))


def cost(g: dict, p: Plan, bl: Blocking) -> float:
    """Modelled cycles (vector FMA instructions) of one image's Winograd convolution."""
    a, vl = p.m + 2, bl.vl
    lanes = p.tile_blocks * p.tile_block
    products = a * a * _ceil(g["M"], bl.mr) * bl.mr * lanes * g["C"] / vl / WINO_EFFICIENCY
    transforms = (p.k_ranges * g["C"] * INPUT_OPS[p.m] + g["M"] * OUTPUT_OPS[p.m]) * lanes / vl
    u_bytes = a * a * g["M"] * g["C"] * 4
    streamed = 0.0 if u_bytes <= bl.l2_bytes // 2 else u_bytes * p.tile_blocks / U_BYTES_PER_CYCLE
    return max(products, streamed) + transforms


def gemm_cost(g: dict, bl: Blocking) -> float:
    """Modelled cycles of the im2col GEMM for one image."""
    p = g["OH"] * g["OW"]
    return _ceil(g["M"], bl.mr) * bl.mr * _ceil(p, bl.nr) * bl.nr * g["C"] * 9 / bl.vl / GEMM_EFFICIENCY


def choose(g: dict, bl: Blocking, forced: int | None = None) -> Plan | None:
    """The cheapest of F(2,3), F(4,3) (where its accuracy holds) and None (the im2col GEMM).
    forced: 2 or 4 takes that tile size, 0 the GEMM (tests and benchmarks)."""
    if forced is not None:
        return plan(g, forced, bl) if forced else None
    best, best_cost = None, gemm_cost(g, bl)
    for m in (2, 4):
        if m == 4 and g["C"] > MAX_CHANNELS_F4:
            continue
        p = plan(g, m, bl)
        c = cost(g, p, bl)
        if c < best_cost:
            best, best_cost = p, c
    return best


def weights_bytes(k: int, c: int, m: int, bl: Blocking) -> tuple[int, int]:
    """(bytes of the raw filters g [K, C, 3, 3], bytes of the packed U [ceil(K/MR), a*a, C, MR])."""
    return k * c * 9 * 4, _ceil(k, bl.mr) * bl.mr * (m + 2) ** 2 * c * 4


def weights_at_load(k: int, c: int, m: int, bl: Blocking, setting: str = "auto") -> bool:
    """Whether a layer's U is made at load (a load task from g) rather than stored: forced by the
    compile option (winograd_weights "load" / "stored"), else by cost. Storing U costs its mapping
    and first touch; making it costs g's and the transform, which is cheaper per MB than the
    mapping: so U is made at load unless it is not much bigger than g (F(2x2, 3x3)'s 16/9 of a
    small layer: little to save) or the layer is so small that the load task's fixed cost
    outweighs what it saves."""
    if setting != "auto":
        return setting == "load"
    g_bytes, u_bytes = weights_bytes(k, c, m, bl)
    mb = 1 / (1 << 20)
    stored = MAP_MS_PER_MB * u_bytes * mb
    made = MAP_MS_PER_MB * g_bytes * mb + TRANSFORM_MS_PER_MB * u_bytes * mb + LOAD_TASK_MS
    return made <= stored


TRANSFORM_C_CHUNK = 64              # input channels per work item of the load task


def transform_tiling(k: int, c: int, bl: Blocking) -> dict[str, int]:
    """The load task's TilingData (templates/kernels/winograd_weights.c.j2): a work item per panel
    of MR output channels and range of input channels."""
    chunk = min(c, TRANSFORM_C_CHUNK)
    return {"K": k, "C": c, "panels": _ceil(k, bl.mr), "c_chunk": chunk, "c_chunks": _ceil(c, chunk)}


def pack_weights(w: np.ndarray, m: int, bl: Blocking) -> np.ndarray:
    """[K, C, 3, 3] -> [ceil(K/MR), a*a, C, MR]: each position's U as the GEMM's A panels, the a*a
    positions of a panel of output channels next to each other (one stream per panel)."""
    return np.ascontiguousarray(gemm_pack.pack_a(transform_weights(w, m), bl.mr).swapaxes(0, 1))
