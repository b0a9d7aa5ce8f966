"""om2gen.FusedElementwise: a DAG of element-wise nodes evaluated per element in one kernel.

Element-wise fusion (om2gen/passes/fuse_elementwise.py) makes these nodes; a model cannot hold
one. Each step is the C expression its own op lowers to (ops/elementwise.py and the families that
use it), so the fused kernel computes what the separate kernels computed, without writing and
reading back the intermediates. The kernel source names op types only, not nodes, so that equal
chains (the GELU of every encoder layer) share one binary; the node's fused_from lists the nodes
(shown in the debug graph).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.program import KernelCall
from . import common
from .elementwise import dynamic_chunks, dynamic_dims
from .registry import OM2GEN_DOMAIN, REQUIRED, Op, register

OP_TYPE = "FusedElementwise"
DOMAIN = OM2GEN_DOMAIN
SPEC = "_fused"                 # node.attrs key of the FusedSpec
MAX_NAMED_OPS = 4               # op types spelled in a kernel's name
_ARG = {"in": "v", "lit": "c", "step": "t"}   # the C variable of each kind of step argument
# float math.h calls with a vectorizable version in om2/om2_vmath.h (the loop then runs in SIMD)
_VMATH = re.compile(r"\b(expf|erff|tanhf)\s*\(")


def vectorizable(expr: str) -> str:
    """The expression with om2_vmath.h's versions of the float functions it has."""
    return _VMATH.sub(lambda m: f"om2_{m.group(1)}(", expr)


@dataclass(frozen=True)
class Operand:
    """An input of a fused kernel: `name`'s buffer read at offset + sum_d i_d * strides[d] for the
    index i over the iteration shape (0 repeats, as broadcasting does)."""
    name: str
    strides: tuple[int, ...]
    offset: int = 0
    via: tuple[str, ...] = ()   # absorbed data-movement nodes it is read through (source first)


@dataclass(frozen=True)
class Step:
    node: str                   # the ONNX node it computes
    op_type: str
    expr: str                   # C expression over x0..x{n-1}
    args: tuple[tuple[str, int], ...]   # ("in", operand), ("lit", literal) or ("step", earlier step) index
    in_ctypes: tuple[str, ...]
    out_ctype: str
    output: str                 # the value it computes
    dtype: str                  # its dtype name
    shape: tuple[int, ...]      # its shape (a written step has the iteration shape's element count)


@dataclass(frozen=True)
class FusedSpec:
    shape: tuple[int, ...]      # the iteration shape
    operands: tuple[Operand, ...]
    literals: tuple[tuple[str, str], ...]   # (C type, C literal): one-element constants, spelled inline
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]    # step indices written out, in the node's output order


@register(OP_TYPE, since=1, domain=DOMAIN)
class FusedElementwise(Op):
    attrs = {SPEC: REQUIRED}

    def spec(self, node) -> FusedSpec:
        spec = node.attrs.get(SPEC)
        if not isinstance(spec, FusedSpec):
            raise UnsupportedOpError(f"node {node.name!r}: {DOMAIN}.{OP_TYPE} is om2gen's own fused operator, made "
                                     "while compiling; a model cannot contain it")
        return spec

    def infer(self, node, ins):
        spec = self.spec(node)
        return [common.out(dtypes.BY_NAME[spec.steps[i].dtype], spec.steps[i].shape) for i in spec.outputs]

    def lower(self, node, ins, outs, ctx):
        spec = self.spec(node)
        shape = spec.shape
        if not symbolic.is_static([shape, [o.strides for o in spec.operands]]):
            return self._lower_dynamic(spec, ins, outs)
        # the outputs are contiguous over any merge of dims: only the operands decide the merging
        dims, strides = common.collapse(shape, [list(o.strides) for o in spec.operands])
        inner = dims[-1]
        rows = common.prod(dims[:-1])
        size = rows * inner
        # split long rows into chunks so that a single big row still spreads across cores
        want = common.block_dim_for(size)
        chunks = 1 if rows >= want else max(1, min(want // max(rows, 1), inner // 1024 or 1))
        chunk_len = -(-inner // chunks)
        chunks = -(-inner // chunk_len)
        items = rows * chunks
        params = {
            "summary": f"{len(spec.steps)} fused element-wise ops ({', '.join(s.op_type for s in spec.steps)}) over "
                       f"[{','.join(str(d) for d in shape)}]",
            "operands": [{"ctype": v.dtype.c_type, "offset": o.offset, "inner_stride": s[-1]}
                         for o, v, s in zip(spec.operands, ins, strides)],
            "outer": [{"size": dims[i], "strides": [s[i] for s in strides], "read": any(s[i] for s in strides)}
                      for i in range(len(dims) - 2, -1, -1)],
            **_steps(spec),
            "inner": inner,
            "chunks": chunks,
            "chunk_len": chunk_len,
        }
        work = max(1, size // max(items, 1)) * len(spec.steps)
        # the node's inputs are its operands, renamed where the graph renamed them (each gear of a
        # gear model has its own values: frontend/multi_batch.py)
        return KernelCall("kernels/fused_elementwise.c.j2", _kernel_name(spec), params, [v.name for v in ins],
                          [v.name for v in outs], block_dim=common.block_dim_for(items, work), tiling={"items": items})

    def _lower_dynamic(self, spec: FusedSpec, ins, outs) -> KernelCall:
        """The same kernel for a dynamic model, as ops/elementwise.py's dynamic call: which dims are
        1 and which operands broadcast along a dim is decided at compile time (it holds at every
        size), every size and stride the run decides is a tiling field, and rows are cut into
        chunks. Dims are merged only where that holds at every size."""
        shape = spec.shape
        dims, strides = dynamic_dims(shape, [list(o.strides) for o in spec.operands])
        dims, strides = common.merge_dims(dims, strides, lambda a, b: symbolic.decided(lambda: a == b, False))
        tiling: dict = {}

        def field(value, key: str):
            return common.tiling_field(tiling, value, key)
        inner = dims[-1]
        chunk_len, chunks, items = dynamic_chunks(dims)
        params = {
            "summary": f"{len(spec.steps)} fused element-wise ops ({', '.join(s.op_type for s in spec.steps)}) over "
                       f"[{','.join(str(d) for d in shape)}] (dynamic: sizes from the tiling data)",
            "operands": [{"ctype": v.dtype.c_type, "offset": o.offset, "inner_stride": field(s[-1], f"s{k}_inner")}
                         for k, (o, v, s) in enumerate(zip(spec.operands, ins, strides))],
            "outer": [{"size": field(dims[i], f"d{i}"),
                       "strides": [field(s[i], f"s{k}_{i}") for k, s in enumerate(strides)],
                       "read": any(not (isinstance(s[i], int) and s[i] == 0) for s in strides)}
                      for i in range(len(dims) - 2, -1, -1)],
            **_steps(spec),
            "inner": field(inner, "inner"),
            "chunks": field(chunks, "chunks"),
            "chunk_len": chunk_len,
        }
        tiling = {"items": items, **tiling}
        params["tiling_fields"] = list(tiling)
        return KernelCall("kernels/fused_elementwise.c.j2", _kernel_name(spec), params, [v.name for v in ins],
                          [v.name for v in outs], block_dim=common.block_dim_for(items, chunk_len * len(spec.steps)),
                          tiling=tiling)


def _steps(spec: FusedSpec) -> dict:
    """The template parameters of the computation itself (the same for any shape)."""
    return {
        "literals": [{"ctype": t, "value": v} for t, v in spec.literals],
        "vmath": any(_VMATH.search(s.expr) or "om2_" in s.expr for s in spec.steps),
        "steps": [{"op_type": s.op_type, "expr": vectorizable(s.expr), "in_ctypes": list(s.in_ctypes),
                   "out_ctype": s.out_ctype, "args": [_ARG[kind] + str(i) for kind, i in s.args]} for s in spec.steps],
        "outputs": [{"ctype": spec.steps[i].out_ctype, "step": i} for i in spec.outputs],
    }


def _kernel_name(spec: FusedSpec) -> str:
    names = list(dict.fromkeys(s.op_type for s in spec.steps))
    return "Fused_" + "_".join(names[:MAX_NAMED_OPS]) + ("_etc" if len(names) > MAX_NAMED_OPS else "")
