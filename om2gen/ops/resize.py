"""Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 7, 9).

Resizing is separable: output element (o_0, ..., o_r-1) is the sum over taps t_a of every axis
a of prod_a w_a[o_a, t_a] * X[src_0[o_0, t_0], ..., src_r-1[o_r-1, t_r-1]]. All of it that
depends on shapes and attributes only -- the source index and weight of every tap of every
output coordinate, per axis -- is computed here in Python (mirroring the ONNX reference
implementation: coordinate transformation, nearest rounding, linear/cubic coefficients,
antialias, exclude_outside) and passed to the kernel as constant tables; the kernel gathers and
blends. Scales, sizes and roi must therefore be compile-time constants. A dynamic model's Resize,
whose tables would be the run's length, computes them in its kernel (ops/resize_dynamic.py).
"""
from __future__ import annotations

import math

import numpy as np

from ..advice import value_option
from ..codegen.literals import c_float
from ..errors import NeedsConstantError, ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.program import Derived, KernelCall
from . import common, resize_dynamic
from .registry import REQUIRED, Op, register

_COORD_MODES = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_crop_and_resize", "tf_half_pixel_for_nn"}
_NEAREST_MODES = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}


def _scaled(scale: float, n: symbolic.Expr):
    """floor(scale * n) of a dynamic dim, exactly: the float scale is the fraction p / 2^k."""
    p, q = float(scale).as_integer_ratio()
    return symbolic.floordiv(p * n, q)


def _sizes(node, v):
    """The optional sizes input: a constant (float64, as scales), or in a dynamic model sizes
    computed from the input shapes (ints and Exprs); absent or empty is None."""
    if v is not None and not v.is_const and v.dims is not None:
        return common.const_ints(node, v, "sizes") or None
    return _const_floats(node, v, "sizes")


def _const_floats(node, v, what: str) -> np.ndarray | None:
    """An optional constant input as float64; absent or empty (the spec's 'not given') is None."""
    if v is None:
        return None
    if not v.is_const:
        raise NeedsConstantError(f"node {node.name!r} ({node.op_type}): {what} ({v.name!r}) must be known at "
                                 f"compile time; om2gen precomputes the resize tables (if {v.name!r} is a model "
                                 f"input, freeze it with {value_option(v.name)})", v.name)
    arr = np.asarray(v.const, dtype=np.float64).reshape(-1)
    return arr if arr.size else None


# --- per-axis coefficients, as the ONNX reference defines them --------------------------------

def _nearest_coeffs(ratio: float, mode: str, scale: float) -> list[float]:
    if float(ratio).is_integer():
        return [0.0, 1.0]
    if mode == "round_prefer_floor":
        return [float(ratio <= 0.5), float(ratio > 0.5)]
    if mode == "round_prefer_ceil":
        return [float(ratio < 0.5), float(ratio >= 0.5)]
    return [1.0, 0.0] if mode == "floor" else [0.0, 1.0]


def _linear_coeffs(ratio: float, scale: float, antialias: bool) -> list[float]:
    if not antialias:
        return [1.0 - ratio, ratio]
    scale = min(scale, 1.0)
    start = int(math.floor(-1.0 / scale) + 1)
    footprint = 2 - 2 * start
    args = (np.arange(start, start + footprint) - ratio) * scale
    coeffs = np.clip(1.0 - np.abs(args), 0.0, 1.0)
    return list(coeffs / coeffs.sum())


def _cubic_coeffs(ratio: float, scale: float, a: float, antialias: bool) -> list[float]:
    if not antialias:
        r, s = ratio, 1.0 - ratio
        return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                ((a + 2) * r - (a + 3)) * r * r + 1,
                ((a + 2) * s - (a + 3)) * s * s + 1,
                ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a]
    scale = min(scale, 1.0)

    def coeff(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
        if x < 2:
            return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
        return 0.0

    i_start = int(math.floor(-2.0 / scale) + 1)
    coeffs = [coeff(scale * (i - ratio)) for i in range(i_start, 2 - i_start)]
    total = sum(coeffs)
    return [c / total for c in coeffs]


def _source_coords(mode: str, out_int: int, in_w: int, scale: float, roi) -> np.ndarray:
    """Source coordinate of every output coordinate, in float32 as ONNX Runtime computes it (the
    rounding of nearest modes depends on it). The resized length in align_corners and
    tf_crop_and_resize is the real one, scale * in_w, as the ONNX reference has it."""
    f = np.float32
    y = np.arange(out_int, dtype=f)
    s = f(scale)
    out_w = scale * in_w
    if mode == "align_corners":
        return np.zeros(out_int, f) if out_w == 1 else y * f(in_w - 1) / f(out_w - 1)
    if mode == "asymmetric":
        return y / s
    if mode == "tf_crop_and_resize":
        start, end = (float(v) for v in roi)
        if out_w == 1:
            return np.full(out_int, 0.5 * (start + end) * (in_w - 1), f)
        return (start * (in_w - 1) + y.astype(np.float64) * (end - start) * (in_w - 1) / (out_w - 1)).astype(f)
    if mode == "pytorch_half_pixel":
        return (y + f(0.5)) / s - f(0.5) if out_int > 1 else np.zeros(out_int, f)
    if mode == "half_pixel":
        return (y + f(0.5)) / s - f(0.5)
    if mode == "half_pixel_symmetric":
        offset = f(in_w / 2) * (f(1) - f(out_int) / (s * f(in_w)))
        return offset + (y + f(0.5)) / s - f(0.5)
    if mode == "tf_half_pixel_for_nn":
        return (y + f(0.5)) / s
    raise AssertionError(mode)


def axis_taps(cfg: dict, in_w: int, out_int: int, scale: float, roi) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Source indices and weights (out_int x taps) of one axis, and the range [lo, hi) of output
    coordinates that are not extrapolated (tf_crop_and_resize)."""
    x = _source_coords(cfg["coord"], out_int, in_w, scale, roi).astype(np.float64)
    lo, hi = 0, out_int
    if cfg["coord"] == "tf_crop_and_resize":
        inside = np.flatnonzero((x >= 0) & (x <= in_w - 1))
        lo, hi = (int(inside[0]), int(inside[-1]) + 1) if inside.size else (0, 0)
        assert inside.size == hi - lo, "tf_crop_and_resize: source coordinates are affine in the output"
    if cfg["mode"] == "nearest" and cfg["nearest"] == "simple":
        # Resize-10 / Upsample (as ONNX Runtime): downsampling rounds up, upsampling truncates.
        src = np.ceil(x) if scale < 1 else np.floor(x)
        return np.clip(src, 0, in_w - 1).astype(np.int64)[:, None], np.ones((out_int, 1)), lo, hi
    x_int = np.floor(x)
    ratios = np.where(x == x_int, 1.0, x - x_int)
    if cfg["mode"] == "nearest":
        coeffs = np.array([_nearest_coeffs(r, cfg["nearest"], scale) for r in ratios]).reshape(out_int, 2)
    elif cfg["mode"] == "linear":
        coeffs = np.array([_linear_coeffs(r, scale, cfg["antialias"]) for r in ratios]).reshape(out_int, -1)
    else:
        coeffs = np.array([_cubic_coeffs(r, scale, cfg["cubic_a"], cfg["antialias"])
                           for r in ratios]).reshape(out_int, -1)
    n = coeffs.shape[1]
    # the n input indices nearest to x, ties to the smaller (the reference's edge-padded neighbours)
    pad = (n + 1) // 2
    xp = x + pad
    p = np.floor(xp)
    frac = xp - p
    if n % 2 == 0:
        first = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        first = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p.astype(np.int64) + first)[:, None] + np.arange(n)[None, :] - pad
    if cfg["exclude_outside"] and cfg["mode"] != "nearest":
        coeffs = np.where((idx < 0) | (idx >= in_w), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    idx = np.clip(idx, 0, in_w - 1)
    if cfg["mode"] == "nearest":
        pick = np.argmax(coeffs, axis=1)
        return idx[np.arange(out_int), pick][:, None], np.ones((out_int, 1)), lo, hi
    return idx, coeffs, lo, hi


# --- the ops ------------------------------------------------------------------------------------

class ResizeBase(Op):
    """Subclasses say where scales/sizes/roi come from and which attributes exist."""
    dynamic_shapes = True
    legacy = False          # Resize-10 and Upsample: asymmetric coordinates, ONNX Runtime's nearest rounding

    def opt(self, node, name, neutral):
        return self.attr(node, name) if name in self.attrs else neutral

    def inputs(self, node, ins):
        """(scales, sizes, roi) as float64 arrays or None."""
        raise NotImplementedError

    def config(self, node) -> dict:
        where = f"node {node.name!r} ({node.op_type})"
        mode = self.attr(node, "mode")
        if mode == "bilinear" and self.legacy:
            mode = "linear"
        if mode not in ("nearest", "linear", "cubic") or (self.legacy and mode == "cubic"):
            raise UnsupportedOpError(f"{where}: mode {mode!r} is not supported")
        coord = "asymmetric" if self.legacy else self.attr(node, "coordinate_transformation_mode")
        if coord not in _COORD_MODES or (coord == "tf_half_pixel_for_nn" and node.opset >= 13) or \
                (coord == "half_pixel_symmetric" and node.opset < 19):
            raise UnsupportedOpError(f"{where}: coordinate_transformation_mode {coord!r} is not supported at "
                                     f"opset {node.opset}")
        nearest = "simple" if self.legacy else self.attr(node, "nearest_mode")
        if mode == "nearest" and nearest not in _NEAREST_MODES | {"simple"}:
            raise UnsupportedOpError(f"{where}: nearest_mode {nearest!r} is not supported")
        policy = self.opt(node, "keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise UnsupportedOpError(f"{where}: keep_aspect_ratio_policy {policy!r} is not supported")
        return dict(mode=mode, coord=coord, nearest=nearest, policy=policy,
                    cubic_a=float(self.opt(node, "cubic_coeff_a", -0.75)),
                    exclude_outside=bool(self.opt(node, "exclude_outside", 0)),
                    extrapolation=float(self.opt(node, "extrapolation_value", 0.0)),
                    antialias=bool(self.opt(node, "antialias", 0)) and mode != "nearest")

    def plan(self, node, ins) -> dict:
        """Output shape, per-axis (scale, roi) and the tap tables."""
        where = f"node {node.name!r} ({node.op_type})"
        x = ins[0]
        rank = len(x.shape)
        if rank == 0:
            raise ShapeError(f"{where}: cannot resize a scalar")
        cfg = self.config(node)
        scales, sizes, roi = self.inputs(node, ins)
        axes_attr = self.opt(node, "axes", None)
        axes = list(range(rank)) if not axes_attr else [common.axis(node, int(a), rank) for a in axes_attr]
        if len(set(axes)) != len(axes):
            raise ShapeError(f"{where}: axes {list(axes_attr)} repeat an axis")
        if (scales is None) == (sizes is None):
            raise ShapeError(f"{where}: exactly one of scales and sizes must be given")
        given = scales if scales is not None else sizes
        if len(given) != len(axes):
            raise ShapeError(f"{where}: {'scales' if scales is not None else 'sizes'} has {len(given)} values, "
                             f"expected {len(axes)}")
        in_shape = list(x.shape)
        scale = [1.0] * rank
        out_shape = list(in_shape)
        if scales is not None:
            for a, s in zip(axes, scales):
                if not (math.isfinite(s) and s > 0):
                    raise ShapeError(f"{where}: scale {s} of axis {a} is not a positive finite number")
                scale[a] = float(s)
                out_shape[a] = _scaled(s, in_shape[a]) if isinstance(in_shape[a], symbolic.Expr) else \
                    int(math.floor(s * in_shape[a]))
        else:
            for a, s in zip(axes, sizes):
                if symbolic.is_static((s, in_shape[a])):
                    out_shape[a] = int(s)
                    scale[a] = int(s) / in_shape[a] if in_shape[a] else 1.0
                else:   # a size given as (or resizing) a dynamic dim: their ratio is the run's
                    out_shape[a] = s if isinstance(s, symbolic.Expr) else int(s)
                    scale[a] = None
            if cfg["policy"] != "stretch":
                if None in scale:
                    raise symbolic.Undecidable(f"keep_aspect_ratio_policy {cfg['policy']} over the dynamic sizes "
                                               f"{in_shape} resized to {sizes}")
                pick = min if cfg["policy"] == "not_larger" else max
                common_scale = pick(scale[a] for a in axes)
                for a in axes:
                    scale[a] = common_scale
                    out_shape[a] = int(common_scale * in_shape[a] + 0.5)
        if any(o < 0 for o in out_shape):
            raise ShapeError(f"{where}: output shape {out_shape} is negative")
        rois = [(0.0, 1.0)] * rank
        if cfg["coord"] == "tf_crop_and_resize":
            if roi is None or len(roi) != 2 * len(axes):
                raise ShapeError(f"{where}: tf_crop_and_resize needs roi with {2 * len(axes)} values")
            for i, a in enumerate(axes):
                rois[a] = (float(roi[i]), float(roi[len(axes) + i]))
        return dict(cfg=cfg, in_shape=in_shape, out_shape=out_shape, scale=scale, roi=rois)

    def infer(self, node, ins):
        p = self.plan(node, ins)
        if p["cfg"]["mode"] != "nearest":
            common.require_float(node, ins[0])
        return [common.out(ins[0].dtype, p["out_shape"])]

    def lower(self, node, ins, outs, ctx):
        p = self.plan(node, ins)
        cfg, x = p["cfg"], ins[0]
        if not symbolic.is_static(p["in_shape"] + p["out_shape"]):
            return resize_dynamic.lower(node, p, x, outs[0])
        rank = len(p["in_shape"])
        in_strides = [common.prod(p["in_shape"][a + 1:]) for a in range(rank)]
        idx_parts, w_parts, axes, offset = [], [], [], 0
        for a in range(rank):
            n_in, n_out, s, roi = p["in_shape"][a], p["out_shape"][a], p["scale"][a], p["roi"][a]
            # an axis left alone (as the reference skips it): one tap, the same coordinate
            identity = math.isclose(s, 1.0) and n_out == n_in and (
                cfg["coord"] != "tf_crop_and_resize" or (math.isclose(roi[0], 0.0) and math.isclose(roi[1], 1.0)))
            if identity:
                idx, w, lo, hi = np.arange(n_out, dtype=np.int64)[:, None], np.ones((n_out, 1)), 0, n_out
            else:
                idx, w, lo, hi = axis_taps(cfg, n_in, n_out, s, roi)
            taps = idx.shape[1]
            idx_parts.append((idx * in_strides[a]).reshape(-1))
            w_parts.append(w.reshape(-1))
            axes.append(dict(axis=a, out=n_out, taps=taps, off=offset, lo=lo, hi=hi,
                             extrap=(lo, hi) != (0, n_out), weighted=bool(np.any(w != 1.0)),
                             div=common.prod(p["out_shape"][a + 1:-1]) if a < rank - 1 else 1))
            offset += n_out * taps
        weighted = any(ax["weighted"] for ax in axes)
        # The C expressions of the outer axes' loops: running source offset s<a> and weight w<a>.
        prev_s, prev_w = None, None
        for ax in axes[:-1]:
            a = ax["axis"]
            at = f"{ax['off']} + o{a}" + (f" * {ax['taps']} + t{a}" if ax["taps"] > 1 else "")   # this tap's entry
            ax["s"], ax["s_expr"] = f"s{a}", (f"{prev_s} + " if prev_s else "") + f"Src[{at}]"
            prev_s = ax["s"]
            if ax["weighted"]:
                ax["w"], ax["w_expr"] = f"w{a}", (f"{prev_w} * " if prev_w else "") + f"Wt[{at}]"
                prev_w = ax["w"]
            ax["pad"] = " " * (8 + 4 * a)
        if not weighted:
            assert all(ax["taps"] == 1 for ax in axes), "unweighted resize has one tap per axis"
        ext = cfg["extrapolation"]
        fill = c_float(ext) if x.dtype.name == "float32" else f"({x.dtype.c_type})({c_float(ext)})"
        params = dict(summary=f"{node.op_type} ({cfg['mode']}, {cfg['coord']}): {x.describe()} -> {outs[0].describe()}",
                      notes=[f"scales={[float(s) for s in p['scale']]} taps per axis={[ax['taps'] for ax in axes]}"],
                      ctype=x.dtype.c_type, outer=axes[:-1], inner=axes[-1], weighted=weighted, fill=fill,
                      base=prev_s or "0", weight=prev_w or "1.0f", inner_pad=" " * (8 + 4 * (rank - 1)))
        inputs = [x.name, Derived(np.concatenate(idx_parts).astype(np.int64), (),
                                  f"{node.op_type} {node.name!r}: the source index of every output position")]
        if weighted:
            inputs.append(Derived(np.concatenate(w_parts).astype(np.float32), (),
                                  f"{node.op_type} {node.name!r}: the interpolation weight of every tap"))
        rows = common.prod(p["out_shape"][:-1])
        work = axes[-1]["out"] * int(np.prod([ax["taps"] for ax in axes]))
        return KernelCall("kernels/resize.c.j2", node.op_type, params, inputs, [outs[0].name],
                          block_dim=common.block_dim_for(rows, work), tiling={"rows": rows})


_RESIZE11_ATTRS = {"coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75, "exclude_outside": 0,
                   "extrapolation_value": 0.0, "mode": "nearest", "nearest_mode": "round_prefer_floor"}


@register("Resize", since=10)
class Resize10(ResizeBase):
    """Resize-10: X, scales; asymmetric coordinates."""
    attrs = {"mode": "nearest"}
    legacy = True

    def inputs(self, node, ins):
        return _const_floats(node, ins[1], "scales"), None, None


@register("Resize", since=11)
class Resize11(ResizeBase):
    """Resize-11/13: X, roi, scales, sizes."""
    attrs = dict(_RESIZE11_ATTRS)

    def inputs(self, node, ins):
        get = lambda i: ins[i] if i < len(ins) else None  # noqa: E731
        roi = None
        if self.attr(node, "coordinate_transformation_mode") == "tf_crop_and_resize":
            roi = _const_floats(node, get(1), "roi")
        return _const_floats(node, get(2), "scales"), _sizes(node, get(3)), roi


@register("Resize", since=13)
class Resize13(Resize11):
    pass


@register("Resize", since=18)
class Resize18(Resize11):
    """Resize-18/19: antialias, axes, keep_aspect_ratio_policy (19: half_pixel_symmetric)."""
    attrs = dict(_RESIZE11_ATTRS, antialias=0, axes=None, keep_aspect_ratio_policy="stretch")


@register("Resize", since=19)
class Resize19(Resize18):
    pass


@register("Upsample", since=7)
class Upsample7(ResizeBase):
    """Upsample-7: scales attribute; asymmetric coordinates."""
    attrs = {"mode": "nearest", "scales": REQUIRED}
    legacy = True

    def inputs(self, node, ins):
        return np.asarray(self.attr(node, "scales"), dtype=np.float64).reshape(-1), None, None


@register("Upsample", since=9)
class Upsample9(Resize10):
    """Upsample-9: scales input."""
