"""The com.microsoft quantized element-wise and pooling ops ONNX Runtime's quantization tool
emits (QOperator format): QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool (int8 or uint8, per-tensor scales
and zero points, which must be constants).

Each follows ONNX Runtime's CPU arithmetic (MLAS), so that results equal its own:
- QLinearAdd (qladd_avx2.cpp): with rA = sA / sC, rB = sB / sC and the fixed part
  zC - (rA * zA + rB * zB) in float, c = round(fma(a, rA, fma(b, rB, fixed))); an operand that
  is one value over the innermost broadcast run is added to the fixed part (b * rB, no fma)
  instead, as ORT passes it to MLAS as a scalar. round is cvtps2dq's (half to even; beyond
  int32 the lowest value) and the result saturates.
- QLinearMul (qlmul.cpp): c = round((float)((a - zA) * (b - zB)) * (sA * sB / sC) + zC).
- QLinearSigmoid and QLinearLeakyRelu (qlinear_lookup_table.cc): a 256-entry table of every
  input value dequantized, mapped (Sigmoid by MLAS's rational approximation, with its fmas)
  and quantized as QuantizeLinear does, made at compile time; the kernel looks values up.
- QLinearConcat: an input whose scale and zero point differ from the output's is requantized
  (DequantizeLinear then QuantizeLinear: ORT's identity table), the others are copied.
- QLinearGlobalAveragePool (qlgavgpool.cpp): an exact int32 sum, then requantized.
- QLinearAveragePool (qlinear_pool.cc): dequantized, averaged in float (window order, divided
  by the count), then rounded as ORT's quantize_value does, round(y / s + z) saturated (not as
  QuantizeLinear, which adds z after rounding): expanded into DequantizeLinear, AveragePool, Div,
  Add, Round, Clip and Cast, which the element-wise fusion makes one kernel.
"""
from __future__ import annotations

import numpy as np

from ..codegen.literals import c_float
from ..errors import UnsupportedOpError
from ..ir.graph import Node, Value
from ..ir.program import Derived, KernelCall
from . import common
from .elementwise import elementwise_call
from .quantize import RANGES, clamp
from .registry import REQUIRED, Op, register

MS = "com.microsoft"
TYPES = ("int8", "uint8")
_CHUNK = 4096   # elements per work item of the lookup kernel


def scale_of(node: Node, v: Value | None, what: str) -> np.float32:
    return np.float32(common.const_ints_or_floats(node, v, what))


def zero_point_of(node: Node, v: Value | None, what: str) -> int:
    """A zero point input (absent: 0), a compile-time constant."""
    return 0 if v is None else int(common.const_ints_or_floats(node, v, what))


def saturate(dt: str, v: str) -> str:
    """C: float v (already holding the zero point) rounded half to even and saturated to dt, as
    cvtps2dq then the saturating packs do (a value beyond int32 becomes the lowest)."""
    lo, hi = (c_float(b) for b in RANGES[dt])
    ctype = {"int8": "int8_t", "uint8": "uint8_t"}[dt]
    return f"(({ctype})rintf(({v}) >= 0x1p31f ? {lo} : {clamp(v, lo, hi)}))"


def quantize_table(dt: str, y: np.ndarray, scale: np.float32, zp: int) -> np.ndarray:
    """y (float32) quantized as QuantizeLinear does it (ops/quantize.py)."""
    lo, hi = RANGES[dt]
    v = np.fmin(np.fmax(y / scale, np.float32(lo - zp)), np.float32(hi - zp))
    return (np.rint(v).astype(np.int32) + zp).astype(dt)


def table_inputs(dt: str) -> np.ndarray:
    """The 256 values of dt in the order of their bytes (what the lookup kernel indexes by)."""
    return np.arange(256, dtype=np.uint8).view(dt)


def _fma(a, b, c) -> np.ndarray:
    """fmaf in float32: the product is exact in float64, the sum rounds once there and once to
    float32 (a double rounding that can differ from fmaf only on a near-tie)."""
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(np.float32)


def mlas_logistic(x: np.ndarray) -> np.ndarray:
    """MLAS's logistic (logistic.cpp, its FMA3 kernel): a rational approximation on [-18, 18]
    (om2_mlas_logisticf in om2/om2_vmath.h is the kernels' version)."""
    a = (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
         2.48287947061529e-01)
    b = (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
         1.16817656904453e-01, 9.93151921023180e-01)
    v = np.fmin(np.fmax(x.astype(np.float32), np.float32(-18)), np.float32(18))
    v2 = v * v
    p = _fma(v2, np.float32(a[0]), np.float32(a[1]))
    for c in a[2:]:
        p = _fma(p, v2, np.float32(c))
    p = p * v
    q = _fma(v2, np.float32(b[0]), np.float32(b[1]))
    for c in b[2:]:
        q = _fma(q, v2, np.float32(c))
    return np.maximum(p / q + np.float32(0.5), np.float32(0)).astype(np.float32)   # no clamp at 1, as MLAS


def check_type(node: Node, x: Value) -> None:
    if x.dtype.name not in TYPES:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): input {x.name!r} is {x.dtype.name}; "
                                 f"om2gen compiles {node.op_type} for {', '.join(TYPES)}")


@register("QLinearAdd", "QLinearMul", since=1, domain=MS)
class QLinearBinary(Op):
    """Inputs A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point."""

    def infer(self, node, ins):
        a, b = ins[0], ins[3]
        check_type(node, a)
        if b.dtype != a.dtype:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): A is {a.dtype.name} but B is "
                                     f"{b.dtype.name}; both must have one type")
        return [common.out(a.dtype, common.broadcast_shape(node, a.shape, b.shape))]

    def lower(self, node, ins, outs, ctx):
        a, b, out = ins[0], ins[3], outs[0]
        get = (lambda i: ins[i] if i < len(ins) else None)
        sa, sb, sc = (scale_of(node, get(i), n) for i, n in ((1, "A_scale"), (4, "B_scale"), (6, "C_scale")))
        za, zb, zc = (zero_point_of(node, get(i), n) for i, n in ((2, "A_zero_point"), (5, "B_zero_point"),
                                                                  (7, "C_zero_point")))
        dt = out.dtype.name
        if node.op_type == "QLinearMul":
            ratio = np.float32(sa * sb) / sc
            v = f"(float)(((int32_t)x0 - {za}) * ((int32_t)x1 - {zb})) * {c_float(ratio)} + {c_float(zc)}"
            return elementwise_call(node, f"QLinearMul_{dt}", [a, b], out, saturate(dt, v))
        ra, rb = sa / sc, sb / sc
        fixed = np.float32(zc) - (ra * np.float32(za) + rb * np.float32(zb))
        scalar = self.scalar_operand(a, b, out)
        if scalar == 1:
            v = f"fmaf((float)x0, {c_float(ra)}, {c_float(fixed)} + (float)x1 * {c_float(rb)})"
        elif scalar == 0:
            v = f"fmaf((float)x1, {c_float(rb)}, {c_float(fixed)} + (float)x0 * {c_float(ra)})"
        else:
            v = f"fmaf((float)x0, {c_float(ra)}, fmaf((float)x1, {c_float(rb)}, {c_float(fixed)}))"
        return elementwise_call(node, f"QLinearAdd_{dt}", [a, b], out, saturate(dt, v))

    @staticmethod
    def scalar_operand(a: Value, b: Value, out: Value) -> int | None:
        """Which operand (0: A, 1: B) is one value over the innermost run ORT's broadcasting hands
        MLAS (None: both vary along it): the collapsed iteration's inner dim, as the kernel's."""
        strides = [common.broadcast_strides(v.shape, out.shape) for v in (a, b)]
        _, strides = common.collapse(out.shape, strides)
        inner = [s[-1] for s in strides]
        if inner[1] == 0:
            return 1
        return 0 if inner[0] == 0 else None


class QLinearLookup(Op):
    """Inputs X, X_scale, X_zero_point, Y_scale, Y_zero_point: y = quantize(f(dequantize(x)))
    through a table of the 256 results."""

    def function(self, node, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def infer(self, node, ins):
        check_type(node, ins[0])
        return [common.out(ins[0].dtype, ins[0].shape)]

    def lower(self, node, ins, outs, ctx):
        x, dt = ins[0], ins[0].dtype.name
        get = (lambda i: ins[i] if i < len(ins) else None)
        sx, sy = scale_of(node, get(1), "X_scale"), scale_of(node, get(3), "Y_scale")
        zx, zy = zero_point_of(node, get(2), "X_zero_point"), zero_point_of(node, get(4), "Y_zero_point")
        dequantized = (table_inputs(dt).astype(np.int32) - zx).astype(np.float32) * sx
        table = quantize_table(dt, self.function(node, dequantized), sy, zy).view(np.uint8)
        sources = tuple(v.name for v in ins[1:] if v is not None)
        n = x.size
        items = -(-n // _CHUNK)
        params = {"summary": f"{node.op_type}: {x.describe()} -> {outs[0].describe()} (a 256-entry table)",
                  "chunk": _CHUNK, "n": n}
        return KernelCall("kernels/lookup_u8.c.j2", f"{node.op_type}_{dt}", params,
                          [x.name, Derived(table, sources, f"{node.op_type} {node.name!r}'s table of results")],
                          [outs[0].name], block_dim=common.block_dim_for(items, _CHUNK), tiling={"items": items})


@register("QLinearSigmoid", since=1, domain=MS)
class QLinearSigmoid(QLinearLookup):
    def function(self, node, x):
        return mlas_logistic(x)


@register("QLinearLeakyRelu", since=1, domain=MS)
class QLinearLeakyRelu(QLinearLookup):
    attrs = {"alpha": 0.01}

    def function(self, node, x):
        alpha = np.float32(self.attr(node, "alpha"))
        return np.where(x >= 0, x, x * alpha).astype(np.float32)


def _requantize(node: Node, x: str, x_scale: str, x_zp: str, y_scale: str, y_zp: str, out: str, tag: str):
    """Nodes computing out = QuantizeLinear(DequantizeLinear(x)): ORT's identity table."""
    f = f"{out}__{tag}_dq"
    return [Node(f"{node.name}/{tag}_dq", "DequantizeLinear", [x, x_scale, x_zp], [f], opset=13),
            Node(f"{node.name}/{tag}_q", "QuantizeLinear", [f, y_scale, y_zp], [out], opset=13)]


@register("QLinearConcat", since=1, domain=MS)
class QLinearConcat(Op):
    """Inputs Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input; attribute axis."""
    attrs = {"axis": REQUIRED}

    def expand(self, node, ins):
        triples = [node.inputs[i:i + 3] for i in range(2, len(node.inputs), 3)]
        values = [ins[i:i + 3] for i in range(2, len(ins), 3)]
        if not triples or any(len(t) != 3 for t in triples):
            raise UnsupportedOpError(f"node {node.name!r} (QLinearConcat): inputs must be Y_scale, Y_zero_point and "
                                     f"(X, X_scale, X_zero_point) for each input; got {len(node.inputs)} inputs")
        sy, zy = scale_of(node, ins[0], "Y_scale"), zero_point_of(node, ins[1], "Y_zero_point")
        nodes, parts = [], []
        for k, ((x, s, z), (xv, sv, zv)) in enumerate(zip(triples, values)):
            check_type(node, xv)
            if scale_of(node, sv, "X_scale") == sy and zero_point_of(node, zv, "X_zero_point") == zy:
                parts.append(x)
                continue
            out = f"{node.outputs[0]}__in{k}"
            nodes += _requantize(node, x, s, z, node.inputs[0], node.inputs[1], out, f"in{k}")
            parts.append(out)
        return nodes + [Node(node.name, "Concat", parts, list(node.outputs), {"axis": self.attr(node, "axis")},
                             opset=13)]


@register("QLinearAveragePool", since=1, domain=MS)
class QLinearAveragePool(Op):
    """Inputs X, x_scale, x_zero_point, y_scale, y_zero_point; AveragePool's attributes and
    channels_last (0 only: NCHW)."""
    attrs = {"auto_pad": "NOTSET", "ceil_mode": 0, "channels_last": 0, "count_include_pad": 0,
             "kernel_shape": REQUIRED, "pads": None, "strides": None}

    def expand(self, node, ins):
        check_type(node, ins[0])
        if self.attr(node, "channels_last"):
            raise UnsupportedOpError(f"node {node.name!r} (QLinearAveragePool): channels_last=1 is not supported; "
                                     "quantize the model in NCHW (the quantization tool's default)")
        pool = {k: self.attr(node, k) for k in ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads",
                                                "strides") if self.attr(node, k) is not None}

        i, out, dt = node.input, node.outputs[0], ins[0].dtype.name
        zy = zero_point_of(node, ins[4] if len(ins) > 4 else None, "y_zero_point")
        lo, hi = RANGES[dt]
        consts = {"zy": zy, "lo": lo, "hi": hi}
        name = {k: f"{out}__pool_{k}" for k in ("dq", "f", "scaled", "shifted", "rounded", "clipped", *consts)}
        nodes = [Node(f"{node.name}/{k}", "Constant", [], [name[k]], {"value": np.array(v, np.float32)}, opset=13)
                 for k, v in consts.items()]
        return nodes + [
            Node(f"{node.name}/dq", "DequantizeLinear", [i(0), i(1), i(2)], [name["dq"]], opset=13),
            Node(f"{node.name}/pool", "AveragePool", [name["dq"]], [name["f"]], pool, opset=19),
            Node(f"{node.name}/scale", "Div", [name["f"], i(3)], [name["scaled"]], opset=14),
            Node(f"{node.name}/shift", "Add", [name["scaled"], name["zy"]], [name["shifted"]], opset=14),
            Node(f"{node.name}/round", "Round", [name["shifted"]], [name["rounded"]], opset=11),
            Node(f"{node.name}/clip", "Clip", [name["rounded"], name["lo"], name["hi"]], [name["clipped"]], opset=13),
            Node(f"{node.name}/cast", "Cast", [name["clipped"]], [out], {"to": ins[0].dtype.onnx}, opset=13)]


@register("QLinearGlobalAveragePool", since=1, domain=MS)
class QLinearGlobalAveragePool(Op):
    """Inputs X, x_scale, x_zero_point, y_scale, y_zero_point; channels_last 0 only (NCHW)."""
    attrs = {"channels_last": 0}

    def infer(self, node, ins):
        x = ins[0]
        check_type(node, x)
        if self.attr(node, "channels_last"):
            raise UnsupportedOpError(f"node {node.name!r} (QLinearGlobalAveragePool): channels_last=1 is not "
                                     "supported; quantize the model in NCHW (the quantization tool's default)")
        if len(x.shape) < 3:
            raise UnsupportedOpError(f"node {node.name!r} (QLinearGlobalAveragePool): input {list(x.shape)} has no "
                                     "spatial dims")
        return [common.out(x.dtype, tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2))]

    def lower(self, node, ins, outs, ctx):
        x, dt = ins[0], ins[0].dtype.name
        get = (lambda i: ins[i] if i < len(ins) else None)
        sx, sy = scale_of(node, get(1), "x_scale"), scale_of(node, get(3), "y_scale")
        zx, zy = zero_point_of(node, get(2), "x_zero_point"), zero_point_of(node, get(4), "y_zero_point")
        planes, size = x.shape[0] * x.shape[1], common.prod(x.shape[2:])
        lo, hi = RANGES[dt]
        params = {"summary": f"QLinearGlobalAveragePool: {x.describe()} -> {outs[0].describe()}",
                  "ctype": x.dtype.c_type, "len": size, "bias": -zx * size,
                  "scale": c_float(sx / (sy * np.float32(size))), "lo": c_float(lo - zy), "hi": c_float(hi - zy),
                  "zero_point": zy}
        return KernelCall("kernels/qlinear_global_avgpool.c.j2", f"QLinearGlobalAveragePool_{dt}", params, [x.name],
                          [outs[0].name], block_dim=common.block_dim_for(planes, size), tiling={"planes": planes})
