"""Hostile and odd ONNX models for tools/fuzz_compile.py: a few seed models built with onnx.helper
(an MLP, a small CNN, a graph of shape-driven ops), and mutations of their attributes, input
shapes, dtypes, initializers, node inputs, op types and opsets.

A case is (seed, index): the same pair always gives the same model, so a failure found in a run
replays alone with `python tools/fuzz_compile.py --seed S --case I`.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

# Values a hostile or broken exporter writes where an int belongs.
HOSTILE_INTS = [0, -1, -2, 1, 2, 3, 7, 1 << 31, (1 << 31) - 1, 1 << 40, 1 << 62, (1 << 63) - 1, -(1 << 63)]
HOSTILE_DIMS = [0, 1, 2, 1 << 24, 1 << 27, 1 << 31, 1 << 40, 1 << 62, (1 << 63) - 1]
DTYPES = [TP.UNDEFINED, TP.FLOAT, TP.UINT8, TP.INT8, TP.INT32, TP.INT64, TP.STRING, TP.BOOL, TP.FLOAT16,
          TP.DOUBLE, TP.UINT64, TP.BFLOAT16, TP.COMPLEX64, 99]
# Attributes worth trying on a node that does not have them yet.
ATTR_NAMES = ["strides", "dilations", "pads", "kernel_shape", "group", "axis", "axes", "perm", "auto_pad",
              "ceil_mode", "keepdims", "transA", "transB", "alpha", "beta", "mode", "allowzero", "value", "to"]
OP_SWAPS = {1: ["Relu", "Sigmoid", "Softmax", "Flatten", "Shape", "Identity", "Transpose", "GlobalAveragePool",
                "MaxPool", "ReduceSum", "Cast", "Size", "ConstantOfShape"],
            2: ["Add", "MatMul", "Mul", "Reshape", "Expand", "Tile", "Gather", "Conv", "Concat", "Div"],
            3: ["Gemm", "Conv", "Range", "Slice", "Resize", "Clip", "Where", "ConvTranspose", "Pad"]}
OPSETS = [1, 6, 7, 9, 11, 12, 13, 17, 18, 19, 21]


def _init(name: str, arr) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(arr), name)


def _model(nodes, inputs, outputs, inits, name: str) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def mlp() -> onnx.ModelProto:
    r = np.random.default_rng(1)
    f = np.float32
    return _model(
        [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
         helper.make_node("Add", ["h1", "b1"], ["h2"], name="fc1_bias"),
         helper.make_node("Relu", ["h2"], ["h3"], name="relu1"),
         helper.make_node("Gemm", ["h3", "w2", "b2"], ["h4"], name="fc2", alpha=1.0, beta=1.0, transB=1),
         helper.make_node("Softmax", ["h4"], ["y"], name="softmax", axis=-1)],
        [helper.make_tensor_value_info("x", TP.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [2, 8])],
        [_init("w1", r.standard_normal((16, 32)).astype(f)), _init("b1", r.standard_normal(32).astype(f)),
         _init("w2", r.standard_normal((8, 32)).astype(f)), _init("b2", r.standard_normal(8).astype(f))],
        "mlp")


def cnn() -> onnx.ModelProto:
    r = np.random.default_rng(2)
    f = np.float32
    return _model(
        [helper.make_node("Conv", ["x", "cw1", "cb1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                          strides=[1, 1], dilations=[1, 1], group=1),
         helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
         helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Conv", ["p1", "cw2"], ["c2"], name="conv2", kernel_shape=[3, 3], strides=[1, 1],
                          dilations=[2, 2], pads=[2, 2, 2, 2]),
         helper.make_node("AveragePool", ["c2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2],
                          pads=[0, 0, 0, 0], ceil_mode=1),
         helper.make_node("ConvTranspose", ["p2", "tw"], ["u"], name="up", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("GlobalAveragePool", ["u"], ["g"], name="gap"),
         helper.make_node("Flatten", ["g"], ["fl"], name="flatten", axis=1),
         helper.make_node("Gemm", ["fl", "fw", "fb"], ["y"], name="fc", transB=1)],
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [1, 10])],
        [_init("cw1", r.standard_normal((8, 3, 3, 3)).astype(f)), _init("cb1", r.standard_normal(8).astype(f)),
         _init("cw2", r.standard_normal((8, 8, 3, 3)).astype(f)), _init("tw", r.standard_normal((8, 4, 2, 2)).astype(f)),
         _init("fw", r.standard_normal((10, 4)).astype(f)), _init("fb", r.standard_normal(10).astype(f))],
        "cnn")


def shapes() -> onnx.ModelProto:
    i64, f = np.int64, np.float32
    return _model(
        [helper.make_node("ConstantOfShape", ["cos_shape"], ["c"], name="fill",
                          value=_init("v", np.array([0.5], f))),
         helper.make_node("Add", ["x", "c"], ["a"], name="add"),
         helper.make_node("Expand", ["a", "exp_shape"], ["e"], name="expand"),
         helper.make_node("Tile", ["e", "repeats"], ["t"], name="tile"),
         helper.make_node("Range", ["r_start", "r_limit", "r_delta"], ["r"], name="range"),
         helper.make_node("Add", ["t", "r"], ["tr"], name="add_range"),
         helper.make_node("Slice", ["tr", "starts", "ends", "axes"], ["s"], name="slice"),
         helper.make_node("Pad", ["s", "pads"], ["pd"], name="pad", mode="constant"),
         helper.make_node("Transpose", ["pd"], ["tp"], name="transpose", perm=[0, 1, 3, 2]),
         helper.make_node("Reshape", ["tp", "shape"], ["y1"], name="reshape"),
         helper.make_node("Resize", ["t", "", "scales"], ["y2"], name="resize", mode="nearest"),
         helper.make_node("ReduceSum", ["t", "red_axes"], ["y3"], name="reduce", keepdims=0)],
        [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y1", TP.FLOAT, [4, 32]), helper.make_tensor_value_info("y2", TP.FLOAT, [2, 2, 6, 8]),
         helper.make_tensor_value_info("y3", TP.FLOAT, [2, 3, 8])],
        [_init("cos_shape", np.array([2, 3, 4], i64)), _init("exp_shape", np.array([2, 2, 3, 4], i64)),
         _init("repeats", np.array([1, 1, 1, 2], i64)), _init("r_start", np.array(0, f)),
         _init("r_limit", np.array(8, f)), _init("r_delta", np.array(1, f)),
         _init("starts", np.array([0, 1], i64)), _init("ends", np.array([2, 3], i64)),
         _init("axes", np.array([1, 2], i64)), _init("pads", np.array([0, 0, 1, 0, 0, 0, 1, 0], i64)),
         _init("shape", np.array([4, -1], i64)), _init("scales", np.array([1, 1, 2, 1], f)),
         _init("red_axes", np.array([1], i64))],
        "shapes")


def seq() -> onnx.ModelProto:
    r = np.random.default_rng(3)
    i64, f = np.int64, np.float32
    return _model(
        [helper.make_node("LayerNormalization", ["x", "ln_scale", "ln_bias"], ["ln"], name="layernorm", axis=-1,
                          epsilon=1e-5),
         helper.make_node("Gather", ["ln", "idx"], ["g"], name="gather", axis=1),
         helper.make_node("Concat", ["g", "x"], ["cc"], name="concat", axis=1),
         helper.make_node("Split", ["cc", "split"], ["s1", "s2"], name="split", axis=1),
         helper.make_node("Mul", ["s1", "s2"], ["m"], name="mul"),
         helper.make_node("ReduceMean", ["m"], ["y2"], name="mean", axes=[2], keepdims=1),
         helper.make_node("Clip", ["m", "lo", "hi"], ["cl"], name="clip"),
         helper.make_node("Where", ["cond", "cl", "m"], ["w"], name="where"),
         helper.make_node("TopK", ["w", "k"], ["tv", "ti"], name="topk", axis=-1),
         helper.make_node("Cast", ["ti"], ["tf"], name="cast", to=TP.FLOAT),
         helper.make_node("Unsqueeze", ["tf", "uaxes"], ["u"], name="unsqueeze"),
         helper.make_node("Squeeze", ["u", "uaxes"], ["sq"], name="squeeze"),
         helper.make_node("Add", ["sq", "tv"], ["y1"], name="add"),
         helper.make_node("BatchNormalization", ["x", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn"),
         helper.make_node("Softmax", ["bn"], ["y3"], name="softmax", axis=1)],
        [helper.make_tensor_value_info("x", TP.FLOAT, [2, 4, 8])],
        [helper.make_tensor_value_info("y1", TP.FLOAT, [2, 3, 4]), helper.make_tensor_value_info("y2", TP.FLOAT, [2, 3, 1]),
         helper.make_tensor_value_info("y3", TP.FLOAT, [2, 4, 8])],
        [_init("ln_scale", r.standard_normal(8).astype(f)), _init("ln_bias", r.standard_normal(8).astype(f)),
         _init("idx", np.array([0, 3], i64)), _init("split", np.array([3, 3], i64)),
         _init("lo", np.array(-0.5, f)), _init("hi", np.array(0.5, f)),
         _init("cond", r.random((3, 8)) > 0.5), _init("k", np.array([4], i64)), _init("uaxes", np.array([0], i64)),
         _init("bn_s", r.random(4).astype(f) + 0.5), _init("bn_b", r.standard_normal(4).astype(f)),
         _init("bn_m", r.standard_normal(4).astype(f)), _init("bn_v", r.random(4).astype(f) + 0.5)],
        "seq")


SEEDS = {"mlp": mlp, "cnn": cnn, "shapes": shapes, "seq": seq}


# ---- mutations: each edits the model in place and says what it did ----

def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _node(rng, model):
    return _pick(rng, list(model.graph.node))


def _schema_attrs(model, node) -> dict[str, int]:
    """{attribute name: AttributeProto type} of the node's op at the model's opset ({} if unknown)."""
    try:
        schema = onnx.defs.get_schema(node.op_type, model.opset_import[0].version, node.domain)
    except onnx.defs.SchemaError:
        return {}
    return {n: int(a.type) for n, a in schema.attributes.items()}


def _hostile_int(rng) -> int:
    """Half the time a small edge value (0, negatives, 1), else a huge one."""
    return _pick(rng, HOSTILE_INTS[:7] if rng.random() < 0.5 else HOSTILE_INTS[7:])


def mutate_attr_value(rng, model) -> str:
    """An int or ints attribute of the op (set in the model or not yet) given hostile values."""
    ints = (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)
    nodes = [n for n in model.graph.node if any(t in ints for t in _schema_attrs(model, n).values())]
    node = _pick(rng, nodes) if nodes and rng.random() < 0.9 else _node(rng, model)
    kinds = {n: t for n, t in _schema_attrs(model, node).items() if t in ints}
    present = [a.name for a in node.attribute if a.type in ints]
    kinds.update({a.name: a.type for a in node.attribute if a.type in ints})
    if not kinds:
        kinds[_pick(rng, ATTR_NAMES)] = onnx.AttributeProto.INTS
    name = _pick(rng, present) if present and rng.random() < 0.6 else _pick(rng, sorted(kinds))
    old = next((a for a in node.attribute if a.name == name), None)
    if kinds[name] == onnx.AttributeProto.INT:
        new = helper.make_attribute(name, _hostile_int(rng))
    else:
        values = list(old.ints) if old is not None and old.type == onnx.AttributeProto.INTS else [1, 1]
        choice = rng.random()
        if choice < 0.5 and values:
            values[int(rng.integers(len(values)))] = _hostile_int(rng)
        elif choice < 0.7:
            values = [_hostile_int(rng)] * len(values or [1])
        elif choice < 0.85:
            values = values + [_hostile_int(rng)]
        else:
            values = values[:-1]
        new = helper.make_attribute(name, values) if values else \
            onnx.AttributeProto(name=name, type=onnx.AttributeProto.INTS)
    _set_attr(node, new)
    return f"{node.name}.{name} = {onnx.helper.get_attribute_value(new)}"


def mutate_attr_kind(rng, model) -> str:
    """An attribute replaced by one of another type (a float, a string, a tensor, an empty list)."""
    node = _node(rng, model)
    name = _pick(rng, [a.name for a in node.attribute]) if node.attribute and rng.random() < 0.7 \
        else _pick(rng, ATTR_NAMES)
    value = _pick(rng, [0.5, "SAME_UPPER", "bogus", b"\xff\xfe", [0.5, 2.0], ["a"], [],
                        _init("t", np.zeros((2, 2), np.float32)), _init("t", np.array([], np.int64))])
    new = (onnx.AttributeProto(name=name, type=onnx.AttributeProto.INTS) if isinstance(value, list) and not value
           else helper.make_attribute(name, value))
    _set_attr(node, new)
    return f"{node.name}.{name} = {'a tensor' if hasattr(value, 'dims') else repr(value)}"


def mutate_attr_drop(rng, model) -> str:
    node = _node(rng, model)
    if not node.attribute:
        return mutate_attr_value(rng, model)
    i = int(rng.integers(len(node.attribute)))
    name = node.attribute[i].name
    del node.attribute[i]
    return f"{node.name}: attribute {name} removed"


def _set_attr(node, new) -> None:
    for i, a in enumerate(node.attribute):
        if a.name == new.name:
            del node.attribute[i]
            break
    node.attribute.append(new)


def mutate_input_shape(rng, model) -> str:
    vi = _pick(rng, list(model.graph.input))
    dims = vi.type.tensor_type.shape.dim
    choice = rng.random()
    if choice < 0.55 and len(dims):
        d = dims[int(rng.integers(len(dims)))]
        value = _pick(rng, HOSTILE_DIMS)
        d.dim_value = value
        return f"input {vi.name}: a dim = {value}"
    if choice < 0.7 and len(dims):
        dims[int(rng.integers(len(dims)))].dim_param = "batch"
        return f"input {vi.name}: a dim made symbolic"
    if choice < 0.85:
        dims.add().dim_value = int(_pick(rng, [1, 2, 3]))
        return f"input {vi.name}: rank + 1"
    if len(dims):
        del dims[-1]
        return f"input {vi.name}: rank - 1"
    vi.type.tensor_type.ClearField("shape")
    return f"input {vi.name}: no shape"


def mutate_input_dtype(rng, model) -> str:
    vi = _pick(rng, list(model.graph.input) + list(model.graph.output))
    dt = int(_pick(rng, DTYPES))
    vi.type.tensor_type.elem_type = dt
    return f"{vi.name}: elem_type = {dt}"


def _initializer(rng, model, ints_first: bool = False):
    inits = list(model.graph.initializer)
    if ints_first and rng.random() < 0.7:
        ints = [t for t in inits if t.data_type == TP.INT64]
        inits = ints or inits
    return _pick(rng, inits)


def mutate_init_dtype(rng, model) -> str:
    t = _initializer(rng, model)
    arr = numpy_helper.to_array(t)
    dt = int(_pick(rng, [d for d in DTYPES if d not in (TP.UNDEFINED, 99, TP.STRING)]))
    if rng.random() < 0.5:   # converted: a consistent tensor of another type
        new = numpy_helper.from_array(arr.astype(helper.tensor_dtype_to_np_dtype(dt)), t.name)
        t.CopyFrom(new)
        return f"initializer {t.name}: converted to dtype {dt}"
    t.data_type = dt   # the same bytes read as another type: sizes may not match
    return f"initializer {t.name}: data_type = {dt} (bytes kept)"


def mutate_init_shape(rng, model) -> str:
    t = _initializer(rng, model)
    arr = numpy_helper.to_array(t)
    choice = rng.random()
    if choice < 0.4:   # a consistent tensor of another shape
        shape = list(arr.shape) or [1]
        shape[int(rng.integers(len(shape)))] = int(_pick(rng, [0, 1, 2, 3, 5]))
        if rng.random() < 0.3:
            shape.append(2)
        new = np.resize(arr, shape).astype(arr.dtype) if arr.size else np.zeros(shape, arr.dtype)
        t.CopyFrom(numpy_helper.from_array(new, t.name))
        return f"initializer {t.name}: reshaped to {shape}"
    if choice < 0.7:   # dims edited, data kept: they disagree
        dims = list(t.dims) or [1]
        dims[int(rng.integers(len(dims)))] = int(_pick(rng, HOSTILE_DIMS))
        del t.dims[:]
        t.dims.extend(dims)
        return f"initializer {t.name}: dims = {dims} (data kept)"
    if t.raw_data:
        t.raw_data = t.raw_data[: len(t.raw_data) // 2]
        return f"initializer {t.name}: raw_data truncated"
    del t.dims[:]
    return f"initializer {t.name}: dims cleared"


def mutate_init_value(rng, model) -> str:
    """An element of an initializer (shape tensors first) set to a hostile number."""
    t = _initializer(rng, model, ints_first=True)
    arr = numpy_helper.to_array(t).copy()
    if arr.size == 0:
        return mutate_init_shape(rng, model)
    flat = arr.reshape(-1)
    i = int(rng.integers(flat.size))
    if arr.dtype.kind in "iu":
        v = _hostile_int(rng)
        flat[i] = np.array(v).astype(np.int64).astype(arr.dtype) if arr.dtype.kind == "i" else abs(v) % 256
    else:
        v = _pick(rng, [0.0, -1.0, 1e30, -1e30, float("nan"), float("inf"), 1e-30, 2.0 ** 40])
        flat[i] = v
    t.CopyFrom(numpy_helper.from_array(arr, t.name))
    return f"initializer {t.name}[{i}] = {flat[i]}"


def mutate_node_inputs(rng, model) -> str:
    node = _node(rng, model)
    names = ([i.name for i in model.graph.input] + [t.name for t in model.graph.initializer]
             + [o for n in model.graph.node for o in n.output])
    choice = rng.random()
    if choice < 0.45 and node.input:
        i = int(rng.integers(len(node.input)))
        node.input[i] = _pick(rng, names + ["", "no_such_value"])
        return f"{node.name}: input {i} = {node.input[i]!r}"
    if choice < 0.65 and node.input:
        del node.input[-1]
        return f"{node.name}: last input removed"
    if choice < 0.85:
        node.input.append(_pick(rng, names))
        return f"{node.name}: input added ({node.input[-1]!r})"
    if len(node.input) > 1:
        a, b = node.input[0], node.input[1]
        node.input[0], node.input[1] = b, a
        return f"{node.name}: inputs 0 and 1 swapped"
    node.output[0] = _pick(rng, names)
    return f"{node.name}: output renamed to {node.output[0]!r}"


def mutate_op_type(rng, model) -> str:
    """Another op of the same arity; attributes the new op does not have are dropped (mostly)."""
    node = _node(rng, model)
    arity = min(max(len(node.input), 1), 3)
    old, node.op_type = node.op_type, _pick(rng, OP_SWAPS[arity])
    known = _schema_attrs(model, node)
    if rng.random() < 0.9:
        keep = [a for a in node.attribute if a.name in known]
        del node.attribute[:]
        node.attribute.extend(keep)
    return f"{node.name}: {old} -> {node.op_type}"


def mutate_opset(rng, model) -> str:
    v = int(_pick(rng, OPSETS))
    model.opset_import[0].version = v
    return f"opset = {v}"


MUTATIONS = [(mutate_attr_value, 5), (mutate_attr_kind, 1), (mutate_attr_drop, 1), (mutate_input_shape, 3),
             (mutate_input_dtype, 1), (mutate_init_dtype, 1), (mutate_init_shape, 2), (mutate_init_value, 4),
             (mutate_node_inputs, 2), (mutate_op_type, 2), (mutate_opset, 1)]


def case(seed: int, index: int) -> tuple[str, onnx.ModelProto, list[str]]:
    """Case `index` of run `seed`: (seed model name, the mutated model, what was changed)."""
    rng = np.random.default_rng([seed, index])
    name = _pick(rng, sorted(SEEDS))
    model = SEEDS[name]()
    weights = np.array([w for _, w in MUTATIONS], float)
    changes = []
    for _ in range(1 + int(rng.integers(3)) if rng.random() < 0.5 else 1):
        fn = MUTATIONS[int(rng.choice(len(MUTATIONS), p=weights / weights.sum()))][0]
        try:
            changes.append(fn(rng, model))
        except (ValueError, TypeError, IndexError, KeyError):   # an earlier change left nothing to edit
            changes.append(f"({fn.__name__}: nothing to change)")
    return name, model, changes
