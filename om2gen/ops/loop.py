"""Loop: the body becomes a region of the node, inferred once for values of static shapes, and
lowering (lower/emit.py) emits a real loop in the captured task list: the body's tasks between
labels, a LoopNext kernel that advances iteration_num, evaluates the exit test and writes the
index a LABEL_SWITCH_BY_INDEX reads (back to the body, or out), the carried values copied into
the next iteration's inputs.

ONNX semantics (every opset; 11, 13, 16 and later differ only in the types allowed, and om2gen
compiles tensors): inputs M (max trip count, optional), cond (optional), the initial values of N
loop-carried values; the body reads (iteration_num, cond, carried...) and writes (cond,
carried..., K scan values); the Loop's outputs are the final carried values, then each scan
value stacked over the iterations. The loop runs while `i < M && cond`; without a cond input
the body's cond output is ignored, as the spec says (ONNX Runtime honours it there: a body that
computes a cond of its own under a Loop without one stops where ONNX Runtime's does not).

Shapes are static: a carried value keeps its shape and dtype, and a scan output needs the trip
count at compile time (M constant, the cond constant and the body's cond its cond input or a
constant true): its shape is [trip count, ...]. A body whose shapes depend on the iteration
number (a Slice by it) cannot be one compiled body; with a small known trip count the loop is
unrolled instead, each iteration with iteration_num a constant (the one case where unrolling is
the better choice: the real loop cannot be compiled at all).

A carried value the body passes through unchanged (its output is its input: paddle2onnx carries
every weight of SLANet's decoder so) is read from outside the loop instead (Loop.expand): its
final value is its initial one, and a constant stays a constant inside the body, where its
Transpose folds and its MatMul packs it at compile time.
"""
from __future__ import annotations

import math

import numpy as np
import onnx

from .. import advice
from ..errors import ModelError, NeedsConstantError, ShapeError, UnsupportedOpError
from ..ir import dtypes, symbolic
from ..ir.graph import LOOP_IO, REGIONS, LoopIO, Node, Value
from ..ir.program import KernelCall
from . import common, value_bounds
from .control import SCOPE, inline_subgraph, one_element
from .registry import REQUIRED, Expansion, Op, register

# Unrolled at most (only when the body needs a constant iteration number): iterations, and body
# nodes over all of them; a longer loop of that kind is refused with the reason.
MAX_UNROLL_TRIPS = 64
MAX_UNROLL_NODES = 4096

INT64, BOOL = dtypes.INT64, dtypes.BY_NAME["bool"]


@register("Loop", since=1)
class Loop(Op):
    attrs = {"body": REQUIRED}
    dynamic_shapes = True   # (its body's nodes are each inferred over the shapes, and refused by name)

    def infer_regions(self, node, ins, infer_nodes, values, inputs_of=None, carried_shapes=None):
        """The body inferred as region "body" from the values it reads (its inputs get the initial
        values' dtypes and shapes, or carried_shapes); afterwards node.inputs is [M, cond, initial
        values...] + every outer value the body reads. Returns the outputs' values, or an
        Expansion (the loop unrolled) when the body needs its iteration number at compile time.
        A carried number that starts as [] and that the body makes [1] (Paddle's exports mix the
        two) is [1] throughout: the body is inferred again with it so."""
        body = self.attr(node, "body")
        while len(node.inputs) < 2:
            node.inputs.append("")
        ins = list(ins) + [None] * (2 - len(ins))
        n = len(node.inputs) - 2
        m, cond, initial = ins[0], ins[1], ins[2:]
        k = len(body.output) - 1 - n
        _check_signature(node, body, n, k, m, cond, initial)
        inputs_of = inputs_of or (lambda name: [])
        kind = _cond_out_kind(body)
        prefix = f"{node.name}/body/"
        names = [f"{node.name}/body:{i}" for i in range(len(body.output))]
        body_inputs = [prefix + vi.name for vi in body.input]
        shapes = [_scalar_shape(body.input[0]), _scalar_shape(body.input[1])] \
            + list(carried_shapes or [v.shape for v in initial])
        types = [INT64, BOOL] + [v.dtype for v in initial]
        before = set(values)
        for name, dt, shape in zip(body_inputs, types, shapes):
            values[name] = Value(name, dt, shape)
        _bound_inputs(node, body, prefix, names, body_inputs, m, initial, values)
        try:
            nodes = infer_nodes(inline_subgraph(body, prefix, names, node.opset, node.attrs.get(SCOPE)))
        except ShapeError as exc:   # NeedsConstantError too: a Slice by the iteration number, say
            if isinstance(exc, NeedsConstantError) and exc.value_name and not exc.value_name.startswith(prefix):
                raise   # an outer value it needs (a model input to freeze): unrolling would not help
            for name in set(values) - before:
                del values[name]
            trips = _trip_count(node, m, cond, kind)
            sources = _sources(node, m, cond, kind, inputs_of)
            return _unrolled(node, body, n, k, trips, shapes[:2], exc, m, cond, sources)
        if any(name not in values for name in names):
            return None   # a body node could not take a dynamic model's shapes (the frontend names it)
        cond_out = values[names[0]]
        if cond_out.dtype != BOOL or cond_out.size != 1:
            raise ModelError(f"node {node.name!r} (Loop): the body's cond output is {cond_out.describe()}; it must be "
                             "a single bool")
        if kind is None and cond_out.is_const:
            kind = bool(np.asarray(cond_out.const).reshape(-1)[0])
        trips = _trip_count(node, m, cond, kind)
        read = {i for x in nodes for i in x.inputs}
        once = m is not None and m.is_const and int(np.asarray(m.const).reshape(-1)[0]) >= 1 \
            and (cond is None or cond.is_const and bool(np.asarray(cond.const).reshape(-1)[0]))
        reshaped = [_carried_shape(v, values[names[1 + j]], shape, once and body_inputs[2 + j] not in read)
                    for j, (v, shape) in enumerate(zip(initial, shapes[2:]))]
        if reshaped != shapes[2:] and carried_shapes is None:
            for name in set(values) - before:
                del values[name]
            return self.infer_regions(node, ins, infer_nodes, values, inputs_of, reshaped)
        outs = []
        for j, v in enumerate(initial):
            got = values[names[1 + j]]
            v = Value(v.name, v.dtype, shapes[2 + j])
            if got.dtype != v.dtype or not symbolic.decided(lambda: got.shape == v.shape, False):
                exc = UnsupportedOpError(
                    f"node {node.name!r} (Loop): loop-carried value {body.input[2 + j].name!r} starts as "
                    f"{v.describe()} and the body makes it {got.describe()}; a carried value whose shape or dtype "
                    "changes between iterations needs dynamic shapes, and om2gen compiles static ones")
                if got.dtype != v.dtype or not symbolic.symbols(list(got.shape)):
                    raise exc
                # a run-time Slice (ops/slice_runtime.py) by the iteration number, say: unrolled, its
                # bounds are constants
                for name in set(values) - before:
                    del values[name]
                return _unrolled(node, body, n, k, trips, shapes[:2], exc, m, cond,
                                 _sources(node, m, cond, kind, inputs_of))
            outs.append(Value("", v.dtype, v.shape))
        used = [s < len(node.outputs) - n and bool(node.outputs[n + s]) for s in range(k)]
        rows = trips
        if any(used) and trips is None:     # the rows a count the run decides, bounded by M's most
            most = _most_trips(m)
            if most is None:
                raise _scan_error(node, body, m, cond, n, _sources(node, m, cond, kind, inputs_of))
            rows = common.count_dim(node, max(most, 0))
        scans = [values[x] for x in names[1 + n:]]
        outs += [Value("", v.dtype, (rows if u else 0,) + tuple(v.shape)) for v, u in zip(scans, used)]

        node.attrs[REGIONS] = {"body": (nodes, names)}
        node.attrs[LOOP_IO] = LoopIO(body_inputs, n, trips, cond is not None)
        defined = {o for x in nodes for o in x.outputs if o} | set(body_inputs)
        captured = {i for x in nodes for i in x.inputs if i and i not in defined}
        captured |= {o for o in names if o not in defined}   # a body output no kept node makes (a constant)
        node.inputs = node.inputs[:2 + n] + sorted(captured)
        return outs[:len(node.outputs)]

    def infer(self, node, ins):
        raise AssertionError("Loop is inferred through infer_regions")

    def expand(self, node: Node, ins) -> list[Node] | None:
        """The loop without its pass-through carried values (the body reads their initial values
        from outside; each final value is an Identity of its initial one), or None if it has none."""
        body = self.attr(node, "body")
        n = len(node.inputs) - 2
        through = [j for j in range(n) if 2 + j < len(body.input) and 1 + j < len(body.output)
                   and body.output[1 + j].name == body.input[2 + j].name and node.inputs[2 + j]]
        if not through:
            return None
        new = onnx.GraphProto()
        new.CopyFrom(body)
        renames = {body.input[2 + j].name: node.inputs[2 + j] for j in through}
        for j in sorted(through, reverse=True):
            del new.input[2 + j]
            del new.output[1 + j]
        _rename_reads(new, renames)
        keep = [j for j in range(n) if j not in through]
        loop = Node(node.name, "Loop", node.inputs[:2] + [node.inputs[2 + j] for j in keep],
                    [node.outputs[j] if j < len(node.outputs) else "" for j in keep] + node.outputs[n:],
                    {**node.attrs, "body": new}, node.domain, node.opset, list(node.fused_from))
        finals = [Node(f"{node.name}/invariant:{j}", "Identity", [node.inputs[2 + j]], [node.outputs[j]], {}, "",
                       node.opset) for j in through if j < len(node.outputs) and node.outputs[j]]
        return [loop, *finals]


def _rename_reads(g: onnx.GraphProto, renames: dict[str, str]) -> None:
    """Every read of a renamed value in g, its outputs and its nodes' subgraphs (which see g's
    names as outer ones) reads the new name."""
    for node in g.node:
        node.input[:] = [renames.get(x, x) for x in node.input]
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _rename_reads(sub, renames)
    for out in g.output:
        out.name = renames.get(out.name, out.name)


def _carried_shape(initial: Value, got: Value, shape: tuple, unread: bool) -> tuple:
    """The shape a carried value takes through the loop: its initial one; the body's where that
    is the same number in other unit dims ([] and [1]); or the body's where the body never reads
    the value and runs at least once (Paddle's exports start a value the loop defines as a
    placeholder scalar), so no iteration and no output sees the initial one."""
    if got.dtype != initial.dtype or not got.is_static:
        return shape
    if one_element(initial, got) or unread:
        return got.shape
    return shape


def _bound_inputs(node, body, prefix: str, names: list[str], body_inputs: list[str], m, initial, values) -> None:
    """Value.bounds of the body's iteration_num (0 ~ M - 1) and of its carried numbers over every
    iteration the trip count allows (ops/value_bounds.py): what a data-dependent op in the body
    (a Range from a carried counter) is planned at."""
    trips = value_bounds.of(m)
    trips = None if trips is None or trips[1] == float("inf") else max(int(trips[1]), 0)
    n = len(initial)
    fixed = {body_inputs[0]: (0, trips - 1)} if trips else {}
    numeric = [v.dtype.name != "bool" and isinstance(v.size, int) and v.size <= 16 for v in initial]
    start = [value_bounds.of(v) if ok else None for v, ok in zip(initial, numeric)]
    if any(b is not None for b in start):
        nodes = inline_subgraph(body, prefix, names, node.opset, node.attrs.get(SCOPE))
        found = value_bounds.carried_bounds(nodes, body_inputs[2:], names[1:1 + n], start, values, fixed, trips)
        for name, b in zip(body_inputs[2:], found):
            values[name].bounds = b
    if fixed:
        values[body_inputs[0]].bounds = fixed[body_inputs[0]]


def _check_signature(node, body: onnx.GraphProto, n: int, k: int, m, cond, initial) -> None:
    where = f"node {node.name!r} (Loop)"
    for vi in list(body.input) + list(body.output):
        kind = vi.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            raise UnsupportedOpError(f"{where}: body value {vi.name!r} is a {kind.replace('_type', '')}; om2gen "
                                     "compiles loops whose values are tensors (no sequence or optional values)")
    if len(body.input) != 2 + n:
        raise ModelError(f"{where}: {n} initial value(s) need a body of {2 + n} inputs (iteration_num, cond, one "
                         f"per carried value); it has {len(body.input)}")
    if k < 0 or len(node.outputs) > n + k:
        raise ModelError(f"{where}: the body has {len(body.output)} outputs and the node {len(node.outputs)}; the "
                         f"body writes cond, the {n} carried values, then its scan values, the node one output per "
                         "carried and scan value")
    if m is not None and (m.dtype != INT64 or m.size != 1):
        raise ModelError(f"{where}: M (the trip count) is {m.describe()}; it must be a single int64")
    if cond is not None and (cond.dtype != BOOL or cond.size != 1):
        raise ModelError(f"{where}: cond is {cond.describe()}; it must be a single bool")
    if any(v is None for v in initial):
        raise ModelError(f"{where}: an initial value of a carried value is missing")
    if m is None and cond is None:
        raise UnsupportedOpError(f"{where}: it has neither M nor cond, so it never ends; give it a trip count "
                                 "or a condition")


def _scalar_shape(vi: onnx.ValueInfoProto) -> tuple:
    """iteration_num and cond are scalars, or [1] where the body declares them so (as ONNX
    Runtime feeds them)."""
    tt = vi.type.tensor_type
    return (1,) if vi.type.HasField("tensor_type") and tt.HasField("shape") and len(tt.shape.dim) == 1 else ()


def _cond_out_kind(body: onnx.GraphProto):
    """What the body's cond output is, as far as its nodes say: "input" (its cond input, through
    Identity nodes), True or False (a constant), or None (computed)."""
    producer = {o: x for x in body.node for o in x.output}
    consts = {t.name: t for t in body.initializer}
    name, seen = body.output[0].name, set()
    while name in producer and producer[name].op_type == "Identity" and name not in seen:
        seen.add(name)
        name = producer[name].input[0]
    if name == body.input[1].name:
        return "input"
    tensor = consts.get(name)
    if name in producer and producer[name].op_type == "Constant":
        tensor = next((a.t for a in producer[name].attribute if a.name == "value"), None)
    if tensor is not None:
        arr = onnx.numpy_helper.to_array(tensor).reshape(-1)
        return bool(arr[0]) if arr.size == 1 else None
    return None


def _trip_count(node, m, cond, kind) -> int | None:
    """How many times the body runs, when the compile knows it. kind: the body's cond output
    (_cond_out_kind, or a constant the inference found)."""
    limit = None if m is None else (max(int(np.asarray(m.const).reshape(-1)[0]), 0) if m.is_const else -1)
    if limit == 0:
        return 0
    if cond is None:   # a for loop: the body's cond is ignored
        return None if limit == -1 else limit
    if not cond.is_const:
        return None
    if not bool(np.asarray(cond.const).reshape(-1)[0]):
        return 0
    if kind is False:
        return 1
    if kind in ("input", True):
        if limit is None:
            raise UnsupportedOpError(f"node {node.name!r} (Loop): its cond is true and stays true, and it has no "
                                     "trip count M, so it never ends")
        return None if limit == -1 else limit
    return None


def _sources(node, m, cond, kind, inputs_of) -> list[str]:
    """The run-time model inputs M and cond come from, when freezing them would make the trip
    count known (a body that computes its cond keeps it unknown whatever is frozen)."""
    if cond is not None and kind not in ("input", True, False):
        return []
    out = []
    for name, v in ((node.inputs[0], m), (node.inputs[1], cond)):
        if v is not None and not v.is_const:
            out += [s for s in inputs_of(name) if s not in out]
    return out


def _run_time(m, cond) -> str:
    parts = (["its trip count M"] if m is not None and not m.is_const else []) \
        + (["its condition cond"] if cond is not None and not cond.is_const else [])
    return " and ".join(parts) + (" are" if len(parts) > 1 else " is")


def _freeze_advice(sources: list[str]) -> str:
    them = "that input" if len(sources) == 1 else "those inputs"
    return f"freeze {them} ({', '.join(advice.value_option(s) for s in sources)})"


def _most_trips(m) -> int | None:
    """The most iterations M allows: a constant's value, or a run-time M's upper value bound (a
    Min against a constant, say); None if nothing bounds it."""
    if m is None:
        return None
    if m.is_const:
        return int(np.asarray(m.const).reshape(-1)[0])
    b = value_bounds.of(m)
    return None if b is None or math.isinf(b[1]) else int(b[1])


def _scan_error(node, body, m, cond, n: int, sources: list[str]) -> ShapeError:
    """A scan output whose row count (the trip count) is only known at run time."""
    scans = ", ".join(repr(vi.name) for vi, out in zip(body.output[1 + n:], node.outputs[n:]) if out)
    where = f"node {node.name!r} (Loop): its scan output(s) {scans} get one row per iteration, and"
    need = ("the rows are then a count only the run knows, which om2gen bounds by the trip count M: M must be a "
            "constant or bounded (a Min against a constant)")
    if sources:
        return NeedsConstantError(f"{where} {_run_time(m, cond)} computed at run time (from "
                                  f"{', '.join(map(repr, sources))}): {need}. To compile it with a trip count known "
                                  f"at compile time, {_freeze_advice(sources)}", sources[0])
    return UnsupportedOpError(f"{where} the body computes its condition at run time, so how many rows there are is "
                              f"data-dependent: {need}, and this Loop's is "
                              f"{'missing' if m is None else 'computed at run time, with nothing bounding it'}. Give "
                              "it a constant M (the most iterations it may run) or bound it with Min against one; "
                              "carried values alone may use a run-time count")


def _unrolled(node, body: onnx.GraphProto, n: int, k: int, trips: int | None, counter_shapes, exc: ShapeError,
              m, cond, sources: list[str]) -> Expansion:
    """The loop unrolled (each iteration's body with iteration_num a constant), for a body that
    cannot be compiled once; or the error saying why it cannot be unrolled either."""
    where = f"node {node.name!r} (Loop)"
    if trips is None:
        if not sources:
            raise exc
        raise NeedsConstantError(
            f"{where}: its body cannot be compiled with static shapes ({exc}). A body whose shapes depend on the "
            f"iteration number compiles unrolled, which needs the trip count at compile time, and "
            f"{_run_time(m, cond)} computed at run time (from {', '.join(map(repr, sources))}): "
            f"{_freeze_advice(sources)}", sources[0]) from None
    if trips * max(len(body.node), 1) > MAX_UNROLL_NODES or trips > MAX_UNROLL_TRIPS:
        raise ShapeError(f"{where}: its body cannot be compiled with static shapes ({exc}); om2gen unrolls a loop "
                         f"whose body needs the iteration number at compile time when it runs at most "
                         f"{MAX_UNROLL_TRIPS} times (and {MAX_UNROLL_NODES} body nodes in all), this one runs "
                         f"{trips} times") from None
    if trips == 0 and any(node.outputs[n:]):
        raise exc
    opset, scope = node.opset, node.attrs.get(SCOPE)
    nodes: list[Node] = []
    state = list(node.inputs[1:2 + n])     # what the next iteration's cond and carried inputs are
    rows: list[list[str]] = [[] for _ in range(k)]
    for i in range(trips):
        p = f"{node.name}/iter{i}/"
        outs = [f"{node.name}/iter{i}:{x}" for x in range(len(body.output))]
        nodes.append(_const(f"{p}iteration_num", p + body.input[0].name, np.full(counter_shapes[0], i, np.int64),
                            opset))
        if state[0]:
            nodes.append(Node(f"{p}cond_in", "Identity", [state[0]], [p + body.input[1].name], {}, "", opset))
        else:
            nodes.append(_const(f"{p}cond_in", p + body.input[1].name, np.full(counter_shapes[1], True), opset))
        for j in range(n):
            nodes.append(Node(f"{p}carried_in{j}", "Identity", [state[1 + j]], [p + body.input[2 + j].name], {}, "",
                              opset))
        nodes += inline_subgraph(body, p, outs, opset, scope)
        state = outs[:1 + n]
        for s in range(k):
            rows[s].append(outs[1 + n + s])
    for j, out in enumerate(node.outputs[:n]):
        if out:
            nodes.append(Node(f"{node.name}/final{j}", "Identity", [state[1 + j]], [out], {}, "", opset))
    for s, out in enumerate(node.outputs[n:]):
        if out:
            parts = []
            for i, row in enumerate(rows[s]):
                parts.append(f"{row}/row")
                nodes += _unsqueeze0(f"{node.name}/iter{i}/scan{s}", row, parts[-1], opset)
            nodes.append(Node(f"{node.name}/scan{s}", "Concat", parts, [out], {"axis": 0}, "", opset))
    return Expansion(nodes)


def _const(name: str, out: str, value: np.ndarray, opset: int) -> Node:
    return Node(name, "Constant", [], [out], {"value": value}, "", opset)


def _unsqueeze0(name: str, src: str, out: str, opset: int) -> list[Node]:
    if opset < 13:
        return [Node(name, "Unsqueeze", [src], [out], {"axes": [0]}, "", opset)]
    return [_const(f"{name}/axes", f"{out}:axes", np.array([0], np.int64), opset),
            Node(name, "Unsqueeze", [src, f"{out}:axes"], [out], {}, "", opset)]


# ---------------------------------------------------------------------------------------------
# the loop's own kernels (lower/emit.py places them)

def scan_count(node: Node, values: dict) -> str:
    """The symbol of a Loop's scan rows when the run decides them (a data-dependent count, in 0~M),
    else "": its control steps write it, iteration_num being the rows so far."""
    for name in node.outputs[node.attrs[LOOP_IO].carried:]:
        rows = values[name].shape[0] if name else 0
        if isinstance(rows, symbolic.Expr):
            return symbolic.symbols(rows).pop().name
    return ""


def control_call(node: Node, *, first: bool, iteration: Value, cond_in: Value, index: Value, max_trips: Value | None,
                 cond: Value | None, cond_exits: bool, count_symbol: str = "") -> KernelCall:
    """LoopEnter (first: iteration_num = 0, cond_in = cond or true) or LoopNext (iteration_num + 1,
    cond_in = the body's cond output), then index = 0 (run the body) if iteration_num < M (when
    there is an M) and cond_in (when cond_exits), else 1 (exit): the uint32 the loop's
    LABEL_SWITCH_BY_INDEX reads. LoopNext updates iteration_num in place (read and written).
    count_symbol (scan_count): written iteration_num too, which at the exit is the scan rows."""
    inputs = ([] if first else [iteration.name]) + ([max_trips.name] if max_trips is not None else []) \
        + ([cond.name] if cond is not None else [])
    slot = {name: i for i, name in reversed(list(enumerate(inputs)))}
    what = "LoopEnter" if first else "LoopNext"
    test = " && ".join((["iteration_num < M"] if max_trips is not None else [])
                       + (["cond"] if cond_exits else [])) or "true"
    params = {"summary": f"{what} of Loop {node.name!r}: {'0' if first else 'iteration_num + 1'}, index = "
                         f"({test}) ? 0 (body) : 1 (exit)",
              "first": first, "iteration_in": None if first else slot[iteration.name],
              "max_trips": slot[max_trips.name] if max_trips is not None else None,
              "cond": slot[cond.name] if cond is not None else None, "cond_exits": cond_exits}
    return KernelCall("kernels/loop_control.c.j2", what, params, inputs, [iteration.name, cond_in.name, index.name],
                      count_symbol=count_symbol)


def scan_write_call(node: Node, value: Value, iteration: Value, scan: Value) -> KernelCall:
    """Row iteration_num of a scan output = this iteration's scan value."""
    params = {"summary": f"Loop {node.name!r} scan output: {value.describe()} into row iteration_num of "
                         f"{scan.describe()}", "ctype": value.dtype.c_type}
    rows = symbolic.upper_bound(scan.shape[0])   # (a run-time count: its bound, the rows planned)
    return KernelCall("kernels/loop_scan.c.j2", "LoopScan", params, [value.name, iteration.name], [scan.name],
                      block_dim=common.block_dim_for(value.size), tiling={"trips": rows, "row": value.size})
