"""NonZero: the coordinates of the non-zero elements, int64[rank, count] in row-major order.

The count is a data-dependent dim (docs/dynamic-shapes.md): planned at its most (every element
non-zero), written at run time into the symbols table by the kernel, and read there by the
kernels after it and, after the run, by the model library to report the output's dims. Two SPMD
passes (templates/kernels/nonzero.c.j2): each block counts its share, then each block places its
coordinates after those of the blocks before it.
"""
from __future__ import annotations

from ..errors import UnsupportedOpError
from ..ir import dtypes
from ..ir.graph import Value
from ..ir.program import KernelCall
from . import common
from .registry import Op, register

_TYPES = {"bool", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}


@register("NonZero", since=9)
class NonZero(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        x = ins[0]
        if x.dtype.name not in _TYPES:
            raise UnsupportedOpError(f"node {node.name!r} (NonZero): input dtype {x.dtype.name} is not supported "
                                     f"(supported: {', '.join(sorted(_TYPES))})")
        rank = max(1, len(x.shape))     # a scalar is counted as one element of rank 1 (ONNX Runtime)
        return [common.out(dtypes.INT64, (rank, common.count_dim(node, x.size)))]

    def lower(self, node, ins, outs, ctx):
        x, y = ins[0], outs[0]
        count = y.shape[1]
        dims = list(x.shape) or [1]
        blocks = common.block_dim_for(x.size)
        most = common.MAX_BLOCKS if isinstance(blocks, common.symbolic.Expr) else blocks
        counts = Value(f"{node.name}::block_counts", dtypes.INT64, (most,))
        tiling = {"items": x.size}
        params = {"t": x.dtype.c_type, "rank": len(dims),
                  "dims": [common.tiling_field(tiling, d, f"dim{i}") for i, d in enumerate(dims)]}
        summary = f"NonZero: {x.describe()} -> {y.describe()}"
        first = KernelCall("kernels/nonzero.c.j2", "NonZero_count",
                           {**params, "phase": "count", "summary": f"{summary} (pass 1: count per block)",
                            "tiling_fields": ["items"], "dims": []},
                           [x.name], [counts.name], block_dim=blocks, tiling={"items": x.size}, temps=[counts])
        second = KernelCall("kernels/nonzero.c.j2", "NonZero", {**params, "phase": "write", "summary": summary,
                                                                "tiling_fields": list(tiling)},
                            [x.name, counts.name], [y.name], block_dim=blocks, tiling=tiling,
                            count_symbol=common.symbolic.symbols(count).pop().name)
        return [first, second]
