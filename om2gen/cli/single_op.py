"""Single-operator compile (GE's BuildSingleOpModel path): one operator, given by its type, its
operands and its attributes, becomes a one-node ONNX model that om2gen.pipeline.compile turns into
an .om2 archive (or a classic .om file).

    compile_op("Conv", ["x:float32:1,3,32,32", ("w", weights)], {"pads": [1, 1, 1, 1]}, "conv.om2")

The op type is an ONNX operator (checked against its onnx.defs schema at the opset: input count,
dtypes, attribute names and types, required attributes), a GE op type the GE frontend maps
(Conv2D, MatMulV2, ...: ge_import.translate_op turns it into the ONNX nodes it stands for), or
an operator of a custom-op library. Output dtypes and shapes come from om2gen's own inference, so
a bad combination is reported before any kernel compiles and nothing is written.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import onnx
from onnx import TensorProto, defs, helper, numpy_helper

from ..advice import in_cli
from ..errors import ModelError, NeedsConstantError, ShapeError, UnsupportedOpError
from ..frontend import ge_import, gears
from ..frontend.onnx_import import infer_shapes
from ..ir.graph import Graph, Node, Value
from ..ops import registry
from ..so_in_om import custom_libraries
from ..toolchain import targets
from .op_spec import Operand, did_you_mean, onnx_attribute, parse_const, parse_input, parse_operands, typed_attributes

FRONTENDS = ("onnx", "ge")
CUSTOM_DOMAIN = "om2.custom"     # the domain a custom operator's node gets when none is given
_OPTION = defs.OpSchema.FormalParameterOption


def newest_opset() -> int:
    """The default opset: om2gen's ops are registered at every version up to the newest the
    installed onnx defines."""
    return defs.onnx_opset_version()


# --------------------------------------------------------------------------------------------
# which operator

def _resolve(op_type: str, domain: str, opset: int, frontend: str | None):
    """→ ("onnx", schema) | ("ge", None) | ("custom", None)."""
    if frontend not in (None, *FRONTENDS):
        raise ModelError(f"unknown frontend {frontend!r}; choose one of: {', '.join(FRONTENDS)}")
    custom = custom_libraries.library_for(op_type) is not None
    if frontend == "ge":
        if op_type in ge_import.HANDLERS:
            return "ge", None
        raise UnsupportedOpError(f"{op_type} is not a GE op type om2gen maps"
                                 f"{did_you_mean(op_type, ge_import.HANDLERS)}; GE op types: "
                                 f"{', '.join(sorted(ge_import.HANDLERS))}")
    if domain not in ("", "ai.onnx"):
        if custom:
            return "custom", None
    elif defs.has(op_type):
        try:
            schema = defs.get_schema(op_type, opset, "")
        except defs.SchemaError:
            first = min(s.since_version for s in defs.get_all_schemas_with_history() if s.name == op_type)
            raise ModelError(f"{op_type} is not defined at opset {opset}; ONNX has it from opset {first}") from None
        if schema.deprecated:
            raise ModelError(f"{op_type} is deprecated at opset {opset} (since opset {schema.since_version}); "
                             "choose an older opset")
        if ("", op_type) in registry.registered():
            return "onnx", schema
        if custom:
            return "custom", None
        supported = registry.supported_ops()
        raise UnsupportedOpError(f"{op_type} is an ONNX operator, but om2gen has no kernel for it"
                                 f"{did_you_mean(op_type, supported)}; a custom-op library (--custom-op-lib) can "
                                 "provide it (README: Supported operators)")
    elif custom:
        return "custom", None
    elif frontend is None and op_type in ge_import.HANDLERS:
        return "ge", None
    known = set(registry.supported_ops()) | set(ge_import.HANDLERS) | set(custom_libraries.active_op_types())
    where = f" in domain {domain!r}" if domain not in ("", "ai.onnx") else ""
    raise UnsupportedOpError(f"unknown operator {op_type!r}{where}: not an ONNX operator, a GE op type om2gen maps "
                             f"or a custom operator of the given libraries{did_you_mean(op_type, known)}")


# --------------------------------------------------------------------------------------------
# operands against the schema

def _check_inputs(op_type: str, schema, operands: list[Operand | None]) -> None:
    params = list(schema.inputs)
    n = len(operands)
    if n > schema.max_input:
        raise ModelError(f"{op_type} takes at most {schema.max_input} input(s) ({', '.join(p.name for p in params)}), "
                         f"{n} given")
    if n < schema.min_input:
        missing = ", ".join(f"{i} ({params[i].name})" for i in range(n, schema.min_input))
        raise ModelError(f"{op_type} needs input(s) {missing}; give them with --input or --const")
    constraints = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    bound: dict[str, tuple[int, Operand]] = {}
    for i, o in enumerate(operands):
        param = params[min(i, len(params) - 1)]
        if o is None:
            if param.option == _OPTION.Single:
                raise ModelError(f"{op_type} input {i} ({param.name}) is required; it cannot be skipped")
            continue
        type_str = f"tensor({TensorProto.DataType.Name(o.dtype.onnx).lower()})"
        allowed = constraints.get(param.type_str, [param.type_str])
        if type_str not in allowed:
            names = ", ".join(a[7:-1] for a in allowed)
            raise ModelError(f"{op_type} input {i} ({param.name}, {o.name!r}) is {o.dtype.name}; "
                             f"{param.type_str} allows: {names}")
        if param.type_str in constraints:
            j, first = bound.setdefault(param.type_str, (i, o))
            if first.dtype != o.dtype:
                raise ModelError(f"{op_type} input {i} ({o.name!r}) is {o.dtype.name} but input {j} ({first.name!r}) "
                                 f"is {first.dtype.name}; both are of type {param.type_str}, so they must match")


def _output_count(op_type: str, schema, attrs: dict, operands) -> int:
    params = list(schema.outputs)
    if params and params[-1].option == _OPTION.Variadic:
        if "num_outputs" in attrs:
            return int(attrs["num_outputs"])
        split = next((o for p, o in zip(schema.inputs, operands) if p.name == "split"), None)
        if split is not None and split.is_const:
            return int(split.value.size)
        raise ModelError(f"{op_type} has a variadic output; name the outputs with --output (one per output)")
    required = sum(1 for p in params if p.option == _OPTION.Single)
    return max(required, 1)


# --------------------------------------------------------------------------------------------
# the model

def build_model(op_type: str, inputs, attrs=None, *, outputs=None, domain: str = "", opset: int | None = None,
                frontend: str | None = None, custom_op_libs=None, target: str | None = None) -> onnx.ModelProto:
    """The one-operator ONNX model compile_op compiles (for a GE op type: the ONNX nodes it maps to).

    inputs: in the operator's input order, each 'NAME:DTYPE:SHAPE' (a run-time input),
    'NAME:DTYPE:SHAPE=V0,V1,...' / '...=FILE.npy' (a constant), (name, array) (a constant),
    (name, dtype, shape), an Operand, or None (an absent optional input).
    attrs: {name: value} or ['K=V' / 'K:TYPE=V' texts]. outputs: output names ("" skips an optional
    output); default: the op's required outputs, named as in its schema."""
    tgt = targets.get_targets(target)[0]   # several kernel sets (a comma list) share one arch
    libraries = [custom_libraries.load_library(p, tgt) for p in custom_libraries.find_libraries(custom_op_libs)]
    with custom_libraries.activated(libraries):
        return _build(op_type, parse_operands(inputs), attrs, outputs, domain or "", opset, frontend)


def _build(op_type, operands, attrs, outputs, domain, opset, frontend) -> onnx.ModelProto:
    if opset is not None and (not isinstance(opset, int) or not 1 <= opset <= newest_opset()):
        raise ModelError(f"opset {opset!r} is out of range; the installed onnx defines opsets 1..{newest_opset()}")
    kind, schema = _resolve(op_type, domain, opset or newest_opset(), frontend)
    if kind == "ge":
        if opset is not None and opset != ge_import.OPSET:
            raise ModelError(f"{op_type} is a GE op type; GE ops translate to ONNX opset {ge_import.OPSET}, so "
                             "leave the opset out")
        if domain:
            raise ModelError(f"{op_type} is a GE op type; GE ops have no domain, so leave the domain out")
        return _build_ge(op_type, operands, attrs, outputs)
    opset = opset or newest_opset()
    if kind == "onnx":
        _check_inputs(op_type, schema, operands)
    values, kinds = typed_attributes(op_type, attrs, schema)
    if kind == "custom":
        domain = domain if domain not in ("", "ai.onnx") else CUSTOM_DOMAIN
        count, names = (len(outputs) if outputs else 1), []
    else:
        domain = ""
        count = len(outputs) if outputs else _output_count(op_type, schema, values, operands)
        if not schema.min_output <= count <= schema.max_output:
            raise ModelError(f"{op_type} has {schema.min_output}..{schema.max_output} outputs, {count} named")
        names = [p.name for p in schema.outputs]
    out_names = list(outputs) if outputs else _default_names(names, count, operands)
    _check_output_names(out_names, operands)
    graph = _graph(op_type, operands, opset, domain)
    node = Node(op_type, op_type, [o.name if o else "" for o in operands], out_names, dict(values), domain,
                opset if not domain else 1)
    graph.nodes = [node]
    graph.outputs = [n for n in out_names if n]
    try:
        infer_shapes(graph)
    except NeedsConstantError as exc:
        raise _needs_const(exc, op_type, operands) from None
    onnx_node = helper.make_node(op_type, node.inputs, out_names, name=op_type, domain=domain)
    onnx_node.attribute.extend(onnx_attribute(k, v, kinds.get(k)) for k, v in sorted(values.items()))
    return _model(graph, [onnx_node])


def _build_ge(op_type, operands, attrs, outputs) -> onnx.ModelProto:
    from ..formats.om import proto
    values, _ = typed_attributes(op_type, attrs, None)
    graph = _graph(op_type, operands, ge_import.OPSET, "")
    try:
        nodes, produced = ge_import.translate_op(graph, proto.OpDef(name=op_type, type=op_type),
                                                 [o.name if o else "" for o in operands], values)
    except NeedsConstantError as exc:
        raise _needs_const(exc, op_type, operands) from None
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise ModelError(f"GE op {op_type}: the inputs or attributes do not have the form it expects ({exc}); "
                         f"attributes given: {values or '(none)'}") from None
    if outputs and len(outputs) > len(produced):
        raise ModelError(f"GE op {op_type} has {len(produced)} output(s), {len(outputs)} named")
    names = list(outputs) if outputs else _default_names(["y"], len(produced), operands)
    _check_output_names(names, operands)
    rename = {produced[i]: n for i, n in enumerate(names) if i in produced}
    for node in nodes:
        node.outputs = [rename.get(n, n) for n in node.outputs]
    for old, new in rename.items():
        graph.values[new] = graph.values.pop(old)
    graph.nodes, graph.outputs = nodes, [n for n in names if n]
    onnx_nodes = []
    for n in nodes:
        onnx_nodes.append(helper.make_node(n.op_type, n.inputs, n.outputs, name=n.name))
        onnx_nodes[-1].attribute.extend(onnx_attribute(k, v, None) for k, v in sorted(n.attrs.items())
                                        if not k.startswith("_"))
    return _model(graph, onnx_nodes)


def _needs_const(exc: NeedsConstantError, op_type: str, operands) -> NeedsConstantError:
    """compile's advice (freeze the input with --input-value) as single-op advice (make it a --const)."""
    o = next((o for o in operands if o is not None and o.name == exc.value_name), None)
    if o is None:
        return exc
    spec = f"{o.name}:{o.dtype.name}:{','.join(map(str, o.shape))}"
    return NeedsConstantError(f"{op_type}: input {o.name!r} must be known at compile time (om2gen compiles static "
                              f"shapes); give it as a constant: --const {spec}=V0,V1,... (or =FILE.npy)", o.name)


def _graph(op_type: str, operands, opset: int, domain: str) -> Graph:
    values = {o.name: Value(o.name, o.dtype, o.shape, o.value) for o in operands if o is not None}
    opsets = {"": opset, **({domain: 1} if domain else {})}
    return Graph(f"single_op_{op_type}", values, [], [o.name for o in operands if o is not None and not o.is_const],
                 [], opsets, producer="om2gen compile-op")


def _default_names(formal: list[str], count: int, operands) -> list[str]:
    taken = {o.name for o in operands if o is not None}
    names = []
    for i in range(count):
        name = formal[min(i, len(formal) - 1)] if formal else "y"
        if formal and i >= len(formal) - 1 and count > len(formal):
            name = f"{name}_{i - len(formal) + 1}"
        while name in taken:
            name += "_out"
        taken.add(name)
        names.append(name)
    return names


def _check_output_names(names: list[str], operands) -> None:
    taken = {o.name for o in operands if o is not None}
    real = [n for n in names if n]
    if not real:
        raise ModelError("every output is skipped (\"\"); name at least one with --output")
    for name in real:
        if name in taken or real.count(name) > 1:
            raise ModelError(f"output name {name!r} is used twice (by an input or another output); choose another "
                             "with --output")


def _model(graph: Graph, nodes: list) -> onnx.ModelProto:
    used = {n for node in nodes for n in node.input}
    inits = [numpy_helper.from_array(v.const, name) for name, v in graph.values.items() if v.is_const and name in used]

    def io(name):   # a size the run decides (NonZero's count) is a named dim
        v = graph.values[name]
        return helper.make_tensor_value_info(name, v.dtype.onnx, [d if isinstance(d, int) else str(d) for d in v.shape])
    g = helper.make_graph(nodes, graph.name, [io(n) for n in graph.inputs], [io(n) for n in graph.outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(graph.opsets.items())],
                             producer_name="om2gen compile-op")


def compile_op(op_type: str, inputs, attrs, output, *, outputs=None, domain: str = "",
               opset: int | None = None, frontend: str | None = None, target: str | None = None,
               format: str | None = None, custom_op_libs=None, debug: bool = False, jobs: int | None = None,
               progress: bool = False, **gear_options) -> Path:
    """Compiles one operator into an .om2 archive (format="om2") or a classic .om file ("om") at
    `output` (without `format`: as its extension says, see om2gen.compile); arguments as
    build_model's. gear_options: om2gen.compile's dynamic_batch_size, dynamic_image_size,
    dynamic_dims and input_format, for inputs whose shapes mark dims -1. Nothing is written when
    anything is wrong."""
    from ..pipeline import compile as om2_compile
    model, shapes = geared_model(op_type, inputs, attrs, gear_options, outputs=outputs, domain=domain, opset=opset,
                                 frontend=frontend, custom_op_libs=custom_op_libs, target=target)
    return om2_compile(model, output, custom_op_libs=custom_op_libs, target=target, debug=debug, jobs=jobs,
                       progress=progress, format=format, input_shapes=shapes, **gear_options)


GEAR_OPTIONS = ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims", "input_format")


def _minus_one_without_gears(operand: Operand) -> str:
    """The -1-without-a-gear error, naming the operand as the user wrote it."""
    text = f"{operand.name}:{operand.dtype.name}:{','.join(map(str, operand.shape))}"
    return gears.no_gears_for(f"--input {text}" if in_cli() else f"input {text!r}")


def geared_model(op_type: str, inputs, attrs, gear_options: dict, **build) -> tuple[onnx.ModelProto, dict]:
    """build_model's model, and the input shapes to compile it with. Without a -1 dim and a gear
    option that is build_model's model as it is. Otherwise the operator is checked at every gear
    (build_model at that gear's shapes), and the model's dims that differ between gears are made
    symbolic, so that om2gen.compile pins them per gear."""
    unknown = set(gear_options) - set(GEAR_OPTIONS)
    if unknown:
        raise TypeError(f"compile_op() got unexpected keyword argument(s) {', '.join(sorted(unknown))}")
    operands = parse_operands(inputs)
    runtime = {o.name: o.shape for o in operands if o is not None and not o.is_const}
    if not any(v is not None for k, v in gear_options.items() if k != "input_format"):
        dynamic = [o for o in operands if o is not None and not o.is_const and -1 in o.shape]
        if dynamic:
            raise ShapeError(_minus_one_without_gears(dynamic[0]))
        return build_model(op_type, operands, attrs, **build), {}
    spec = gears.resolve(input_shapes=runtime, declared=[(n, tuple(None if d == -1 else d for d in s))
                                                          for n, s in runtime.items()], **gear_options)
    models = []
    for i in range(len(spec.gears)):
        at = spec.shapes(i)
        models.append(build_model(op_type, [o if o is None or o.is_const else dataclasses.replace(o, shape=at[o.name])
                                            for o in operands], attrs, **build))
    model = models[0]
    for k, vi in enumerate([*model.graph.input, *model.graph.output]):
        shapes = [[d.dim_value for d in ([*m.graph.input, *m.graph.output][k]).type.tensor_type.shape.dim]
                  for m in models]
        for j, dim in enumerate(vi.type.tensor_type.shape.dim):
            if len({s[j] for s in shapes}) > 1:
                dim.Clear()
                dim.dim_param = f"{vi.name}_d{j}"
    return model, runtime


def run_cli(args) -> int:
    """`om2gen compile-op` (om2gen/cli/compile_op.py declares the arguments)."""
    operands = [None if item is None else (parse_input(item[1]) if item[0] == "input" else parse_const(item[1]))
                for item in args.operands or []]
    gear_options = {k: getattr(args, k) for k in GEAR_OPTIONS if getattr(args, k, None) is not None}
    model, shapes = geared_model(args.op, operands, list(args.attr or []), gear_options, outputs=args.outputs,
                                 domain=args.domain or "", opset=args.opset, frontend=args.frontend,
                                 custom_op_libs=args.custom_op_lib, target=args.target)
    from ..pipeline import compile as om2_compile
    out = om2_compile(model, args.output, custom_op_libs=args.custom_op_lib, target=args.target, debug=args.debug,
                      jobs=args.jobs, progress=not args.quiet, format=args.format, input_shapes=shapes,
                      **gear_options)
    if args.save_onnx:
        path = Path(args.save_onnx)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            onnx.save(model, tmp)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0
