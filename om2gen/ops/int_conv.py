"""The integer and quantized convolutions, ConvInteger and QLinearConv (1-D and 2-D; groups incl.
depthwise; pads, strides, dilations and auto_pad as Conv takes them), over constant weights.

A convolution is the exact integer GEMM (om2/om2_igemm.h) per image and group, computed
transposed (templates/kernels/iconv.c.j2): the output positions are the rows of A, read from
the image through im2col as A is packed, the output channels the columns of B, the weights
packed at compile time. A convolution with pads pads its image first (a Pad task, with the
input's zero point, which adds 0) and runs unpadded, so that every panel of positions packs
through the per-k offsets. A depthwise convolution (one input and one output channel per
group) runs the direct kernel instead (templates/kernels/idwconv.c.j2, om2/om2_idw.h), whose
GEMM would have K = taps only. QLinearConv requantizes
as MLAS does: (sum + int32 bias) * (x_scale * w_scale[c]) / y_scale, half to even, + y_zero_point,
saturated.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import NeedsConstantError, UnsupportedOpError
from ..ir import dtypes
from ..ir.graph import Value
from ..ir.program import Derived, KernelCall
from . import common, conv, igemm_pack, movement
from .igemm import Epilogue, formula, per_column, require_bytes, require_float_scalar, zero_point, zeros_after_shift
from .registry import register


def conv_call(op, node, x, w, y, *, zx, zw, epi: Epilogue, ctx):
    require_bytes(node, x, "x")
    require_bytes(node, w, "w")
    if not w.is_const:
        raise NeedsConstantError(f"node {node.name!r} ({node.op_type}): the weights {w.name!r} must be a constant "
                                 "(om2gen packs them at compile time)", w.name)
    if zx is not None and zx.size != 1:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): x's zero point {zx.name!r} has shape "
                                 f"{list(zx.shape)}; it must be one value")
    g = op.geometry(node, [x, w])
    if g["D"] != 1 or g["KD"] != 1:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): om2gen compiles 1-D and 2-D integer "
                                 f"convolutions, got input {list(x.shape)}")
    zw_step = per_column(node, zw, g["M"], "w's zero point") if zw is not None else 0
    a_signed, b_signed = igemm_pack.signed(x.dtype), igemm_pack.signed(w.dtype)
    b_shift = 0 if b_signed else 128
    inputs = [x.name]
    slot = {"a": 0}
    params = dict(out=epi.kind, a_type=x.dtype.c_type, b_type=w.dtype.c_type, formula=formula(epi),
                  y_type="int32_t", y_signed=0, a_flip=igemm_pack.FLIP if a_signed else 0,
                  a_shift=128 if a_signed else 0, b_shift=b_shift, b_signed=int(b_signed),
                  need_rowsum=0 if zeros_after_shift(zw, b_shift) else 1,
                  notes=[f"{g['rank']}-D, group={g['G']} strides={g['strides']} dilations={g['dilations']} "
                         f"pads={g['pads']}"])
    depthwise = g["CG"] == 1 and g["MG"] == 1
    if depthwise:
        inputs.append(w.name)
    else:
        k = g["CG"] * g["KH"] * g["KW"]
        wg = np.asarray(w.const).reshape(g["G"], g["MG"], k).swapaxes(1, 2)
        panels, colsum = ctx.derive(("igemm_conv", b_signed), np.ascontiguousarray(wg),
                                    lambda m: igemm_pack.pack_b(m, b_signed))
        inputs += [Derived(panels, (w.name,), f"packed into the integer GEMM's panels of 16 columns ({g['G']} "
                                              "group(s))"),
                   Derived(colsum, (w.name,), "column sums of the packed weights")]
        slot["bsum"] = 2
    slot["b"] = 1
    slot["za"], slot["zb"] = len(inputs), len(inputs) + 1
    inputs += [zero_point(node, zx, x, "x's zero point"), zero_point(node, zw, w, "w's zero point")]
    sb_step = 0
    if epi.kind == "Q8":
        sb_step = per_column(node, epi.sb, g["M"], "w_scale", "float32")
        slot.update(sa=len(inputs), sb=len(inputs) + 1, sy=len(inputs) + 2, zy=len(inputs) + 3)
        inputs += [epi.sa.name, epi.sb.name, epi.sy.name, epi.zy.name]
        ysig = igemm_pack.signed(epi.zy.dtype)
        params.update(y_type=epi.zy.dtype.c_type, y_signed=int(ysig), qmin=-128 if ysig else 0,
                      qmax=127 if ysig else 255)
    slot["bias"] = None
    if epi.bias is not None:
        slot["bias"] = len(inputs)
        inputs.append(epi.bias if isinstance(epi.bias, np.ndarray) else epi.bias.name)
    slot["koff"] = None
    if not depthwise:
        c, kh, kw = np.meshgrid(np.arange(g["CG"]), np.arange(g["KH"]), np.arange(g["KW"]), indexing="ij")
        koff = (c * g["H"] * g["W"] + kh * g["DH"] * g["W"] + kw * g["DW"]).reshape(-1).astype(np.int32)
        slot["koff"] = len(inputs)
        inputs.append(Derived(koff, (), "each k's offset in the image (channel, kernel row, kernel column)"))
    slot["y"] = len(inputs)
    dims = {d: g[d] for d in _DIMS}
    summary = f"{node.op_type}: {x.describe()} * {w.describe()} -> {y.describe()}"
    if depthwise:
        layout = depthwise_layout(g)
        tiling = dict(dims, zb_step=zw_step, sb_step=sb_step, **layout.tiling)
        # the tap pairs and strides compiled in, so that the loops unroll
        params.update(summary=f"{summary} (depthwise, direct)", slot=slot, kw=g["KW"], kh=g["KH"], sh=g["SH"],
                      sw=g["SW"], dw=g["DW"], ntaps=g["KH"] * g["KW"], pairs=layout.pairs, a_signed=int(a_signed),
                      direct=layout.direct, fields=list(tiling))
        items = g["N"] * g["C"] * layout.tiling["bands"]
        blocks = common.block_dim_for(items, layout.tiling["BR"] * g["OW"] * g["KH"] * g["KW"])
        return KernelCall("kernels/idwconv.c.j2", node.op_type, params, inputs, [y.name], block_dim=blocks,
                          tiling=tiling, workspace=blocks * layout.tiling["ws_words"] * 4)
    k = g["CG"] * g["KH"] * g["KW"]
    p = g["OH"] * g["OW"]
    pointwise = (g["KH"], g["KW"], g["SH"], g["SW"], g["PT"], g["PL"]) == (1, 1, 1, 1, 0, 0) and \
        (g["OH"], g["OW"]) == (g["H"], g["W"])
    pad = None
    if not pointwise and _pads(g) != (0, 0, 0, 0):
        # the image padded first (with its zero point), so that every panel of positions reads
        # its taps through the per-k offsets, none through the per-tap edge tables
        pad, g, dims = _padded(node, x, zx, g)
        inputs[0] = pad.outputs[0]
        c, kh, kw = np.meshgrid(np.arange(g["CG"]), np.arange(g["KH"]), np.arange(g["KW"]), indexing="ij")
        koff = (c * g["H"] * g["W"] + kh * g["DH"] * g["W"] + kw * g["DW"]).reshape(-1).astype(np.int32)
        inputs[slot["koff"]] = Derived(koff, (), "each k's offset in the padded image (channel, kernel row, "
                                                 "kernel column)")
    tiles = igemm_pack.split(p, g["MG"], k, ctx.target, items=g["N"] * g["G"])
    ws = igemm_pack.workspace_bytes(k, tiles.tile_n, True, ctx.target)
    tiling = dict(dims, K=k, P=p, tiles_m=tiles.tiles_m, tiles_n=tiles.tiles_n, ws_bytes=ws,
                  w_group_stride=int(np.prod(panels.shape[1:])), sum_group_stride=colsum.shape[-1],
                  pointwise=int(pointwise), zb_step=zw_step, sb_step=sb_step)
    params.update(summary=f"{summary} as the integer GEMM", slot=slot, mr=igemm_pack.mr(ctx.target),
                  fields=list(tiling))
    items = g["N"] * g["G"] * tiles.tiles_m * tiles.tiles_n
    blocks = igemm_pack.block_dim(items)
    call = KernelCall("kernels/iconv.c.j2", node.op_type, params, inputs, [y.name], block_dim=blocks, tiling=tiling,
                      workspace=blocks * ws)
    return [pad, call] if pad is not None else call


def _pads(g: dict) -> tuple[int, int, int, int]:
    """(top, left, bottom, right): the pads the output positions' taps reach (a bottom or right pad
    no tap reads counts 0)."""
    bottom = max(0, (g["OH"] - 1) * g["SH"] + (g["KH"] - 1) * g["DH"] + 1 - g["PT"] - g["H"])
    right = max(0, (g["OW"] - 1) * g["SW"] + (g["KW"] - 1) * g["DW"] + 1 - g["PL"] - g["W"])
    return g["PT"], g["PL"], bottom, right


def _padded(node, x, zx, g: dict):
    """The Pad call making x's padded image (pads read the zero point, which adds 0), and the
    geometry over it: (call, geometry, the tiling's dims)."""
    top, left, bottom, right = _pads(g)
    spatial = [(top, bottom), (left, right)] if len(x.shape) == 4 else [(left, right)]
    pads = [(0, 0), (0, 0), *spatial]
    padded = Value(f"{node.name}::padded", x.dtype, tuple(n + b + e for n, (b, e) in zip(x.shape, pads)))
    call = movement.pad_call(x, padded, pads, zx if zx is not None else 0)
    call.temps = [padded]
    g = dict(g, H=g["H"] + top + bottom, W=g["W"] + left + right, PT=0, PL=0)
    dims = {d: g[d] for d in _DIMS}
    return call, g, dims


@dataclasses.dataclass(frozen=True)
class DepthwiseLayout:
    pairs: list        # per tap pair: phase, row and column offset (ro, co), taps lo and hi (or None)
    direct: bool       # the pairs read the padded rows themselves (column dilation 1, stride 1 or 2)
    tiling: dict       # bands, Hq, Lq and the workspace's parts, in int32 words


def depthwise_layout(g: dict) -> DepthwiseLayout:
    """How om2/om2_idw.h reads one channel: taps kw and kw + 1 of a kernel row paired in one
    word, the plane split into SH x SW phases; output q = oh * Lq + ow reads pair p at word
    q + ro * Lq + co of its phase's plane [Hq][Lq] (and STEP words of margin). A plane is made
    in bands of BR output rows whose pair planes take at most PLANE_BUDGET words. The
    workspace: the band's padded rows (int16), its pair planes, the sums and the requantized
    bytes along q."""
    kh_, kw_, sh, sw, dh, dw = (g[d] for d in ("KH", "KW", "SH", "SW", "DH", "DW"))
    ro_max, co_max = (kh_ - 1) * dh // sh, (kw_ - 1) * dw // sw
    lq = g["OW"] + co_max
    br = max(1, min(g["OH"], PLANE_BUDGET // (sh * sw * lq) - ro_max))
    hq = br + ro_max
    pairs = [{"phase": (kh * dh) % sh * sw + (kw * dw) % sw, "ro": kh * dh // sh, "co": kw * dw // sw,
              "lo": kh * kw_ + kw, "hi": kh * kw_ + kw + 1 if kw + 1 < kw_ else None}
             for kh in range(kh_) for kw in range(0, kw_, 2)]
    qpad = -(-((br - 1) * lq + g["OW"]) // STEP) * STEP
    direct = dw == 1 and sw in (1, 2)
    if direct:     # om2_idw_sum_direct: the pairs read the padded rows (pitch SW * Lq), no planes
        for p, (kh, kw) in zip(pairs, ((kh, kw) for kh in range(kh_) for kw in range(0, kw_, 2))):
            p.update(phase=(kh * dh) % sh, co=kw)
        lx, planes = sw * lq, 0
        xs_len = sh * hq * lx + sw * STEP + 64     # the steps past the last output read on
    else:
        lx = _words16(lq) * sw + dw                # om2_idw_row_length
        planes = sh * sw * (hq * lq + STEP)
        xs_len = sh * hq * lx
    xs_at = _words16(planes)
    acc_at = _words16(xs_at + (xs_len + 1) // 2)
    yq_at = _words16(acc_at + qpad)
    ws = _words16(yq_at + qpad // 4)
    return DepthwiseLayout(pairs, direct, dict(BR=br, bands=-(-g["OH"] // br), Hq=hq, Lq=lq, xs_len=xs_len,
                                               xs_at=xs_at, acc_at=acc_at, yq_at=yq_at, ws_words=ws))


STEP = 64                 # OM2_IDW_STEP: outputs summed per step
PLANE_BUDGET = 16384      # words of pair planes per band (64 KiB, with the rest of the workspace in L2)


def _words16(n: int) -> int:
    return -(-n // 16) * 16


_DIMS = ("N", "C", "M", "G", "CG", "MG", "H", "W", "KH", "KW", "OH", "OW", "SH", "SW", "DH", "DW", "PT", "PL")

_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None, "strides": None}


@register("ConvInteger", since=10)
class ConvInteger(conv.Conv):
    """x, w, x_zero_point?, w_zero_point? -> int32."""
    attrs = _ATTRS
    dynamic_shapes = False

    def infer(self, node, ins):
        require_bytes(node, ins[0], "x")
        require_bytes(node, ins[1], "w")
        g = self.geometry(node, ins[:2])
        return [common.out(dtypes.BY_NAME["int32"], (g["N"], g["M"], *g["out_spatial"]))]

    def lower(self, node, ins, outs, ctx):
        return conv_call(self, node, ins[0], ins[1], outs[0], zx=ins[2] if len(ins) > 2 else None,
                         zw=ins[3] if len(ins) > 3 else None, epi=Epilogue("I32"), ctx=ctx)


@register("QLinearConv", since=10)
class QLinearConv(conv.Conv):
    """x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B? -> y's type."""
    attrs = _ATTRS
    dynamic_shapes = False

    def infer(self, node, ins):
        x, sx, zx, w, sw, zw, sy, zy = ins[:8]
        for v, what in ((x, "x"), (w, "w"), (zy, "y_zero_point")):
            require_bytes(node, v, what)
        require_float_scalar(node, sx, "x_scale")
        require_float_scalar(node, sy, "y_scale")
        g = self.geometry(node, [x, w])
        bias = ins[8] if len(ins) > 8 else None
        if bias is not None and (bias.dtype.name != "int32" or bias.shape != (g["M"],)):
            raise UnsupportedOpError(f"node {node.name!r} (QLinearConv): B {bias.name!r} must be int32 of shape "
                                     f"[{g['M']}], got {bias.dtype.name}{list(bias.shape)}")
        return [common.out(zy.dtype, (g["N"], g["M"], *g["out_spatial"]))]

    def lower(self, node, ins, outs, ctx):
        x, sx, zx, w, sw, zw, sy, zy = ins[:8]
        epi = Epilogue("Q8", sa=sx, sb=sw, sy=sy, zy=zy, bias=ins[8] if len(ins) > 8 else None)
        return conv_call(self, node, x, w, outs[0], zx=zx, zw=zw, epi=epi, ctx=ctx)
