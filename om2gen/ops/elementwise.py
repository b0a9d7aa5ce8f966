"""Element-wise operators with numpy broadcasting: one template, an expression per op."""
from __future__ import annotations

import numpy as np

from ..advice import value_option
from ..codegen.literals import c_float
from ..errors import ShapeError, UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.graph import Node, Value
from ..ir.program import Alias, KernelCall
from . import common
from .registry import Op, register

# C expressions over x0, x1, ... per op and dtype family ("f" float, "i" integer).
_BINARY = {
    "Add": {"f": "x0 + x1", "i": "x0 + x1"},
    "Sub": {"f": "x0 - x1", "i": "x0 - x1"},
    "Mul": {"f": "x0 * x1", "i": "x0 * x1"},
    "Div": {"f": "x0 / x1", "i": "x1 == 0 ? 0 : x0 / x1"},
}

_UNARY_F32 = {
    "Relu": "x0 > 0.0f ? x0 : 0.0f",
    # MLAS's rational approximations (om2/om2_vmath.h), so that results equal ORT's bit for bit
    "Sigmoid": "om2_mlas_logisticf(x0)",
    "Tanh": "om2_mlas_tanhf(x0)",
}

_INT_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
_FLOAT_TYPES = {"float32", "float64"}


def elementwise_call(node: Node, name: str, ins: list[Value], out: Value, expr: str) -> KernelCall:
    """A KernelCall of templates/kernels/elementwise.c.j2 computing `expr` with broadcasting."""
    if not all(v.is_static for v in [*ins, out]):
        return _dynamic_elementwise_call(node, name, ins, out, expr)
    strides = [common.broadcast_strides(v.shape, out.shape) for v in ins]
    dims, strides = common.collapse(out.shape, strides)
    inner = dims[-1]
    rows = 1
    for d in dims[:-1]:
        rows *= d
    # Split long rows into chunks so that a single big row still spreads across cores.
    want = common.block_dim_for(out.size)
    chunks = 1 if rows >= want else max(1, min(want // max(rows, 1), inner // 1024 or 1))
    chunk_len = -(-inner // chunks)
    chunks = -(-inner // chunk_len)
    outer = [{"size": dims[i], "strides": [s[i] for s in strides]} for i in range(len(dims) - 2, -1, -1)]
    items = rows * chunks
    params = {
        "summary": f"{node.op_type}: {' , '.join(v.describe() for v in ins)} -> {out.describe()}",
        "expr": expr,
        "ins": [{"ctype": v.dtype.c_type, "inner_stride": s[-1]} for v, s in zip(ins, strides)],
        "out_ctype": out.dtype.c_type,
        "outer": outer,
        "inner": inner,
        "chunks": chunks,
        "chunk_len": chunk_len,
    }
    return KernelCall("kernels/elementwise.c.j2", name, params, [v.name for v in ins], [out.name],
                      block_dim=common.block_dim_for(items, max(1, out.size // max(items, 1))), tiling={"items": items})


DYNAMIC_CHUNK = 4096    # elements per work item of a dynamic element-wise kernel's rows


def dynamic_dims(shape, strides: list[list]) -> tuple[list, list[list]]:
    """The loop dims of a dynamic element-wise kernel: the iteration shape without the dims that
    are 1 at every size, with each operand's strides over them."""
    rank = len(shape)
    keep = [i for i, d in enumerate(shape) if not (isinstance(d, int) and d == 1)] or [rank - 1] if rank else []
    return [shape[i] for i in keep] or [1], [[s[i] for i in keep] or [0] for s in strides]


def dynamic_chunks(dims) -> tuple[int, object, object]:
    """(chunk_len, chunks per row, work items) of a dynamic element-wise kernel over `dims`: rows
    cut into chunks of DYNAMIC_CHUNK elements, so one long row still spreads."""
    inner = dims[-1]
    chunk_len = DYNAMIC_CHUNK if isinstance(inner, symbolic.Expr) else max(1, min(inner, DYNAMIC_CHUNK))
    chunks = symbolic.ceildiv(inner, chunk_len)
    return chunk_len, chunks, common.prod(dims[:-1]) * chunks


def _dynamic_elementwise_call(node: Node, name: str, ins: list[Value], out: Value, expr: str) -> KernelCall:
    """The same kernel for a dynamic model (docs/dynamic-shapes.md): what is decided at compile
    time is what holds at every size -- which operand dims broadcast (a dim of 1 against a
    larger one) and so which operands walk the inner dim -- and every size and stride is a
    tiling field the run computes, read as tiling->name where the static kernel has a number.
    Rows are cut into chunks of DYNAMIC_CHUNK elements, so one long row still spreads."""
    dims, strides = dynamic_dims(out.shape, [common.broadcast_strides(v.shape, out.shape) for v in ins])
    tiling: dict = {}

    def field(value, key: str):
        return common.tiling_field(tiling, value, key)
    inner = dims[-1]
    chunk_len, chunks, items = dynamic_chunks(dims)
    outer = [{"size": field(dims[i], f"d{i}"), "strides": [field(s[i], f"s{k}_{i}") for k, s in enumerate(strides)]}
             for i in range(len(dims) - 2, -1, -1)]
    params = {
        "summary": f"{node.op_type}: {' , '.join(v.describe() for v in ins)} -> {out.describe()} (dynamic: sizes "
                   "from the tiling data)",
        "expr": expr,
        "ins": [{"ctype": v.dtype.c_type, "inner_stride": 0 if s[-1] == 0 else 1} for v, s in zip(ins, strides)],
        "out_ctype": out.dtype.c_type, "outer": outer, "inner": field(inner, "inner"),
        "chunks": field(chunks, "chunks"), "chunk_len": chunk_len,
    }
    tiling = {"items": items, **tiling}
    params["tiling_fields"] = list(tiling)
    return KernelCall("kernels/elementwise.c.j2", name, params, [v.name for v in ins], [out.name],
                      block_dim=common.block_dim_for(items, chunk_len), tiling=tiling)



@register("Add", "Sub", "Mul", "Div", since=7)
class Binary(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        a, b = ins
        if a.dtype != b.dtype:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): inputs have different dtypes "
                                     f"{a.dtype.name} and {b.dtype.name}")
        return [common.out(a.dtype, common.broadcast_shape(node, a.shape, b.shape))]

    def lower(self, node, ins, outs, ctx):
        dt = ins[0].dtype.name
        family = "f" if dt in _FLOAT_TYPES else "i" if dt in _INT_TYPES else None
        if family is None:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): dtype {dt} is not supported "
                                     f"({', '.join(sorted(_FLOAT_TYPES | _INT_TYPES))})")
        return elementwise_call(node, node.op_type, self.operands(node, ins), outs[0],
                                _BINARY[node.op_type][family])

    def operands(self, node, ins):
        return ins


@register("Add", "Sub", "Mul", "Div", since=1)
class BinaryLegacy(Binary):
    """Opsets 1-6: no implicit broadcasting; with broadcast=1, B is aligned to A at `axis`
    (default: its trailing dims)."""
    attrs = {"broadcast": 0, "axis": None}

    def operands(self, node, ins):
        a, b = ins
        if not self.attr(node, "broadcast"):
            if a.shape != b.shape:
                raise ShapeError(f"node {node.name!r} ({node.op_type}-{node.opset}): shapes {list(a.shape)} and "
                                 f"{list(b.shape)} differ and broadcast=0")
            return ins
        axis = self.attr(node, "axis")
        axis = len(a.shape) - len(b.shape) if axis is None else common.axis(node, axis, len(a.shape))
        shape = (1,) * axis + b.shape + (1,) * (len(a.shape) - axis - len(b.shape))
        return [a, Value(b.name, b.dtype, shape, b.const)]

    def infer(self, node, ins):
        a, b = self.operands(node, ins)
        return super().infer(node, [a, b])


@register("Relu", "Sigmoid", "Tanh", since=6)
class UnaryF32(Op):
    dynamic_shapes = True

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        return elementwise_call(node, node.op_type, ins, outs[0], _UNARY_F32[node.op_type])


@register("Clip", since=6)
class ClipAttr(Op):
    """Clip-6: bounds are attributes."""
    dynamic_shapes = True
    attrs = {"min": float(-3.4028234663852886e38), "max": float(3.4028234663852886e38)}

    def infer(self, node, ins):
        common.require_float(node, ins[0])
        return [common.out(ins[0].dtype, ins[0].shape)]

    def bounds(self, node, ins):
        return self.attr(node, "min"), self.attr(node, "max")

    def lower(self, node, ins, outs, ctx):
        lo, hi = self.bounds(node, ins)
        expr = f"fminf(fmaxf(x0, {c_float(lo)}), {c_float(hi)})"
        return elementwise_call(node, "Clip", ins[:1], outs[0], expr)


@register("Clip", since=11)
class ClipInputs(ClipAttr):
    """Clip-11+: bounds are optional inputs, constant (folded into the kernel) or tensors."""
    attrs = {}

    def infer(self, node, ins):
        x = ins[0]
        if x.dtype.name not in _FLOAT_TYPES | _INT_TYPES:
            raise UnsupportedOpError(f"node {node.name!r} (Clip): dtype {x.dtype.name} is not supported")
        return [common.out(x.dtype, x.shape)]

    def lower(self, node, ins, outs, ctx):
        x = ins[0]
        operands, expr = [x], "x0"
        for i, fn in ((1, "max"), (2, "min")):
            v = ins[i] if i < len(ins) else None
            if v is None:
                continue
            if v.is_const and x.dtype.name == "float32":
                bound = c_float(common.const_ints_or_floats(node, v, "bound"))
            else:
                operands.append(Value(v.name, v.dtype, ()))  # a scalar tensor, read at run time
                bound = f"x{len(operands) - 1}"
            expr = f"({expr} {'<' if fn == 'max' else '>'} {bound} ? {bound} : {expr})"
        return elementwise_call(node, "Clip", operands, outs[0], expr)


@register("Identity", "Dropout", since=1)
class IdentityLike(Op):
    """Identity, and Dropout at inference (mask output, if requested, is all true)."""
    dynamic_shapes = True

    def infer(self, node, ins):
        # Identity passes a constant on (it is never folded: it may be a graph output of its own)
        outs = [Value("", ins[0].dtype, ins[0].shape, ins[0].const)]
        if node.op_type != "Dropout":
            return outs
        training = ins[2] if len(ins) > 2 else None
        if training is not None and (not training.is_const or bool(np.asarray(training.const).reshape(-1)[0])):
            raise UnsupportedOpError(f"node {node.name!r} (Dropout): training_mode may be true; om2gen compiles "
                                     f"inference graphs (export in eval mode, or freeze it: {value_option(training.name, False)})")
        if node.attrs.get("is_test", 1) == 0 and node.opset < 7:
            raise UnsupportedOpError(f"node {node.name!r} (Dropout-{node.opset}): is_test=0 is training mode")
        if len(node.outputs) > 1 and node.outputs[1]:
            # in inference the mask keeps everything
            mask = np.ones(ins[0].shape, dtype=bool)
            outs.append(Value("", dtypes.BY_NAME["bool"], ins[0].shape, mask))
        return outs

    def lower(self, node, ins, outs, ctx):
        return Alias(ins[0].name)


def copy_call(src: Value, dst: Value) -> KernelCall:
    """A plain copy of the bytes (used where a graph output must get its own buffer); the two
    may differ in shape (e.g. a Reshape of an input), so both are seen flat."""
    flat_src = Value(src.name, src.dtype, (src.size,))
    flat_dst = Value(dst.name, dst.dtype, (dst.size,))
    return elementwise_call(Node(dst.name, "Copy", [src.name], [dst.name]), "Copy", [flat_src], flat_dst, "x0")


