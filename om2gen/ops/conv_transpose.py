"""ConvTranspose (1-D, 2-D, 3-D): strides, pads, output_padding, output_shape, dilations, group,
auto_pad.

Lowered as a gather per output row: work item = one output row (n, m, od, oh), which gathers
the input rows (id, ih) that reach it through some kernel tap and scatters each input row's
columns into that one output row. Rows are owned by exactly one SPMD block, so no two blocks
ever write the same output element. Every rank is lowered as 3-D with leading singleton dims.
"""
from __future__ import annotations

from ..errors import ShapeError, UnsupportedOpError
from ..ir import symbolic
from ..ir.program import KernelCall
from . import common
from .conv import MAX_UNROLLED_COLS, as3, explicit_pads, kernel_columns, kernel_of, spatial_ints, spatial_rank
from .registry import Op, register


@register("ConvTranspose", since=1)
class ConvTranspose(Op):
    dynamic_shapes = True
    attrs = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "output_padding": None,
             "output_shape": None, "pads": None, "strides": None}

    def geometry(self, node, ins):
        x, w = ins[0], ins[1]
        r = spatial_rank(node, x)
        where = f"node {node.name!r} (ConvTranspose)"
        if len(w.shape) != r + 2:
            raise ShapeError(f"{where}: weight {list(w.shape)} does not fit input {list(x.shape)}")
        n, c = x.shape[:2]
        group = int(self.attr(node, "group"))
        if group <= 0 or w.shape[0] != c or c % group:
            raise ShapeError(f"{where}: input channels {c}, weight {list(w.shape)} and group {group} do not fit "
                             "(the weight is C x M/group x kernel)")
        mg = w.shape[1]
        sizes, kernel = list(x.shape[2:]), kernel_of(node, w, self.attr(node, "kernel_shape"))
        strides = spatial_ints(node, self.attr(node, "strides"), r, "strides", 1, minimum=1)
        dil = spatial_ints(node, self.attr(node, "dilations"), r, "dilations", 1, minimum=1)
        opad = spatial_ints(node, self.attr(node, "output_padding"), r, "output_padding", 0, minimum=0)
        full = [strides[i] * (sizes[i] - 1) + opad[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(r)]
        auto = self.attr(node, "auto_pad") or "NOTSET"
        if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
            raise UnsupportedOpError(f"{where}: auto_pad {auto!r} is not supported")
        out_shape = self.attr(node, "output_shape")
        if out_shape is not None and len(out_shape) > 0:
            if len(out_shape) not in (r, r + 2):
                raise ShapeError(f"{where}: output_shape {list(out_shape)} does not have {r} spatial dims")
            outs = [int(v) for v in list(out_shape)[-r:]]
        elif auto in ("SAME_UPPER", "SAME_LOWER"):
            outs = [sizes[i] * strides[i] for i in range(r)]
        else:
            outs = None
        if outs is not None and auto != "VALID":
            # pads follow from the requested size; the odd one goes to the end for SAME_UPPER
            begin = []
            for i in range(r):
                total = full[i] - outs[i]
                total = symbolic.smax(0, total) if isinstance(total, symbolic.Expr) else max(0, total)
                begin.append(total // 2 if auto == "SAME_UPPER" else total - total // 2)
        else:
            pads = [0] * (2 * r) if auto == "VALID" else explicit_pads(node, self.attr(node, "pads"), r)
            begin = pads[:r]
            if outs is None:
                outs = [full[i] - pads[i] - pads[r + i] for i in range(r)]
        if any(o <= 0 for o in outs):
            raise ShapeError(f"{where}: output would be empty ({outs})")
        (D, H, W), (KD, KH, KW), (OD, OH, OW) = as3(sizes, 1), as3(kernel, 1), as3(outs, 1)
        (SD, SH, SW), (DD, DH, DW), (PF, PT, PL) = as3(strides, 1), as3(dil, 1), as3(begin, 0)
        return dict(rank=r, N=n, C=c, M=mg * group, G=group, CG=c // group, MG=mg, D=D, H=H, W=W,
                    KD=KD, KH=KH, KW=KW, OD=OD, OH=OH, OW=OW, SD=SD, SH=SH, SW=SW, DD=DD, DH=DH, DW=DW,
                    PF=PF, PT=PT, PL=PL, out_spatial=outs,
                    note=f"{r}-D, group={group} strides={strides} dilations={dil} pads(begin)={begin} "
                         f"output_padding={opad}")

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        g = self.geometry(node, ins)
        return [common.out(ins[0].dtype, (g["N"], g["M"], *g["out_spatial"]))]

    def lower(self, node, ins, outs, ctx):
        g = self.geometry(node, ins)
        bias = len(ins) > 2 and ins[2] is not None
        # Per kernel column kw: input columns [lo, hi) land on output column iw*SW + off inside [0, OW).
        cols = kernel_columns(g["KW"], g["DW"], g["PL"], g["SW"], g["OW"], g["W"])
        params = {k: v for k, v in g.items() if k not in ("out_spatial", "note")}
        params.update(summary=f"ConvTranspose: {ins[0].describe()} * {ins[1].describe()} -> {outs[0].describe()}",
                      notes=[g["note"]], bias=bias, cols=cols, unroll=g["KW"] <= MAX_UNROLLED_COLS)
        rows = g["N"] * g["M"] * g["OD"] * g["OH"]
        work = g["W"] * g["CG"] * g["KD"] * g["KH"] * g["KW"] // max(1, g["SD"] * g["SH"]) + g["OW"]
        inputs = [ins[0].name, ins[1].name] + ([ins[2].name] if bias else [])
        return KernelCall("kernels/conv_transpose.c.j2", "ConvTranspose", params, inputs, [outs[0].name],
                          block_dim=common.block_dim_for(rows, work), tiling={"rows": rows})
