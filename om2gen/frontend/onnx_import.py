"""ONNX → Graph: read the model, pin input shapes, infer every shape with the ops' own infer().

onnx's shape inference is not relied on: each registered op computes its outputs' dtype and
static shape from its inputs, so after input_shapes (--input-shape) every shape in the graph is static.
"""
from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from ..advice import gear_option, shape_option, value_option
from ..errors import ModelError, Om2Error, ShapeError, UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.attributes import attribute_value
from ..ir.graph import Dequantized, Graph, Node, Value
from ..ops import registry, value_bounds
from ..passes import fold
from . import dynamic_dims, limits
from . import pins as pins_mod
from . import shape_dims, support


@dataclass
class Loaded:
    """A model read once and imported several times (once per gear): its proto and file bytes, and
    whether onnx.checker has passed it (the first import checks it, the others need not)."""
    proto: onnx.ModelProto
    raw: bytes
    whole: bool = True      # raw serializes the whole model (no external data loaded beside it)
    checked: bool = False


def load_model(model) -> Loaded:
    """Accepts a path, a ModelProto or a Loaded; returns the proto with its serialized bytes (the
    file's, for the digest)."""
    if isinstance(model, Loaded):
        return model
    if isinstance(model, onnx.ModelProto):
        return Loaded(model, model.SerializeToString())
    path = Path(model)
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    data = path.read_bytes()
    try:
        proto = onnx.load_from_string(data)
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise ModelError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc}); "
                         "pass a .onnx file exported by torch.onnx, tf2onnx, paddle2onnx or onnx.save") from None
    if not proto.graph.node and not proto.graph.output:
        raise ModelError(f"{path}: the file parsed but holds no ONNX graph; is it really an .onnx model?")
    if proto.graph.initializer and any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
        onnx.load_external_data_for_model(proto, str(path.parent))
        return Loaded(proto, data, whole=False)
    return Loaded(proto, data)


def _pinned_shape(vi: onnx.ValueInfoProto, pins: dict[str, tuple], dtype, dims: dynamic_dims.Symbols) -> tuple:
    name = vi.name
    if name in pins:
        shape = pins[name]
        declared = vi.type.tensor_type.shape.dim if vi.type.tensor_type.HasField("shape") else None
        if declared is not None and len(declared) != len(shape):
            raise ShapeError(f"{shape_option(name, shape)} has rank {len(shape)} but the model declares rank "
                             f"{len(declared)} for input {name!r}: {name}{pins_mod.dims_text(_declared(vi))}")
        for i, d in enumerate(declared or []):
            if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != shape[i]:
                raise ShapeError(f"{shape_option(name, shape)}: dim {i} is {shape[i]} but the model fixes it to "
                                 f"{d.dim_value}: {name}{pins_mod.dims_text(_declared(vi))}")
        if any(isinstance(d, int) and d < -1 for d in shape):
            raise ShapeError(f"{shape_option(name, shape)}: a dim is >= 0, -1 (dynamic) or a range lo~hi")
        shape = tuple(dims.dim(name, i, d, declared[i].dim_param if declared else "") for i, d in enumerate(shape))
        limits.check_input(name, shape, dtype, pinned=True)
        return shape
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        raise ShapeError(f"input {name!r} has no declared shape; pin it with {shape_option(name)}")
    dims = []
    for i, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        else:
            sym = d.dim_param or "?"
            example = [x if isinstance(x, int) and x > 0 else 1 for x in _declared(vi)]
            geared = [-1 if j == i else x for j, x in enumerate(example)]
            gears = (gear_option("dynamic_batch_size", [1, 2, 4, 8]) if i == 0
                     else gear_option("dynamic_dims", [(128,), (256,)]))
            raise ShapeError(f"input {name!r} has a dynamic dim {i} ({sym!r}): {name}"
                             f"{pins_mod.dims_text(_declared(vi))}; pin it with {shape_option(name)}, e.g. "
                             f"{shape_option(name, example)}; or compile it for several sizes (gears): mark it -1, "
                             f"e.g. {shape_option(name, geared)}, and give the sizes with {gears}; or for any size: "
                             f"mark it -1 or a range lo~hi without a gear option")
    limits.check_input(name, tuple(dims), dtype, pinned=False)
    return tuple(dims)


def declared_inputs(loaded: Loaded, input_values=None) -> list[tuple[str, tuple | None]]:
    """[(name, dims)] of the model's run-time inputs (not initializers, not frozen by
    input_values): a dim an int, or None where symbolic or unknown; dims None without a shape."""
    g = loaded.proto.graph
    skip = {i.name for i in g.initializer} | set(input_values or {})
    out = []
    for vi in g.input:
        if vi.name not in skip:
            dims = _declared(vi)
            out.append((vi.name, None if dims is None else tuple(d if isinstance(d, int) and d > 0 else None
                                                                 for d in dims)))
    return out


def _declared(vi: onnx.ValueInfoProto) -> list | None:
    """The declared dims: ints, dim_param names, or None where unknown; None without a shape."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]


def _initializer_array(init: onnx.TensorProto, dt) -> np.ndarray:
    """An initializer's data, its declared size checked first (before anything is allocated)."""
    limits.check_initializer(init.name, tuple(init.dims), dt)
    try:
        return numpy_helper.to_array(init)
    except (ValueError, TypeError) as exc:   # numpy_helper: the data does not fill the dims
        raise ModelError(f"initializer {init.name!r} ({dt.name}[{','.join(map(str, init.dims))}]): its data does "
                         f"not match its dims and data type ({exc}); the model file is damaged or was written "
                         "wrongly: re-export it") from None


def _frozen_value(vi: onnx.ValueInfoProto, value, dt) -> np.ndarray:
    """An input frozen with input_values: the given numbers in the input's dtype and shape."""
    arr = np.asarray(value)
    try:
        arr = arr.astype(dt.np, casting="unsafe" if arr.dtype.kind in "biuf" else "no")
    except (TypeError, ValueError):
        raise ShapeError(f"{value_option(vi.name, value)}: cannot convert {value!r} to {dt.name}") from None
    tt = vi.type.tensor_type
    declared = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] if tt.HasField("shape") else None
    if declared is not None and arr.shape != tuple(declared):
        if arr.size == int(np.prod([d or 1 for d in declared])) and all(d is not None for d in declared):
            arr = arr.reshape(declared)
        elif not (len(declared) == arr.ndim and all(d is None or d == a for d, a in zip(declared, arr.shape))):
            raise ShapeError(f"{value_option(vi.name, value)}: {arr.size} value(s) of shape {list(arr.shape)} do "
                             f"not fit the input's declared shape {vi.name}{pins_mod.dims_text(declared)}")
    return np.asarray(arr, order="C")


def _check(loaded: Loaded) -> None:
    """onnx.checker over the model, once per Loaded. It checks serialized bytes: the file's when
    they are the whole model (no external data), which saves serializing the proto again (0.8 s
    of a 200 MB BERT's compile, as long again to ask the proto its ByteSize)."""
    if loaded.checked:
        return
    try:
        onnx.checker.check_model(loaded.raw if loaded.whole else loaded.proto)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0]
        raise ModelError(f"the ONNX model is invalid: {first}") from None
    loaded.checked = True


def import_onnx(model, input_shapes: dict[str, tuple[int, ...]] | None = None,
                input_values: dict[str, object] | None = None) -> Graph:
    loaded = load_model(model)
    proto, raw = loaded.proto, loaded.raw
    pins = pins_mod.shapes(input_shapes)
    dims = dynamic_dims.Symbols()
    frozen = dict(input_values or {})
    _check(loaded)
    opsets = {(o.domain or ""): o.version for o in proto.opset_import}
    if "ai.onnx" in opsets:
        opsets.setdefault("", opsets.pop("ai.onnx"))
    g = proto.graph
    for vi in list(g.input) + list(g.output):
        if vi.type.WhichOneof("value") not in (None, "tensor_type"):
            raise UnsupportedOpError(f"{'input' if vi in g.input else 'output'} {vi.name!r} is a "
                                     f"{vi.type.WhichOneof('value').replace('_type', '')}; om2gen compiles models "
                                     "whose inputs and outputs are tensors")
    support.check(g, opsets)
    initialized = {i.name for i in g.initializer}
    pins_mod.check_names(pins, frozen, [(vi.name, pins_mod.dims_text(_declared(vi))) for vi in g.input
                                        if vi.name not in initialized])
    values: dict[str, Value] = {}
    for init in g.initializer:
        dt = dtypes.from_onnx(init.data_type, f"initializer {init.name!r}")
        arr = _initializer_array(init, dt)
        values[init.name] = Value(init.name, dt, tuple(arr.shape), np.asarray(arr, order="C"))
    inputs = []
    for vi in g.input:
        if vi.name in values:
            continue  # an initializer listed as input (IR < 4 style): a constant
        dt = dtypes.from_onnx(vi.type.tensor_type.elem_type, f"input {vi.name!r}")
        if vi.name in frozen:
            arr = _frozen_value(vi, frozen[vi.name], dt)
            values[vi.name] = Value(vi.name, dt, tuple(arr.shape), arr)
            continue
        values[vi.name] = Value(vi.name, dt, _pinned_shape(vi, pins, dt, dims))
        inputs.append(vi.name)

    nodes = []
    used_names = set()
    for i, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{i}"
        while name in used_names:
            name = f"{name}_{i}"
        used_names.add(name)
        domain = n.domain if n.domain not in ("ai.onnx",) else ""
        node = Node(name, n.op_type, list(n.input), list(n.output),
                    {a.name: attribute_value(a) for a in n.attribute}, domain, opsets.get(domain, 1))
        nodes.append(node)

    graph = Graph(g.name or "model", values, nodes, inputs, [o.name for o in g.output], opsets,
                  source_digest=hashlib.sha256(raw).hexdigest(), producer=proto.producer_name)
    infer_shapes(graph)
    _check_output_types(graph, g.output, nodes)
    return graph


def _check_output_types(graph: Graph, declared: list[onnx.ValueInfoProto], nodes: list[Node]) -> None:
    """A graph output the model declares with one dtype but computes as another is a broken model
    (ONNX Runtime refuses it); compiled, the archive would hand back the other dtype."""
    for vi in declared:
        elem = vi.type.tensor_type.elem_type
        got = graph.values[vi.name].dtype
        if elem and elem != got.onnx:
            name = onnx.TensorProto.DataType.Name(elem) if elem in onnx.TensorProto.DataType.values() else elem
            producer = next((f"node {n.name!r} ({n.op_type})" for n in nodes if vi.name in n.outputs), "a constant")
            raise ModelError(f"graph output {vi.name!r} is declared {name} but {producer} computes it as "
                             f"{got.name}; fix the output's type in the model or re-export it")


def infer_shapes(graph: Graph) -> None:
    """Runs every op's infer() in order. Nodes whose inputs are all constant are folded (their
    outputs become constants) and Constant nodes become constant values; both leave the graph."""
    dynamic = dynamic_dims.Failures()
    graph.nodes = _infer_nodes(graph, graph.nodes, dynamic=dynamic)
    dynamic.check(graph)
    for name in graph.outputs:
        if name not in graph.values:
            raise ModelError(f"graph output {name!r} is produced by no node")


def _infer_nodes(graph: Graph, nodes: list[Node], reads: dict[str, list[str]] | None = None,
                 dynamic: dynamic_dims.Failures | None = None) -> list[Node]:
    """Infers `nodes` in order (values go into graph.values); returns the nodes that remain.
    reads: {value name: the names its producer read}, filled as nodes are inferred (shared with
    the regions of If nodes, so that an If can say which model inputs its condition comes from).
    dynamic: where the nodes that cannot take a dynamic model's shapes are collected."""
    reads = {} if reads is None else reads
    dynamic = dynamic_dims.Failures() if dynamic is None else dynamic
    kept = []
    work = deque(nodes)
    while work:
        node = work.popleft()
        if dynamic.downstream(node):
            continue
        ins = [graph.values.get(n) if n else None for n in node.inputs]
        for n, v in zip(node.inputs, ins):
            if n and v is None:
                raise ModelError(f"node {node.name!r} ({node.op_type}) reads {n!r}, which nothing produces")
        outs = shape_dims.evaluate(node, ins) or _try_fold(node, ins)
        if outs is not None and node.op_type == "DequantizeLinear" and not node.domain and node.outputs[0] \
                and outs[0].is_const:
            graph.dequantized[node.outputs[0]] = Dequantized(node, tuple(ins))   # its quantized form
        if outs is None and dynamic.refuses(node, ins, registry.lookup(node)):
            continue
        if outs is None:
            op = registry.lookup(node)
            expand = getattr(op, "expand", None)
            replacement = expand(node, ins) if expand else None
            if replacement is not None:  # e.g. an If with a known condition: its branch takes its place
                work.extendleft(reversed(replacement))
                continue
            regions = getattr(op, "infer_regions", None)
            try:
                if regions is not None:  # an op with subgraphs (If, Loop): they are inferred as regions
                    outs = regions(node, ins, lambda sub: _infer_nodes(graph, sub, reads, dynamic), graph.values,
                                   inputs_of=lambda name: _inputs_behind(graph, reads, name))
                    if isinstance(outs, registry.Expansion):   # e.g. a Loop unrolled: its nodes instead
                        work.extendleft(reversed(outs.nodes))
                        continue
                    if outs is None:   # a node in a branch cannot take the dynamic shapes: skipped as behind it
                        dynamic.values.update(o for o in node.outputs if o)
                        continue
                else:
                    outs = op.infer(node, ins)
            except symbolic.Undecidable as exc:   # the op's static code asked what only the run knows
                dynamic.undecided(node, exc.question)
                continue
        limits.check_outputs(node, ins, outs)
        value_bounds.propagate(node, ins, outs)   # what a data-dependent op downstream is bounded by
        for name, val in zip(node.outputs, outs):
            if name:
                reads[name] = node.inputs
                val.name = name
                graph.values[name] = val
                if val.is_const and node.op_type != "Constant":   # a folded node: what it was computed from
                    graph.derive(name, node.inputs, f"{node.op_type} {node.name!r} evaluated at compile time")
        if not all(v.is_const or v.dims is not None for n, v in zip(node.outputs, outs) if n):
            kept.append(node)   # (a value known as dims, like a constant, needs no node to make it)
    return kept


def _inputs_behind(graph: Graph, reads: dict[str, list[str]], name: str) -> list[str]:
    """The run-time model inputs the value `name` is computed from."""
    inputs, seen, todo = set(graph.inputs), set(), [name]
    while todo:
        n = todo.pop()
        if n and n not in seen:
            seen.add(n)
            todo.extend(reads.get(n, ()))
    return [i for i in graph.inputs if i in seen and i in inputs]


def _try_fold(node: Node, ins: list[Value | None]) -> list[Value] | None:
    if not fold.can_fold(node, ins):
        return None
    predicted = _predicted(node, ins)
    if predicted is not None:   # a node whose output is too big to fold (or to exist) is never evaluated
        limits.check_outputs(node, ins, predicted)
        if not fold.small_enough([v for n, v in zip(node.outputs, predicted) if n]):
            return None
    try:
        arrays = fold.evaluate(node, ins)
    except Exception:  # the reference implementation rejects it: compile it as a kernel instead
        return None
    if arrays is None:
        return None
    return [Value("", dtypes.from_numpy(a.dtype), tuple(a.shape), a) for a in arrays]


def _predicted(node: Node, ins: list[Value | None]) -> list[Value] | None:
    """The outputs the op's infer() gives, or None where it refuses (folding may still evaluate
    what om2gen would not compile as a kernel, e.g. a Conv on integers). A malformed node (a flag
    of 2, a stride of 0) is refused here, not folded by what the reference makes of it."""
    try:
        return registry.lookup(node).infer(node, ins)
    except ModelError:
        raise
    except Om2Error:
        return None
