"""GE IR graph → Graph: a serialized ``ge.proto.ModelDef`` (binary or protobuf text format).

Each GE op is translated into ONNX-equivalent IR nodes (ONNX op types, attributes and opset 17
semantics), so op semantics, shape inference, lowering and code generation are exactly the
ONNX path's. The translation runs in topological order and infers shapes op by op, so ops that
need their inputs' ranks or shapes (BatchMatMul's adj_x*, FlattenV2) can use them.

Conventions (GE_FACTS §2): ``OpDef.input`` holds "op_name:index" data edges and "^op_name" (or
"op_name:-1") control edges, which are ignored. The value op X's output i produces is named
"X:i", except a Data op's value, which is the graph input and is named after the op. Data ops
are the graph inputs (shape from output_desc, or pinned with input_shapes), Const/Constant ops
are constants (attr "value": a TensorDef), NetOutput's inputs are the graph outputs.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..advice import shape_option
from ..errors import ModelError, ShapeError, UnsupportedOpError
from ..ir import dtypes
from ..ir.graph import Graph, Node, Value
from . import limits
from . import pins as pins_mod
from .onnx_import import _infer_nodes

OPSET = 17
TEXT_SUFFIXES = (".pbtxt", ".txt", ".prototxt")
BY_GE_PROTO = {d.ge_proto: d for d in dtypes.BY_NAME.values()}


# --------------------------------------------------------------------------------------------
# reading the ModelDef

def load_model_def(src):
    """Path, bytes or a ModelDef → (ModelDef, raw bytes, where). Binary is tried first unless the
    file name says text; text format (google.protobuf.text_format) is the fallback."""
    from google.protobuf import text_format
    from google.protobuf.message import DecodeError

    from ..formats.om import proto

    if isinstance(src, proto.ModelDef):
        return src, src.SerializeToString(), "model"
    if isinstance(src, (bytes, bytearray, memoryview)):
        data, where, text_first = bytes(src), "GE model bytes", False
    else:
        path = Path(src)
        if not path.is_file():
            raise ModelError(f"{path}: no such model file")
        data, where, text_first = path.read_bytes(), str(path), path.suffix.lower() in TEXT_SUFFIXES

    def binary():
        m = proto.ModelDef()
        try:
            m.ParseFromString(data)
        except (DecodeError, Exception):  # noqa: BLE001 - upb raises plain exceptions too
            return None, "not a binary ModelDef"
        return (m, "") if m.graph and m.graph[0].op else (None, "the binary parse holds no graph with ops")

    def text():
        m = proto.ModelDef()
        try:
            text_format.Parse(data.decode("utf-8"), m, descriptor_pool=proto.POOL)
        except (UnicodeDecodeError, text_format.ParseError) as exc:
            return None, f"not a text ModelDef ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        return (m, "") if m.graph and m.graph[0].op else (None, "the text parse holds no graph with ops")

    reasons = []
    for attempt in ((text, binary) if text_first else (binary, text)):
        model, why = attempt()
        if model is not None:
            return model, data, where
        reasons.append(why)
    raise ModelError(f"{where}: not a GE IR graph (ge.proto.ModelDef, binary or text format): "
                     f"{'; '.join(reasons)}")


def _attr_value(a):
    kind = a.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("s", "bt", "expression"):
        v = getattr(a, kind)
        return v.decode("utf-8", "replace") if kind == "s" else v
    if kind in ("i", "f", "b", "dt"):
        return getattr(a, kind)
    if kind == "t":
        return _tensor(a.t, "attr")
    if kind == "list":
        lv = a.list
        for f in ("i", "f", "b", "dt"):
            if len(getattr(lv, f)):
                return list(getattr(lv, f))
        if len(lv.s):
            return [s.decode("utf-8", "replace") for s in lv.s]
        if len(lv.t):
            return [_tensor(t, "attr") for t in lv.t]
        return []
    if kind == "list_list_int":
        return [list(x.list_i) for x in a.list_list_int.list_list_i]
    return getattr(a, kind)


def _dtype(ge_proto_dtype: int, where: str) -> dtypes.DType:
    try:
        return BY_GE_PROTO[ge_proto_dtype]
    except KeyError:
        from ..formats.om import proto
        try:
            name = proto.DataType.Name(ge_proto_dtype)
        except ValueError:
            name = str(ge_proto_dtype)
        raise UnsupportedOpError(f"{where}: data type {name} is not supported by om2gen "
                                 f"(supported: {', '.join(d.ge_string for d in BY_GE_PROTO.values())})") from None


def _tensor(t, where: str) -> np.ndarray:
    dt = _dtype(t.desc.dtype, where)
    shape = tuple(int(d) for d in t.desc.shape.dim)
    count = int(np.prod(shape, dtype=np.int64))
    if len(t.data) != count * dt.itemsize:
        raise ModelError(f"{where}: the tensor holds {len(t.data)} bytes but its descriptor "
                         f"({dt.ge_string}{list(shape)}) needs {count * dt.itemsize}")
    return np.frombuffer(t.data, dtype=dt.np).reshape(shape).copy()


# --------------------------------------------------------------------------------------------
# the translation

class _Ctx:
    """One GE op being translated: its attrs, resolved input value names, and helpers to emit
    ONNX nodes and constants into the graph."""

    def __init__(self, imp: "_Importer", op, inputs: list[str]):
        self.imp, self.op, self.inputs = imp, op, inputs
        self.attrs = {k: _attr_value(v) for k, v in op.attr.items()}
        self.nodes: list[Node] = []
        self.outputs: dict[int, str] = {}
        self._n = 0

    @property
    def name(self) -> str:
        return self.op.name

    def where(self) -> str:
        return f"GE op {self.op.name!r} ({self.op.type})"

    def attr(self, key, default=None, *alts):
        for k in (key, *alts):
            if k in self.attrs and self.attrs[k] is not None:
                return self.attrs[k]
        return default

    def inp(self, i: int) -> str:
        return self.inputs[i] if i < len(self.inputs) else ""

    def need(self, i: int) -> str:
        name = self.inp(i)
        if not name:
            raise ModelError(f"{self.where()}: input {i} is missing")
        return name

    def value(self, name: str) -> Value:
        return self.imp.graph.values[name]

    def const_of(self, i: int, what: str) -> np.ndarray:
        v = self.value(self.need(i))
        if not v.is_const:
            raise UnsupportedOpError(f"{self.where()}: input {i} ({what}) must be a constant; it is computed "
                                     "at run time")
        return v.const

    def const(self, array, suffix: str) -> str:
        name = f"{self.op.name}/{suffix}"
        arr = np.asarray(array)
        self.imp.graph.values[name] = Value(name, dtypes.from_numpy(arr.dtype), tuple(arr.shape),
                                            np.ascontiguousarray(arr))
        return name

    def emit(self, op_type: str, inputs: list[str], attrs: dict | None = None, out: int | None = 0) -> str:
        """Adds an ONNX node; `out` = the GE output index it produces (None: an intermediate)."""
        self._n += 1
        name = self.op.name if self._n == 1 else f"{self.op.name}/{op_type}_{self._n}"
        result = f"{self.op.name}:{out}" if out is not None else f"{self.op.name}/{op_type}_{self._n}:0"
        self.nodes.append(Node(name, op_type, list(inputs), [result], dict(attrs or {}), "", OPSET))
        if out is not None:
            self.outputs[out] = result
        return result

    def infer(self) -> None:
        """Infers what was emitted so far (the next emit can read its shapes)."""
        self.imp.kept.extend(_infer_nodes(self.imp.graph, self.nodes))
        self.nodes = []


def _nchw(ctx: _Ctx, key: str, default, *alts) -> list[int]:
    """A 4-D NCHW list attr (strides, dilations, ksize) → its H, W part."""
    v = list(ctx.attr(key, default, *alts))
    fmt = ctx.attr("data_format", "NCHW")
    if fmt not in ("NCHW", "ND"):
        raise UnsupportedOpError(f"{ctx.where()}: data_format {fmt!r} is not supported (only NCHW)")
    if len(v) == 4:
        return [int(v[2]), int(v[3])]
    if len(v) == 2:
        return [int(x) for x in v]
    raise ModelError(f"{ctx.where()}: attr {key!r} must have 4 (NCHW) or 2 entries, got {v}")


def _pads(ctx: _Ctx, key: str = "pads") -> list[int]:
    p = [int(x) for x in ctx.attr(key, [0, 0, 0, 0])]
    if len(p) != 4:
        raise ModelError(f"{ctx.where()}: attr {key!r} must be [top, bottom, left, right], got {p}")
    return [p[0], p[2], p[1], p[3]]   # GE [t, b, l, r] → ONNX [t, l, b, r]


def _padding_mode(ctx: _Ctx, *keys) -> dict:
    for key in keys:
        mode = ctx.attr(key)
        if mode is None:
            continue
        mode = str(mode).upper()
        if mode == "SAME":
            return {"auto_pad": "SAME_UPPER"}
        if mode == "VALID":
            return {"auto_pad": "VALID"}
        if mode not in ("CALCULATED", ""):
            raise UnsupportedOpError(f"{ctx.where()}: {key} {mode!r} is not supported (SAME, VALID, CALCULATED)")
    return {}


def _conv2d(ctx):
    attrs = {"strides": _nchw(ctx, "strides", [1, 1, 1, 1]), "dilations": _nchw(ctx, "dilations", [1, 1, 1, 1]),
             "group": int(ctx.attr("groups", 1))}
    auto = _padding_mode(ctx, "padding", "auto_pad")
    attrs.update(auto if auto else {"pads": _pads(ctx)})
    if ctx.inp(3) and ctx.inp(3) != "":
        raise UnsupportedOpError(f"{ctx.where()}: offset_w (quantized Conv2D) is not supported")
    ins = [ctx.need(0), ctx.need(1)] + ([ctx.inp(2)] if ctx.inp(2) else [])
    ctx.emit("Conv", ins, attrs)


def _matmul(ctx):
    ins = [ctx.need(0), ctx.need(1)] + ([ctx.inp(2)] if ctx.inp(2) else [])
    ctx.emit("Gemm", ins, {"transA": int(bool(ctx.attr("transpose_x1", False, "transpose_a"))),
                           "transB": int(bool(ctx.attr("transpose_x2", False, "transpose_b")))})


def _batch_matmul(ctx):
    a, b = ctx.need(0), ctx.need(1)
    for idx, key in ((0, "adj_x1"), (1, "adj_x2")):
        if ctx.attr(key, False):
            rank = len(ctx.value([a, b][idx]).shape)
            perm = list(range(rank))
            perm[-1], perm[-2] = perm[-2], perm[-1]
            t = ctx.emit("Transpose", [[a, b][idx]], {"perm": perm}, out=None)
            a, b = (t, b) if idx == 0 else (a, t)
    if ctx.inp(2):
        ctx.emit("Add", [ctx.emit("MatMul", [a, b], out=None), ctx.inp(2)])
    else:
        ctx.emit("MatMul", [a, b])


def _binary(onnx_type):
    return lambda ctx: ctx.emit(onnx_type, [ctx.need(0), ctx.need(1)])


def _unary(onnx_type):
    return lambda ctx: ctx.emit(onnx_type, [ctx.need(0)])


def _relu6(ctx):
    dt = ctx.value(ctx.need(0)).dtype.np
    ctx.emit("Clip", [ctx.need(0), ctx.const(np.array(0, dt), "min"), ctx.const(np.array(6, dt), "max")])


def _softmax(ctx):
    axes = ctx.attr("axes", None, "axis")
    axes = [-1] if axes is None else ([axes] if isinstance(axes, int) else list(axes))
    if len(axes) != 1:
        raise UnsupportedOpError(f"{ctx.where()}: softmax over several axes {axes} is not supported")
    ctx.emit("Softmax", [ctx.need(0)], {"axis": int(axes[0])})


def _reshape(ctx):
    shape = ctx.inp(1)
    if shape:
        v = ctx.value(shape)
        if v.dtype.name != "int64":
            shape = ctx.emit("Cast", [shape], {"to": dtypes.INT64.onnx}, out=None)
    else:
        dims = ctx.attr("shape")
        if dims is None:
            raise ModelError(f"{ctx.where()}: no shape input and no 'shape' attr")
        shape = ctx.const(np.array(dims, np.int64), "shape")
    ctx.emit("Reshape", [ctx.need(0), shape])


def _flatten(ctx):
    ctx.emit("Flatten", [ctx.need(0)], {"axis": 1})


def _flatten_v2(ctx):
    x = ctx.need(0)
    shape = list(ctx.value(x).shape)
    r = len(shape)
    axis, end = int(ctx.attr("axis", 1)), int(ctx.attr("end_axis", -1))
    axis, end = axis % r if r else 0, end % r if r else 0
    new = shape[:axis] + [int(np.prod(shape[axis:end + 1], dtype=np.int64))] + shape[end + 1:]
    ctx.emit("Reshape", [x, ctx.const(np.array(new, np.int64), "shape")])


def _transpose(ctx):
    perm = ctx.attr("perm")
    if perm is None and ctx.inp(1):
        perm = ctx.const_of(1, "perm").tolist()
    attrs = {"perm": [int(p) for p in perm]} if perm is not None else {}
    ctx.emit("Transpose", [ctx.need(0)], attrs)


def _concat(first_is_dim: bool, last_is_dim: bool):
    def run(ctx):
        ins = [n for n in ctx.inputs if n]
        if first_is_dim:
            axis, ins = int(ctx.const_of(0, "concat_dim").reshape(-1)[0]), ins[1:]
        elif last_is_dim:
            axis, ins = int(ctx.const_of(len(ins) - 1, "concat_dim").reshape(-1)[0]), ins[:-1]
        else:
            axis = ctx.attr("concat_dim", None, "axis")
            if axis is None:
                raise ModelError(f"{ctx.where()}: no 'concat_dim' attr")
        ctx.emit("Concat", ins, {"axis": int(axis)})
    return run


def _pool(kind: str):
    """MaxPool / AvgPool (ksize, strides, padding) and MaxPoolV3 / AvgPoolV2 (+ padding_mode, pads,
    ceil_mode, global_pooling, exclusive)."""
    def run(ctx):
        x = ctx.need(0)
        onnx_type = "MaxPool" if kind == "max" else "AveragePool"
        if ctx.attr("global_pooling", False):
            ctx.emit("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", [x])
            return
        attrs = {"kernel_shape": _nchw(ctx, "ksize", None), "strides": _nchw(ctx, "strides", [1, 1, 1, 1])}
        auto = _padding_mode(ctx, "padding", "padding_mode")
        attrs.update(auto if auto else {"pads": _pads(ctx)})
        if ctx.attr("ceil_mode", False):
            attrs["ceil_mode"] = 1
        if kind == "avg" and not auto.get("auto_pad") == "VALID":
            attrs["count_include_pad"] = 0 if ctx.attr("exclusive", True) else 1
        ctx.emit(onnx_type, [x], attrs)
    return run


def _caffe_pooling(ctx):
    """GE's Caffe-style Pooling: mode 0 max / 1 avg, window, stride, pad [t,b,l,r], ceil_mode
    0 = ceil (Caffe's rounding) / 1 = floor, global_pooling."""
    mode = int(ctx.attr("mode", 0))
    if mode not in (0, 1):
        raise UnsupportedOpError(f"{ctx.where()}: Pooling mode {mode} is not supported (0 max, 1 avg)")
    x = ctx.need(0)
    if ctx.attr("global_pooling", False):
        ctx.emit("GlobalMaxPool" if mode == 0 else "GlobalAveragePool", [x])
        return
    attrs = {"kernel_shape": [int(v) for v in ctx.attr("window", [1, 1])],
             "strides": [int(v) for v in ctx.attr("stride", [1, 1])], "pads": _pads(ctx, "pad"),
             "ceil_mode": 1 if int(ctx.attr("ceil_mode", 0)) == 0 else 0}
    if mode == 1:
        attrs["count_include_pad"] = 1
    ctx.emit("MaxPool" if mode == 0 else "AveragePool", [x], attrs)


def _batch_norm(ctx):
    if ctx.attr("is_training", False):
        raise UnsupportedOpError(f"{ctx.where()}: is_training=true is not supported (inference only)")
    if ctx.attr("data_format", "NCHW") not in ("NCHW", "ND"):
        raise UnsupportedOpError(f"{ctx.where()}: data_format {ctx.attr('data_format')!r} is not supported")
    x, scale, offset, mean, var = (ctx.need(i) for i in range(5))
    ctx.emit("BatchNormalization", [x, scale, offset, mean, var], {"epsilon": float(ctx.attr("epsilon", 1e-4))})


def _bn_inference(with_momentum_input: bool):
    """BNInferenceD(x, mean, variance, [scale], [b]) and BNInference(x, mean, variance, momentum,
    [scale], [b]); the Caffe momentum/scale-factor is not applied (use_global_stats)."""
    def run(ctx):
        x, mean, var = ctx.need(0), ctx.need(1), ctx.need(2)
        k = 4 if with_momentum_input else 3
        m = ctx.value(mean)
        scale = ctx.inp(k) or ctx.const(np.ones(m.shape, m.dtype.np), "scale")
        bias = ctx.inp(k + 1) or ctx.const(np.zeros(m.shape, m.dtype.np), "offset")
        ctx.emit("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": float(ctx.attr("epsilon", 1e-5))})
    return run


def _cast(ctx):
    dst = ctx.attr("dst_type")
    if dst is None:
        raise ModelError(f"{ctx.where()}: no 'dst_type' attr")
    dt = dtypes.BY_ACL.get(int(dst))
    if dt is None:
        raise UnsupportedOpError(f"{ctx.where()}: dst_type {dst} (ge::DataType) is not supported")
    ctx.emit("Cast", [ctx.need(0)], {"to": dt.onnx})


HANDLERS = {
    "Conv2D": _conv2d,
    "MatMul": _matmul, "MatMulV2": _matmul,
    "BatchMatMul": _batch_matmul, "BatchMatMulV2": _batch_matmul,
    "Add": _binary("Add"), "AddV2": _binary("Add"), "Sub": _binary("Sub"), "Mul": _binary("Mul"),
    "RealDiv": _binary("Div"), "Div": _binary("Div"), "Maximum": _binary("Max"), "Minimum": _binary("Min"),
    "Relu": _unary("Relu"), "Sigmoid": _unary("Sigmoid"), "Tanh": _unary("Tanh"), "Exp": _unary("Exp"),
    "Log": _unary("Log"), "Sqrt": _unary("Sqrt"), "Abs": _unary("Abs"), "Neg": _unary("Neg"),
    "Identity": _unary("Identity"), "Relu6": _relu6,
    "Softmax": _softmax, "SoftmaxV2": _softmax,
    "Reshape": _reshape, "Flatten": _flatten, "FlattenV2": _flatten_v2,
    "Transpose": _transpose, "TransposeD": _transpose,
    "ConcatV2": _concat(False, True), "ConcatD": _concat(False, False), "ConcatV2D": _concat(False, False),
    "Concat": _concat(True, False),
    "MaxPool": _pool("max"), "MaxPoolV3": _pool("max"), "AvgPool": _pool("avg"), "AvgPoolV2": _pool("avg"),
    "Pooling": _caffe_pooling,
    "BatchNorm": _batch_norm, "BNInference": _bn_inference(True), "BNInferenceD": _bn_inference(False),
    "Cast": _cast,
}
SPECIAL = ("Data", "Const", "Constant", "NetOutput")


def supported_ge_ops() -> list[str]:
    return sorted(set(HANDLERS) | set(SPECIAL))


class _Importer:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.kept: list[Node] = []


def translate_op(graph: Graph, op, inputs: list[str], attrs: dict | None = None) -> tuple[list[Node], dict[int, str]]:
    """One GE op (an OpDef) whose inputs are values of `graph` → the ONNX-equivalent nodes it
    becomes (shapes inferred into graph.values) and {GE output index: value name}. `attrs`
    (Python values, as _attr_value reads them) replaces the OpDef's AttrDefs; om2gen.cli.single_op
    passes them that way."""
    handler = HANDLERS.get(op.type)
    if handler is None:
        raise UnsupportedOpError(f"GE op {op.name!r}: op type {op.type} is not supported by om2gen's GE "
                                 f"frontend; supported GE op types: {', '.join(supported_ge_ops())}")
    imp = _Importer(graph)
    ctx = _Ctx(imp, op, list(inputs))
    if attrs is not None:
        ctx.attrs = dict(attrs)
    # control edges ("" here) sit at the end of GE's input list; data inputs keep their positions
    while ctx.inputs and not ctx.inputs[-1]:
        ctx.inputs.pop()
    handler(ctx)
    ctx.infer()
    return imp.kept, ctx.outputs


def _parse_edge(text: str):
    """ "op:i" → (op, i); control edges ("^op", "op:-1") and "" → None."""
    if not text or text.startswith("^"):
        return None
    name, sep, idx = text.rpartition(":")
    if not sep:
        return text, 0
    try:
        i = int(idx)
    except ValueError:
        return text, 0
    return None if i < 0 else (name, i)


def _toposort(ops) -> list:
    by_name = {}
    for op in ops:
        if op.name in by_name:
            raise ModelError(f"the GE graph has two ops named {op.name!r}")
        by_name[op.name] = op
    for op in ops:
        for i, text in enumerate(op.input):
            edge = _parse_edge(text)
            if edge is not None and edge[0] not in by_name:
                raise ModelError(f"GE op {op.name!r} ({op.type}) input {i} reads {text!r}, but the graph has "
                                 f"no op named {edge[0]!r} (a dangling edge)")
    order, state = [], {}
    for root in ops:
        stack = [(root, False)]
        while stack:
            op, done = stack.pop()
            if done:
                state[op.name] = 2
                order.append(op)
                continue
            if state.get(op.name) == 2:
                continue
            if state.get(op.name) == 1:
                continue
            state[op.name] = 1
            stack.append((op, True))
            for text in reversed(list(op.input)):
                edge = _parse_edge(text)
                if edge is None:
                    continue
                dep = by_name[edge[0]]
                if state.get(dep.name) == 1:
                    raise ModelError(f"the GE graph has a cycle through op {dep.name!r}")
                if state.get(dep.name) != 2:
                    stack.append((dep, False))
    return order


def import_ge(src, input_shapes: dict[str, tuple[int, ...]] | None = None,
              input_values: dict[str, object] | None = None) -> Graph:
    """Reads a GE IR graph (path, bytes or ModelDef) into om2gen's Graph, shapes inferred."""
    model, raw, where = load_model_def(src)
    gdef = model.graph[0]
    pins = pins_mod.shapes(input_shapes)
    frozen = dict(input_values or {})
    data = [(op.name, _declared_dims(op)) for op in gdef.op if op.type == "Data"]
    pins_mod.check_names(pins, frozen, [(n, pins_mod.dims_text(d if d != [-2] else None)) for n, d in data],
                         "the GE graph")
    graph = Graph(gdef.name or model.name or "model", {}, [], [], [], {"": OPSET},
                  source_digest=hashlib.sha256(raw).hexdigest(), producer="ge")
    imp = _Importer(graph)
    produced: dict[tuple[str, int], str] = {}
    data_ops, outputs = [], []
    order = _toposort(list(gdef.op))

    def resolve(op, i, text):
        edge = _parse_edge(text)
        if edge is None:
            return ""
        if edge not in produced:
            raise ModelError(f"GE op {op.name!r} ({op.type}) input {i} reads {text!r}, but op {edge[0]!r} "
                             f"has no output {edge[1]}")
        return produced[edge]

    for op in order:
        if op.type == "Data":
            data_ops.append(op)
            v = _data_value(op, pins, frozen)
            graph.values[v.name] = v
            if not v.is_const:
                graph.inputs.append(v.name)
            produced[(op.name, 0)] = v.name
            continue
        if op.type in ("Const", "Constant"):
            a = op.attr.get("value")
            if a is None or a.WhichOneof("value") != "t":
                raise ModelError(f"GE op {op.name!r} ({op.type}) has no 'value' tensor attr")
            arr = _tensor(a.t, f"GE op {op.name!r} ({op.type})")
            name = f"{op.name}:0"
            graph.values[name] = Value(name, dtypes.from_numpy(arr.dtype), tuple(arr.shape), arr)
            produced[(op.name, 0)] = name
            continue
        inputs = [resolve(op, i, t) for i, t in enumerate(op.input)]
        if op.type == "NetOutput":
            outputs.extend(n for n in inputs if n)
            continue
        nodes, outs = translate_op(graph, op, inputs)
        imp.kept.extend(nodes)
        for idx, name in outs.items():
            produced[(op.name, idx)] = name

    if not outputs:
        for i, text in enumerate(gdef.output):
            edge = _parse_edge(text)
            if edge is not None and edge in produced:
                outputs.append(produced[edge])
    if not outputs:
        raise ModelError(f"{where}: the GE graph has no NetOutput op (and GraphDef.output names nothing); "
                         "nothing to compute")
    # graph inputs in Data "index" order when the ops carry it
    index = {op.name: int(_attr_value(op.attr["index"])) for op in data_ops if "index" in op.attr}
    if len(index) == len(data_ops):
        graph.inputs.sort(key=lambda n: index.get(n, 0))
    graph.nodes = imp.kept
    graph.outputs = outputs
    for name in outputs:
        if name not in graph.values:
            raise ModelError(f"graph output {name!r} is produced by no node")
    return graph


def _data_desc(op):
    return op.output_desc[0] if op.output_desc else (op.input_desc[0] if op.input_desc else None)


def _declared_dims(op) -> list[int] | None:
    """A Data op's declared dims (-1 dynamic, [-2] unknown rank), or None."""
    desc = _data_desc(op)
    return [int(d) for d in desc.shape.dim] if desc is not None and desc.HasField("shape") else None


def _data_value(op, pins, frozen) -> Value:
    where = f"GE Data op {op.name!r}"
    desc = _data_desc(op)
    dt = _dtype(desc.dtype, where) if desc is not None else dtypes.FLOAT32
    declared = _declared_dims(op)
    if op.name in frozen:
        arr = np.asarray(frozen[op.name]).astype(dt.np)
        if declared is not None and all(d >= 0 for d in declared) and arr.size == int(np.prod(declared)):
            arr = arr.reshape(declared)
        return Value(op.name, dt, tuple(arr.shape), np.ascontiguousarray(arr))
    if op.name in pins:
        shape = pins[op.name]
        if declared is not None and declared != [-2] and len(declared) != len(shape):
            raise ShapeError(f"{shape_option(op.name, shape)} has rank {len(shape)} but the GE graph declares "
                             f"rank {len(declared)} for input {op.name!r}")
        for i, d in enumerate(declared or []):
            if d >= 0 and declared != [-2] and d != shape[i]:
                raise ShapeError(f"{shape_option(op.name, shape)}: dim {i} is {shape[i]} but the GE graph fixes it "
                                 f"to {d}")
        if any(d < 0 for d in shape):
            raise ShapeError(f"{shape_option(op.name, shape)}: dims must be >= 0")
        limits.check_input(op.name, tuple(shape), dt, pinned=True)
        return Value(op.name, dt, shape)
    if desc is None or declared is None:
        raise ShapeError(f"input {op.name!r} (GE Data op) has no output_desc shape; pin it with "
                         f"{shape_option(op.name)}")
    for i, d in enumerate(declared):
        if d < 0:
            raise ShapeError(f"input {op.name!r} (GE Data op) has a dynamic dim {i} ({d}); pin it with "
                             f"{shape_option(op.name)} (e.g. batch 1)")
    limits.check_input(op.name, tuple(declared), dt, pinned=False)
    return Value(op.name, dt, tuple(declared))
