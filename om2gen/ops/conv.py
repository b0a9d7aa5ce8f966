"""Conv (1-D, 2-D, 3-D): pads incl. auto_pad, strides, dilations, groups.

Every rank is lowered as 3-D: missing leading spatial dims are singletons (size 1, kernel 1,
stride 1, no pads), so one kernel template serves all three. A convolution is a GEMM per image
and group (weights x im2col(input), templates/kernels/conv_gemm.c.j2) with the weights packed at
compile time; depthwise convolutions (one input and one output channel per group), where a GEMM
would have K = taps only, run the direct kernel (one output row per work item).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import CompileError, ModelError, ShapeError, UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.graph import Value
from ..ir.program import Derived, KernelCall
from ..toolchain.blocking import blocking
from . import common, gemm_pack, winograd
from .registry import Op, register

# Above this many kernel columns the per-column loops are driven by tables instead of unrolled.
MAX_UNROLLED_COLS = 16
# Depthwise kernels with at most this many taps sum them unrolled in registers (dwconv.c.j2).
MAX_DEPTHWISE_TAPS = 64
# Output positions (rows x buffer columns) per depthwise work item: its buffers stay in L1/L2.
DEPTHWISE_ITEM_FLOATS = 2048
DEPTHWISE_UNROLL = 4            # output vectors summed at once (independent FMA chains)
# The direct AVX-512 depthwise kernel (dwconv_direct.c.j2): kernels up to this wide and this many
# taps (their weights stay in registers), ROWS output rows at a time.
DIRECT_DEPTHWISE_MAX_KW = 7
DIRECT_DEPTHWISE_MAX_TAPS = 25
DIRECT_DEPTHWISE_ROWS = 4
DIRECT_WINDOW_BLOCK_WORK = 4
# The largest stride, dilation or pad compiled: the kernels add and multiply window positions in
# int64, and with these (and every dim, frontend/limits.py) below 2^31 no such sum overflows. A
# stride of INT64_MAX did: the convolution ran and gave wrong values.
MAX_WINDOW_ATTR = (1 << 31) - 1


def _align16(n: int) -> int:
    return -(-n // 16) * 16


def im2col_plane_floats(g: dict, positions: int, bl) -> int:
    """Workspace of the column-phase planes for a tile of `positions` output positions
    (om2_im2col_plane_floats in om2/om2_gemm.h): CG x SW planes of the input rows they read."""
    rows = (positions + g["OW"] - 1) // g["OW"] + 1          # output rows a run of positions can touch
    r = (rows - 1) * g["SH"] + (g["KH"] - 1) * g["DH"] + 1
    pwq = g["OW"] + (g["KW"] - 1) * g["DW"] // g["SW"]
    return g["CG"] * g["SW"] * _align16(r * pwq + 2 * bl.vl)


def spatial_pads(node, attr, in_sizes, kernel, strides, dilations) -> list[int]:
    """Begin/end pads per spatial dim, resolving auto_pad as the spec defines it."""
    auto = attr("auto_pad")
    rank = len(in_sizes)
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("NOTSET", "", None):
        return explicit_pads(node, attr("pads"), rank)
    if auto == "VALID":
        return [0] * (2 * rank)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
            out = symbolic.ceildiv(size, s) if isinstance(size, symbolic.Expr) else -(-size // s)
            total = (out - 1) * s + (k - 1) * d + 1 - size
            total = symbolic.smax(0, total) if isinstance(total, symbolic.Expr) else max(0, total)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin + end
    raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): auto_pad {auto!r} is not supported")


def same_sizes(attr, sizes, strides, outs) -> list:
    """The output sizes, those of dynamic dims under auto_pad SAME_* written as the spec's
    ceil(size / stride): what the pads of spatial_pads give, without their max(0, ...)."""
    auto = attr("auto_pad")
    if (auto.decode() if isinstance(auto, bytes) else auto) not in ("SAME_UPPER", "SAME_LOWER"):
        return outs
    return [symbolic.ceildiv(n, s) if isinstance(o, symbolic.Expr) else o for n, s, o in zip(sizes, strides, outs)]


def explicit_pads(node, value, rank: int) -> list[int]:
    """The pads attribute (begin pads, then end pads), all >= 0 as the spec requires; 0 if absent."""
    pads = [int(p) for p in (value or [0] * (2 * rank))]
    if len(pads) != 2 * rank:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): pads has {len(pads)} values, expected "
                         f"{2 * rank} for {rank} spatial dims")
    if min(pads) < 0:
        raise ModelError(f"node {node.name!r} ({node.op_type}): pads {pads} has a negative value; ONNX pads are "
                         ">= 0 (to crop, put a Slice before the node): fix the attribute or re-export the model")
    _below_max(node, "pads", pads)
    return pads


def _below_max(node, what: str, ints: list[int]) -> None:
    if max(ints) > MAX_WINDOW_ATTR:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): {what} {ints} has a value above "
                                 f"{MAX_WINDOW_ATTR} (2^31 - 1), more than any dim om2gen compiles is long; "
                                 "om2gen does not compile it")


def out_size(size, k, s, d, pb, pe, ceil_mode=False) -> int:
    span = size + pb + pe - ((k - 1) * d + 1)
    if isinstance(span, symbolic.Expr):   # a dynamic dim: the same floor and ceiling, as expressions
        return (symbolic.ceildiv(span, s) if ceil_mode else symbolic.floordiv(span, s)) + 1
    return (math.ceil(span / s) if ceil_mode else span // s) + 1


def spatial_ints(node, value, rank: int, what: str, default: int, minimum: int) -> list[int]:
    """An attribute with one int per spatial dim (strides, dilations...), or the default; a value
    below `minimum` (a stride or dilation of 0 or less) is a malformed model."""
    if value is None or len(value) == 0:
        return [default] * rank
    if len(value) != rank:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): {what} has {len(value)} values, expected {rank}")
    ints = [int(v) for v in value]
    if min(ints) < minimum:
        raise ModelError(f"node {node.name!r} ({node.op_type}): {what} {ints} has a value below {minimum}; ONNX "
                         f"{what} are >= {minimum}: fix the attribute or re-export the model")
    _below_max(node, what, ints)
    return ints


def kernel_of(node, w, kernel_shape) -> list[int]:
    """The kernel's spatial dims: the weight's, which a kernel_shape attribute must repeat."""
    kernel = list(w.shape[2:])
    if kernel_shape and [int(v) for v in kernel_shape] != kernel:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): kernel_shape {list(kernel_shape)} differs from the "
                         f"weight {w.name!r} {list(w.shape)} (its spatial dims are the kernel); fix the attribute "
                         "or re-export the model")
    if min(kernel, default=1) < 1:
        raise ShapeError(f"node {node.name!r} ({node.op_type}): the weight {w.name!r} {list(w.shape)} has an empty "
                         "kernel (a spatial dim of 0)")
    return kernel


def spatial_rank(node, x, what: str = "input") -> int:
    rank = len(x.shape) - 2
    if not 1 <= rank <= 3:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): only 1-D, 2-D and 3-D {node.op_type} "
                                 f"(3-D to 5-D {what}) is supported, got {what} {list(x.shape)}")
    return rank


def as3(values, fill) -> list:
    """Pads a per-spatial-dim list to 3 dims with leading `fill` (the singleton dims)."""
    return [fill] * (3 - len(values)) + list(values)


def kernel_columns(k: int, dil: int, pad: int, stride: int, n_in: int, n_out: int) -> list[dict]:
    """Per kernel column kw of a convolution: the output columns [lo, hi) whose input column
    ow*stride + off (off = kw*dil - pad) is inside [0, n_in)."""
    cols = []
    for kw in range(k):
        off = kw * dil - pad
        lo = min(n_out, max(0, -(off // stride)))               # first ow with ow*stride + off >= 0
        hi = min(n_out, max(lo, -((off - n_in) // stride)))      # first ow with ow*stride + off >= n_in
        cols.append({"kw": kw, "off": off, "lo": lo, "hi": hi})
    return cols


@register("Conv", since=1)
class Conv(Op):
    dynamic_shapes = True
    attrs = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None,
             "strides": None}

    def geometry(self, node, ins):
        x, w = ins[0], ins[1]
        r = spatial_rank(node, x)
        if len(w.shape) != r + 2:
            raise ShapeError(f"node {node.name!r} (Conv): weight {list(w.shape)} does not fit input {list(x.shape)}")
        n, c = x.shape[:2]
        m, cg = w.shape[:2]
        group = int(self.attr(node, "group"))
        if group <= 0 or c != cg * group or m % group:
            raise ShapeError(f"node {node.name!r} (Conv): input channels {c}, weight {list(w.shape)} and "
                             f"group {group} do not fit")
        sizes, kernel = list(x.shape[2:]), kernel_of(node, w, self.attr(node, "kernel_shape"))
        strides = spatial_ints(node, self.attr(node, "strides"), r, "strides", 1, minimum=1)
        dil = spatial_ints(node, self.attr(node, "dilations"), r, "dilations", 1, minimum=1)
        pads = spatial_pads(node, lambda a: self.attr(node, a), sizes, kernel, strides, dil)
        outs = [out_size(sizes[i], kernel[i], strides[i], dil[i], pads[i], pads[r + i]) for i in range(r)]
        outs = same_sizes(lambda a: self.attr(node, a), sizes, strides, outs)
        if any(o <= 0 for o in outs):
            raise ShapeError(f"node {node.name!r} (Conv): output would be empty ({outs})")
        (D, H, W), (KD, KH, KW), (OD, OH, OW) = as3(sizes, 1), as3(kernel, 1), as3(outs, 1)
        (SD, SH, SW), (DD, DH, DW), (PF, PT, PL) = as3(strides, 1), as3(dil, 1), as3(pads[:r], 0)
        return dict(rank=r, N=n, C=c, M=m, G=group, CG=cg, MG=m // group, D=D, H=H, W=W, KD=KD, KH=KH, KW=KW,
                    OD=OD, OH=OH, OW=OW, SD=SD, SH=SH, SW=SW, DD=DD, DH=DH, DW=DW, PF=PF, PT=PT, PL=PL,
                    out_spatial=outs, strides=strides, dilations=dil, pads=pads)

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        g = self.geometry(node, ins)
        return [common.out(ins[0].dtype, (g["N"], g["M"], *g["out_spatial"]))]

    def activation(self, node) -> dict | None:
        """The clamp every kernel path applies as it stores the result (their `act`): none for a
        Conv, the fused activation's for om2gen.FusedConv (ops/fused_conv.py)."""
        return None

    def residual(self, node, ins):
        """The tensor added to the result before the activation (only the packed GEMM adds one):
        none for a Conv, FusedConv's input Z."""
        return None

    def lower(self, node, ins, outs, ctx):
        g = self.geometry(node, ins)
        if symbolic.decided(lambda: g["W"] == 1 and g["KW"] == 1 and g["OW"] == 1 and g["PL"] == 0 and g["H"] > 1,
                            False):
            # [.., H, 1] is laid out exactly like [.., 1, H]: make the long dim the innermost one, so
            # the kernel's inner loop is contiguous and long (1-D convs exported as H x 1 images)
            g = dict(g, H=1, W=g["H"], KH=1, KW=g["KH"], OH=1, OW=g["OH"], SH=1, SW=g["SH"], DH=1, DW=g["DH"],
                     PT=0, PL=g["PT"])
        bias = len(ins) > 2 and ins[2] is not None
        if not (g["CG"] == 1 and g["MG"] == 1):
            return self.lower_gemm(node, ins, outs, ctx, g, bias)
        if self.residual(node, ins) is not None:
            raise CompileError(f"node {node.name!r} ({node.op_type}): a fused residual Add needs the packed-GEMM "
                               f"kernel, but this convolution is depthwise (an om2gen bug: report it; --fusion off "
                               f"compiles the model without fusion meanwhile)")
        if g["D"] == 1 and g["KD"] == 1 and g["KH"] * g["KW"] <= MAX_DEPTHWISE_TAPS:
            return self.lower_depthwise(node, ins, outs, g, bias, ctx)
        cols = kernel_columns(g["KW"], g["DW"], g["PL"], g["SW"], g["W"], g["OW"])
        params = {k: v for k, v in g.items() if k not in ("out_spatial", "strides", "dilations", "pads")}
        params.update(summary=f"Conv: {ins[0].describe()} * {ins[1].describe()} -> {outs[0].describe()}",
                      bias=bias, cols=cols, unroll=g["KW"] <= MAX_UNROLLED_COLS, act=self.activation(node))
        params["notes"] = [f"{g['rank']}-D, group={g['G']} strides={g['strides']} dilations={g['dilations']} "
                           f"pads={g['pads']}"]
        rows = g["N"] * g["M"] * g["OD"] * g["OH"]
        work = g["OW"] * g["CG"] * g["KD"] * g["KH"] * g["KW"]
        inputs = [ins[0].name, ins[1].name] + ([ins[2].name] if bias else [])
        return KernelCall("kernels/conv2d.c.j2", "Conv", params, inputs, [outs[0].name],
                          block_dim=common.block_dim_for(rows, work), tiling={"rows": rows})

    def lower_gemm(self, node, ins, outs, ctx, g, bias):
        bl = blocking(ctx.target)
        k = g["CG"] * g["KD"] * g["KH"] * g["KW"]
        p = g["OD"] * g["OH"] * g["OW"]
        w = ins[1]
        packed_w = w.is_const
        residual = self.residual(node, ins)
        # (a dynamic model's: Winograd planned for the largest sizes; with the image size dynamic,
        # that plan's tile block and channel split, the tile counts the run's: winograd.over_range)
        planned = g
        if symbolic.symbols(list(g.values())):
            most = {key: symbolic.upper_bound(v) if isinstance(v, symbolic.Expr) else v for key, v in g.items()}
            planned = most if None not in most.values() else None
        if winograd.applicable(g, packed_w) and residual is None and planned is not None:
            plan = winograd.choose(planned, bl, ctx.winograd)   # the compile option
            if plan is not None and symbolic.symbols([g["OH"], g["OW"]]):
                plan = winograd.over_range(g, planned, plan, bl)
            if plan is not None:
                return self.lower_winograd(node, ins, outs, g, bias, plan, bl, ctx)
        # small images: positions become the rows (a short last row panel is cheap, a padded vector is not)
        # (a dynamic model: a variant right at every size -- positions as columns when they vary, no
        # batching of images whose count varies -- and tile sizes for the largest run)
        dynamic = bool(symbolic.symbols([p, g["N"], k]))
        transposed = packed_w and isinstance(p, int) and gemm_pack.transposed_pays(g["MG"], p, bl)
        split = gemm_pack.split_dynamic if dynamic else gemm_pack.split
        items = g["N"] * g["G"]
        # 1x1, stride 1, no pads: im2col(X) is X itself
        pointwise = (g["KD"], g["KH"], g["KW"], g["SD"], g["SH"], g["SW"], g["PF"], g["PT"], g["PL"]) == \
            (1, 1, 1, 1, 1, 1, 0, 0, 0) and (g["OD"], g["OH"], g["OW"]) == (g["D"], g["H"], g["W"])
        # a batch of small images computed transposed: the rows are the positions of every image
        # (one register tile fills up), not one image's few
        batched = transposed and not pointwise and isinstance(g["N"], int) and g["N"] > 1
        images_per_row_block = g["N"] if batched else 1
        if batched:
            items = g["G"]
        if transposed:
            tiles = split(p * images_per_row_block, g["MG"], k, bl, items=items, a_packed_at_run_time=True,
                          b_packed_at_run_time=False)
            ws = gemm_pack.workspace_floats(gemm_pack.largest(tiles), bl, pack_a_at_run_time=True,
                                            transposed=True)
        else:
            tiles = split(g["MG"], p, k, bl, items=items, a_packed_at_run_time=not packed_w, b_packed_at_run_time=True)
            ws = gemm_pack.workspace_floats(gemm_pack.largest(tiles), bl, pack_a_at_run_time=not packed_w)
        # a strided 2-D kernel that reads every row and column phase: im2col from column-phase planes
        planes = 0
        if not pointwise and not batched and g["D"] == 1 and g["KD"] == 1 and g["SW"] > 1 and g["KW"] >= g["SW"] \
                and g["KH"] >= g["SH"]:
            planes = ws
            big = gemm_pack.largest(tiles)
            ws += im2col_plane_floats(g, big.tile_m if transposed else big.tile_n, bl)
        items *= tiles.tiles_m * tiles.tiles_n
        inputs = [ins[0].name]
        if packed_w:
            wg = np.asarray(w.const, np.float32).reshape(g["G"], g["MG"], k)
            packed = ctx.derive(("conv_gemm", transposed, bl), wg, lambda wg: gemm_pack.pack_b(wg.swapaxes(1, 2), bl.nr)
                                if transposed else gemm_pack.pack_a(wg, bl.mr))
            panels = f"B panels of {bl.nr} columns" if transposed else f"A panels of {bl.mr} rows"
            inputs.append(Derived(packed, (w.name,), f"packed into the GEMM's {panels} ({g['G']} group(s))"))
        else:
            inputs.append(w.name)
        if bias:
            inputs.append(ins[2].name)
        if residual is not None:
            inputs.append(residual.name)
        tiling = dict(N=g["N"], NI=g["N"] // images_per_row_block, RB=images_per_row_block, G=g["G"], C=g["C"], CG=g["CG"], M=g["M"], MG=g["MG"], K=k, P=p,
                      **{d: g[d] for d in ("D", "H", "W", "KD", "KH", "KW", "OD", "OH", "OW", "SD", "SH", "SW",
                                           "DD", "DH", "DW", "PF", "PT", "PL")},
                      tile_m=tiles.tile_m, tile_n=tiles.tile_n, tiles_m=tiles.tiles_m, tiles_n=tiles.tiles_n,
                      w_group_stride=int(np.prod(packed.shape[1:])) if packed_w else 0, ws_floats=ws,
                      pointwise=int(pointwise), planes=planes)
        # Nothing shape-specific goes into the source (shapes are tiling data), so every Conv of a
        # model with the same operand kinds shares one binary.
        params = dict(summary=f"Conv as packed GEMM ({'constant' if packed_w else 'input'} weights"
                              f"{', bias' if bias else ''}"
                              f"{', residual added' if residual is not None else ''}"
                              f"{', transposed' if transposed else ''}{' over the batch' if batched else ''}); shapes from "
                              "the tiling data",
                      bias=bias, residual_slot=len(inputs) - 1 if residual is not None else None, packed_w=packed_w,
                      transposed=transposed, y_slot=len(inputs), gemm=bl.defines(),
                      fields=list(tiling), act=self.activation(node))
        block_dim = gemm_pack.block_dim(items)
        return KernelCall("kernels/conv_gemm.c.j2", "Conv", params, inputs, [outs[0].name], block_dim=block_dim,
                          tiling=tiling, workspace=block_dim * ws * 4)

    def lower_winograd(self, node, ins, outs, g, bias, plan, bl, ctx):
        """3x3 stride 1 as Winograd (om2/om2_winograd.h): weights transformed and packed now (stored
        in the archive), or at load by a load task from the raw filters (the same bytes), as
        winograd.weights_at_load decides."""
        w = np.asarray(ins[1].const, np.float32)
        # (a dynamic model stores U: the RT2 plan of its classic-.om twin, lower/host_ops.py, has no load
        # tasks; and so does a filter not held as float32, which the load task reads)
        dynamic = bool(symbolic.symbols(list(g.values())))
        at_load = not dynamic and np.asarray(ins[1].const).dtype == np.float32 and \
            winograd.weights_at_load(g["M"], g["C"], plan.m, bl, ctx.winograd_weights)
        calls = []
        if at_load:
            load = self.winograd_weights_call(node, ins[1], plan.m, bl)
            calls.append(load)
            u = load.outputs[0]
        else:
            u = ctx.derive(("winograd", plan.m, bl), w, lambda w: winograd.pack_weights(w, plan.m, bl))
            u = Derived(u, (ins[1].name,), f"Winograd F({plan.m}x{plan.m}, 3x3) weight transform, packed for its GEMMs")
        inputs = [ins[0].name, u] + ([ins[2].name] if bias else [])
        tiling = dict(N=g["N"], C=g["C"], M=g["M"], H=g["H"], W=g["W"], OH=g["OH"], OW=g["OW"], PT=g["PT"],
                      PL=g["PL"], TH=plan.TH, TW=plan.TW, tile_block=plan.tile_block,
                      tile_blocks=plan.tile_blocks, k_range=plan.k_range, k_ranges=plan.k_ranges, **plan.layout)
        code = winograd.transform_code(plan.m)
        made = "at load by its load task" if at_load else "at compile time"
        params = dict(summary=f"Conv 3x3 stride 1 as Winograd F({plan.m}x{plan.m}, 3x3) (weights transformed "
                              f"{made}{', bias' if bias else ''}); shapes from the tiling data",
                      m=plan.m, points=", ".join(str(p) for p in winograd.POINTS[plan.m]), bt=code["bt"],
                      at=code["at"], bias=bias, y_slot=len(inputs), gemm=bl.defines(), fields=list(tiling),
                      act=self.activation(node))
        block_dim = gemm_pack.block_dim(g["N"] * plan.tile_blocks * plan.k_ranges)
        calls.append(KernelCall("kernels/winograd.c.j2", "Conv", params, inputs, [outs[0].name], block_dim=block_dim,
                                tiling=tiling, workspace=block_dim * plan.ws_floats * 4))
        return calls if at_load else calls[0]

    @staticmethod
    def winograd_weights_call(node, w, m: int, bl) -> KernelCall:
        """The load task that makes a layer's packed U from its raw filters w [K, C, 3, 3] (a constant
        of the archive), into a buffer the model owns (templates/kernels/winograd_weights.c.j2)."""
        k, c = w.shape[:2]
        a = m + 2
        u = Value(f"{node.name}.winograd_weights", dtypes.BY_NAME["float32"], (-(-k // bl.mr), a * a, c, bl.mr))
        tiling = winograd.transform_tiling(k, c, bl)
        params = dict(summary=f"Winograd F({m}x{m}, 3x3) weight transform U = G g G^T, packed for the Winograd "
                              "kernel's GEMMs (a load task)",
                      m=m, a=a, mr=bl.mr, points=", ".join(str(p) for p in winograd.POINTS[m]),
                      code=winograd.transform_weights_code(m), fields=list(tiling))
        return KernelCall("kernels/winograd_weights.c.j2", "WinogradWeights", params, [w.name], [u.name],
                          block_dim=gemm_pack.block_dim(tiling["panels"] * tiling["c_chunks"]), tiling=tiling,
                          temps=[u], at_load=True)

    def lower_depthwise(self, node, ins, outs, g, bias, ctx):
        """One input and one output channel per group, 2-D or 1-D (templates/kernels/dwconv.c.j2):
        rows of a plane from zero-padded stride-phase planes, every tap one vector load; on AVX-512,
        column strides 1 and 2 read the input in place instead (dwconv_direct.c.j2)."""
        if direct_window_fits(ctx.target, g):
            return self.lower_depthwise_direct(node, ins, outs, g, bias)
        bl = blocking(ctx.target)
        # tap (kh, kw) reads plane ((kh*DH) % SH, (kw*DW) % SW) at rows/columns (kh*DH) // SH, (kw*DW) // SW on;
        # taps on one plane row form a group (they share the row's vector loads)
        groups: dict[tuple[int, int], list] = {}
        for kh in range(g["KH"]):
            for kw in range(g["KW"]):
                key = (kh * g["DH"] % g["SH"] * g["SW"] + kw * g["DW"] % g["SW"], kh * g["DH"] // g["SH"])
                groups.setdefault(key, []).append({"index": kh * g["KW"] + kw, "col": kw * g["DW"] // g["SW"]})
        groups = [{"plane": p, "rows": r, "taps": t} for (p, r), t in groups.items()]
        extra_rows = (g["KH"] - 1) * g["DH"] // g["SH"]
        wq = g["OW"] + (g["KW"] - 1) * g["DW"] // g["SW"]   # the output columns plus the taps' reach
        rows = symbolic.smax(1, symbolic.smin(g["OH"], DEPTHWISE_ITEM_FLOATS // wq))   # (a dynamic OH, OW: the run's)
        chunks = symbolic.ceildiv(g["OH"], rows)
        # plane rows: whole vectors written past a row's end land in the next row or this slack, which
        # also takes the taps' loads past the last row (DEPTHWISE_UNROLL + 1 vectors)
        buf_floats = _align16((rows + extra_rows + 1) * wq + (DEPTHWISE_UNROLL + 1) * bl.vl)
        out_floats = _align16(rows * wq + DEPTHWISE_UNROLL * bl.vl)
        ws = g["SH"] * g["SW"] * buf_floats + out_floats
        inputs = [ins[0].name, ins[1].name] + ([ins[2].name] if bias else [])
        tiling = dict(N=g["N"], C=g["C"], H=g["H"], W=g["W"], OH=g["OH"], OW=g["OW"], PT=g["PT"], PL=g["PL"], R=rows,
                      chunks=chunks, Wq=wq, buf_floats=buf_floats, ws_floats=ws)
        params = {k: g[k] for k in ("KH", "KW", "SH", "SW", "DH", "DW")}
        params.update(summary=f"Conv (depthwise) {g['KH']}x{g['KW']}, strides {g['SH']}x{g['SW']}, dilations "
                              f"{g['DH']}x{g['DW']}{', bias' if bias else ''}; shapes from the tiling data",
                      bias=bias, ntaps=g["KH"] * g["KW"], groups=groups, unroll=DEPTHWISE_UNROLL,
                      extra_rows=extra_rows, planes=g["SH"] * g["SW"], ahead=2 * g["SH"], y_slot=len(inputs),
                      gemm=bl.defines(), fields=list(tiling), act=self.activation(node))
        items = g["N"] * g["C"] * chunks
        block_dim = common.block_dim_for(items, rows * wq * g["KH"] * g["KW"])
        return KernelCall("kernels/dwconv.c.j2", "Conv", params, inputs, [outs[0].name], block_dim=block_dim,
                          tiling=tiling, workspace=block_dim * ws * 4)

    def lower_depthwise_direct(self, node, ins, outs, g, bias):
        """Depthwise on AVX-512 (templates/kernels/dwconv_direct.c.j2)."""
        inputs = [ins[0].name, ins[1].name] + ([ins[2].name] if bias else [])
        return direct_window_call("Conv", inputs, outs[0].name, g, bias=bias, act=self.activation(node))


def direct_window_fits(target, g: dict) -> bool:
    """Whether dwconv_direct.c.j2 computes this 2-D window (depthwise Conv or MaxPool geometry)."""
    return target.name == "x86_64-avx512" and g["SW"] in (1, 2) and g["KW"] <= DIRECT_DEPTHWISE_MAX_KW \
        and g["KH"] * g["KW"] <= DIRECT_DEPTHWISE_MAX_TAPS


def direct_window_call(op_type: str, inputs: list, output: str, g: dict, *, bias=False, act=None,
                       pool=False) -> KernelCall:
    """A depthwise Conv (weights, optional bias and activation) or, with pool, a MaxPool on AVX-512
    (templates/kernels/dwconv_direct.c.j2): output rows 16 columns at a time straight from the input,
    the padding as lane masks; work item = R rows of one plane. g: N, C, H, W, OH, OW, KH, KW, SH,
    SW, DH, DW, PT, PL."""
    rows_at_once = DIRECT_DEPTHWISE_ROWS
    rows = symbolic.smax(1, symbolic.smin(g["OH"], DEPTHWISE_ITEM_FLOATS // g["OW"]))
    if symbolic.symbols([rows, g["OH"]]):   # a dynamic model: whole row groups, never more rows than OH
        rows = symbolic.smin(g["OH"], symbolic.smax(rows_at_once, rows // rows_at_once * rows_at_once))
    elif rows < g["OH"]:
        rows = max(rows_at_once, rows // rows_at_once * rows_at_once)
    chunks = symbolic.ceildiv(g["OH"], rows)
    tiling = dict(N=g["N"], C=g["C"], H=g["H"], W=g["W"], OH=g["OH"], OW=g["OW"], PT=g["PT"], PL=g["PL"], R=rows,
                  chunks=chunks)
    params = {k: g[k] for k in ("KH", "KW", "SH", "SW", "DH", "DW", "PL")}
    # sliding along the rows shifts vectors by each tap's column offset d = kw*DW - PL (stride 1) or
    # by d's floor half in the even or odd columns (stride 2), by at most 15 lanes either way; other
    # pads read every tap with masked loads
    offsets = [kw * g["DW"] - g["PL"] for kw in range(g["KW"])]
    shifts = offsets if g["SW"] == 1 else [d // 2 for d in offsets]
    params["sliding"] = all(-16 < d < 16 for d in shifts)
    # stride 2 reading ahead carries two more vectors per input row: two output rows at a time
    params["forward"] = g["SW"] == 2 and params["sliding"] and max(shifts) > 0
    if params["forward"]:
        rows_at_once = 2
    what = "MaxPool (direct" if pool else "Conv (depthwise, direct"
    params.update(summary=f"{what}, {'sliding' if params['sliding'] else 'masked loads'}) "
                          f"{g['KH']}x{g['KW']}, strides {g['SH']}x{g['SW']}, dilations {g['DH']}x{g['DW']}"
                          f"{', bias' if bias else ''}; shapes from the tiling data",
                  bias=bias, pool=pool, rows_at_once=rows_at_once, y_slot=len(inputs), fields=list(tiling), act=act)
    items = g["N"] * g["C"] * chunks
    # a block carries DIRECT_WINDOW_BLOCK_WORK times the usual minimum: the kernel does about a
    # multiply-add per cycle, so the usual minimum is ~1 us of it, which cores claiming blocks
    # from one shared counter spend a good part of on the claim
    block_dim = common.block_dim_for(items, rows * g["OW"] * g["KH"] * g["KW"] // DIRECT_WINDOW_BLOCK_WORK)
    return KernelCall("kernels/dwconv_direct.c.j2", op_type, params, inputs, [output], block_dim=block_dim,
                      tiling=tiling)
