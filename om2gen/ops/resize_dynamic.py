"""Resize of a dynamic model (templates/kernels/resize_dynamic.c.j2). The static kernel gathers
through tables of every output coordinate's source indices and weights, whose length is the
run's here; this kernel computes each coordinate's taps instead, with the static tables' own
arithmetic (ops/resize.py axis_taps), from sizes in its tiling data. A scale given as a constant
is compiled in (floor(in * scale) is the output dim); one that sizes computed from the input
shapes give is the run's out / in."""
from __future__ import annotations

import math

from ..codegen.literals import c_float
from ..ir import symbolic
from ..ir.program import KernelCall
from . import common

_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


def _antialias_taps(mode: str, scale: float) -> int:
    """The taps of an antialiased axis at a scale (ops/resize.py _linear_coeffs / _cubic_coeffs)."""
    scale = min(scale, 1.0)
    return 2 - 2 * int(math.floor((-1.0 if mode == "linear" else -2.0) / scale) + 1)


def lower(node, plan: dict, x, y) -> KernelCall:
    cfg = plan["cfg"]
    in_shape, out_shape = plan["in_shape"], plan["out_shape"]
    rank = len(in_shape)
    tiling: dict = {"rows": common.prod(out_shape[:-1])}

    def field(v, key):
        return common.tiling_field(tiling, v, key)
    axes = []
    for a in range(rank):
        n_in, n_out, s, roi = in_shape[a], out_shape[a], plan["scale"][a], plan["roi"][a]
        full_roi = cfg["coord"] != "tf_crop_and_resize" or (math.isclose(roi[0], 0.0) and math.isclose(roi[1], 1.0))
        identity = (s is None or math.isclose(s, 1.0)) and full_roi and symbolic.decided(lambda: n_out == n_in, False)
        taps = 1 if identity else _TAPS[cfg["mode"]]
        if cfg["antialias"] and not identity:
            if s is None:
                raise symbolic.Undecidable(f"the antialias footprint of axis {a}, resized from {n_in} to {n_out}: "
                                           "its taps depend on the scale, which only the run gives")
            taps = _antialias_taps(cfg["mode"], s)
        axes.append(dict(axis=a, identity=identity, taps=taps, n_in=field(n_in, f"in{a}"), n_out=field(n_out, f"out{a}"),
                         stride=field(common.prod(in_shape[a + 1:]), f"stride{a}"),
                         div=field(common.prod(out_shape[a + 1:-1]), f"div{a}") if a < rank - 1 else 1,
                         roi0=c_float(roi[0], double=True), roi1=c_float(roi[1], double=True)))
    for ax in axes:   # the scale: compiled in, or the run's out / in (as ops/resize.py plan computes it)
        s = plan["scale"][ax["axis"]]
        ax["scale"] = c_float(s, double=True) if s is not None else \
            f"({ax['n_in']} ? (double){ax['n_out']} / (double){ax['n_in']} : 1.0)"
    ext = cfg["extrapolation"]
    params = dict(
        summary=f"{node.op_type} ({cfg['mode']}, {cfg['coord']}): {x.describe()} -> {y.describe()} (dynamic: sizes "
                "from the tiling data)",
        notes=[f"scales={['run' if s is None else float(s) for s in plan['scale']]} taps per axis="
               f"{[ax['taps'] for ax in axes]}"],
        ctype=x.dtype.c_type, mode=cfg["mode"], coord=cfg["coord"], nearest=cfg["nearest"],
        antialias=cfg["antialias"], exclude_outside=cfg["exclude_outside"] and cfg["mode"] != "nearest",
        cubic_a=c_float(cfg["cubic_a"], double=True), max_taps=max(ax["taps"] for ax in axes),
        weighted=cfg["mode"] != "nearest", outer=axes[:-1], inner=axes[-1],
        fill=c_float(ext) if x.dtype.name == "float32" else f"({x.dtype.c_type})({c_float(ext)})",
        tiling_fields=list(tiling))
    work = out_shape[-1] * math.prod(ax["taps"] for ax in axes)
    block_dim = common.block_dim_for(tiling["rows"], work)
    inner = axes[-1]
    if inner["identity"]:
        return KernelCall("kernels/resize_dynamic.c.j2", node.op_type, params, [x.name], [y.name],
                          block_dim=block_dim, tiling=tiling)
    # each block's table of the last axis' taps: an int64 offset and a float weight (8 bytes kept) each
    ws_stride = 16 * out_shape[-1] * inner["taps"]
    params.update(ws_stride=field(ws_stride, "ws_stride"), tiling_fields=list(tiling))
    return KernelCall("kernels/resize_dynamic.c.j2", node.op_type, params, [x.name], [y.name],
                      block_dim=block_dim, tiling=tiling, workspace=block_dim * ws_stride)
