"""om2gen.compile: ONNX model → .om2 archive (frontend, passes, lowering, codegen, toolchain, archive)."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import advice
from .codegen import autofuse_library, host_library
from .codegen import kernels as kernel_codegen
from .codegen import model_cpp, tiling_library
from .codegen.literals import c_identifier
from .errors import CompileError, ModelError, Om2Error, ShapeError
from .formats.om2 import kernel_sets, layout, writer
from .formats.om2.writer import Entry, json_bytes
from .formats.op_so_store import SoBinType
from .frontend import gears, multi_batch, onnx_import, pins
from .frontend.onnx_import import import_onnx
from .ir import dtypes, symbolic
from .ir.gears import dynamic_output_dims
from .ir.program import LowerContext, Program
from .ir.tasks import ArgKind
from .lower import constant_pool, memplan, rt2_program
from .lower.lowering import lower_graph
from .ops import fused as fused_op
from .passes import dce, optimize
from .so_in_om import custom_libraries, info, providers
from .so_in_om.info import BIN_FILE_PATH
from .toolchain import compiler, kernel_lib, launch_note, targets
from .version import GENERATOR, KERNEL_ABI_VERSION, MODEL_ABI_VERSION


@dataclass
class Options:
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    input_values: dict[str, object] = field(default_factory=dict)
    custom_op_libs: list = field(default_factory=list)
    target: str | None = None
    debug: bool = False
    jobs: int | None = None
    progress: bool = False
    fusion: bool = True                 # the graph rewrites of passes/optimize.py
    winograd: int | None = None         # None: the cost model chooses; 0: off; 2 or 4: that tile size
    # gears (frontend/gears.py): at most one of the three, ATC's value syntax or lists
    dynamic_batch_size: object = None
    dynamic_image_size: object = None
    dynamic_dims: object = None
    input_format: str | None = None     # where H and W are for dynamic_image_size: NCHW (default) or NHWC
    # Winograd's transformed weights: "stored" in the archive, made at "load" by a load task from
    # the raw filters, or "auto" (per layer, by ops/winograd.weights_at_load's cost model)
    winograd_weights: str = "auto"


# Environment overrides of two options, read here once (never in a pass or an op): an option given
# to compile() wins over them, and the manifest records the value used whichever set it.
FUSION_ENV = "OM2GEN_FUSION"
WINOGRAD_ENV = "OM2GEN_WINOGRAD"
FUSION_SETTINGS = {"1": True, "on": True, "yes": True, "true": True, "0": False, "off": False, "no": False,
                   "false": False}
WINOGRAD_SETTINGS = {"auto": None, "off": 0, "0": 0, "2": 2, "4": 4}
WINOGRAD_WEIGHTS_ENV = "OM2GEN_WINOGRAD_WEIGHTS"
WINOGRAD_WEIGHTS_SETTINGS = ("auto", "stored", "load")


def fusion_setting(value, source: str = "fusion") -> bool:
    """fusion=True/False, or as text: on/off (also 1/0, yes/no, true/false); None: $OM2GEN_FUSION,
    else on."""
    if value is None:
        value, source = os.environ.get(FUSION_ENV, "on"), FUSION_ENV
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in FUSION_SETTINGS:
        raise CompileError(f"{source}={value!r} is not a setting: use on or off")
    return FUSION_SETTINGS[text]


def winograd_setting(value, source: str = "winograd") -> int | None:
    """winograd="auto" (the cost model chooses: None), "off" or 0, 2 or 4 (forces that tile size);
    None: $OM2GEN_WINOGRAD, else auto."""
    if value is None:
        value, source = os.environ.get(WINOGRAD_ENV, "auto"), WINOGRAD_ENV
    text = str(value).strip().lower() or "auto"
    if isinstance(value, bool) or text not in WINOGRAD_SETTINGS:
        raise CompileError(f"{source}={value!r} is not a setting: use auto, 0 (off), 2 or 4 (the tile size)")
    return WINOGRAD_SETTINGS[text]


def winograd_weights_setting(value, format: str, source: str = "winograd_weights") -> str:
    """winograd_weights="stored", "load" or "auto"; None: $OM2GEN_WINOGRAD_WEIGHTS, else auto. A
    classic .om has no load tasks (GE's TASK_INFO runs at every replay): auto stores them there,
    and "load" is refused."""
    if value is None:
        value, source = os.environ.get(WINOGRAD_WEIGHTS_ENV, "auto"), WINOGRAD_WEIGHTS_ENV
    text = str(value).strip().lower() or "auto"
    if text not in WINOGRAD_WEIGHTS_SETTINGS:
        raise CompileError(f"{source}={value!r} is not a setting: use auto (per layer, by the cost model), stored "
                           "(in the archive) or load (transformed by a load task from the raw filters)")
    if format == "om" and text == "load":
        raise CompileError(f"{source}=load: a classic .om has no load tasks; write an .om2, or store the "
                           "transformed weights (stored or auto)")
    return "stored" if format == "om" else text


def winograd_name(setting: int | None):
    """The manifest's spelling: "auto", or the tile size (0: off)."""
    return "auto" if setting is None else setting


FORMATS = ("om2", "om")
EXTENSIONS = {".om2": "om2", ".om": "om"}


def output_format(out: Path, format: str | None) -> str:
    """The format to write: `format` if given, else the one the file name's extension names
    (.om2, .om), else om2. A format the extension contradicts is refused."""
    if format is not None and format not in FORMATS:
        raise Om2Error(f"unknown output format {format!r}; choose one of: {', '.join(FORMATS)}")
    by_ext = EXTENSIONS.get(out.suffix.lower())
    if format is None:
        return by_ext or "om2"
    if by_ext is not None and by_ext != format:
        kind = {"om2": "an OM2 archive", "om": "a classic OM file"}
        raise Om2Error(f"{advice.format_option(format)} asks for {kind[format]}, but the output {out.name} has the "
                       f"extension of {kind[by_ext]}; name the file {out.stem}.{format}, or leave "
                       f"{advice.format_option()} out to write {by_ext}")
    return format


def compile(model, output, *, input_shapes=None, input_values=None, custom_op_libs=None, target=None, debug=False,
            jobs=None, progress=False, format=None, frontend=None, fusion=None, winograd=None,
            dynamic_batch_size=None, dynamic_image_size=None, dynamic_dims=None, input_format=None,
            winograd_weights=None) -> Path:
    """Compiles an ONNX model (path or onnx.ModelProto) into an OM2 archive at `output`
    (format="om2") or a classic Ascend GE OM file (format="om", docs/om-format.md). Without
    `format`, the output's extension decides (.om: om; .om2 and anything else: om2); a format the
    extension contradicts (format="om" to x.om2) is refused.

    input_shapes: {input name: static shape} for inputs with dynamic or missing dims (-1 marks a
    dim a gear option decides).
    input_values: {input name: value(s)} freezes inputs as constants (e.g. a sample rate), so
    that shape computations and branches depending on them fold at compile time.
    custom_op_libs: paths of custom-op shared libraries (om2/custom_op.h); the directory named by
    $OM2GEN_CUSTOM_OP_PATH adds more.
    frontend: "onnx", "ge" (a GE IR graph: serialized ge.proto.ModelDef, binary or text) or None
    (by file extension / content, see _import_graph).
    fusion: True/"on" (default) runs the graph rewrites of passes/optimize.py, False/"off" compiles
    every node to its own kernel; None: $OM2GEN_FUSION decides, else on.
    winograd: "auto" (default: the cost model chooses), "off"/0, or 2 or 4 (forces that tile size)
    for 3x3 stride-1 convolutions; None: $OM2GEN_WINOGRAD decides, else auto.
    winograd_weights: where those convolutions' transformed weights come from: "stored" in the
    archive, "load" (the archive holds the raw filters and a load task transforms them at load, to
    the same bytes), or "auto" (default: per layer, whichever the cost model finds smaller without
    loading slower; docs/performance.md); None: $OM2GEN_WINOGRAD_WEIGHTS decides, else auto.
    dynamic_batch_size / dynamic_image_size / dynamic_dims: gears (ATC's options of those names,
    docs/gears.md), one model for several shapes, one chosen per run: input_shapes marks the
    varying dims -1, e.g. input_shapes={"x": (-1, 3, 224, 224)}, dynamic_batch_size=[1, 2, 4, 8];
    image sizes as [(224, 224), (448, 448)] (H, W, where input_format "NCHW" or "NHWC" puts them);
    dims as one tuple per gear of the values of every -1 dim, in input order. ATC's text forms
    ("1,2,4,8", "224,224;448,448") are accepted too."""
    opts = Options(dict(input_shapes or {}), dict(input_values or {}), list(custom_op_libs or []), target, debug,
                   jobs, progress, fusion_setting(fusion), winograd_setting(winograd),
                   dynamic_batch_size, dynamic_image_size, dynamic_dims, input_format)
    out = Path(output)
    format = output_format(out, format)
    opts.winograd_weights = winograd_weights_setting(winograd_weights, format)
    if out.is_dir():
        raise Om2Error(f"output {out} is a directory; give a file name such as {out / 'model.om2'}")
    if not out.parent.is_dir():
        raise Om2Error(f"output directory {out.parent} does not exist")
    tgts = targets.get_targets(opts.target)
    if len(tgts) > 1:   # several kernel sets: one model_N per target (formats/om2/kernel_sets.py)
        return _compile_sets(model, out, opts, format, frontend, tgts)
    return _compile(model, out, dataclasses.replace(opts, target=tgts[0].spec), format, frontend)


def _compile_sets(model, out: Path, opts: Options, format: str, frontend, tgts) -> Path:
    """An .om2 carrying one kernel set per target: each compiled alone (lowering decides tiles,
    Winograd and the packing of weights per target), then merged, equal bytes stored once."""
    names = ",".join(t.name for t in tgts)
    if format == "om":
        raise CompileError(f"{advice.target_option(names)}: a classic .om carries one kernel set (GE's TBE_KERNELS "
                           f"partition); write an .om2 ({out.stem}.om2) to carry several, or compile one .om per "
                           "target")
    report = _Progress(opts.progress)
    pool = constant_pool.Pool()   # equal constants at equal offsets: the sets share one blob
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        parts = []
        for t in tgts:
            report.stage(f"kernel set {t.name}")
            parts.append((t, _compile(model, Path(tmp) / f"{t.name}.om2", dataclasses.replace(opts, target=t.spec),
                                      format, frontend, pool)))
        kernel_sets.merge(out, parts, names)
    report.stage(f"wrote {out} with kernel sets {names}")
    return out


def _compile(model, out: Path, opts: Options, format: str, frontend, pool=None) -> Path:
    """compile() for one target; `pool` (lower/constant_pool.py): the constants of the archive's
    earlier kernel sets, which this one's are placed onto."""
    tgt = targets.get_target(opts.target)
    report = _Progress(opts.progress)

    # custom-op libraries run here (InferShape, Compile, Serialize): when cross-compiling they are
    # the host's builds, and the target's builds are packed from $OM2GEN_OPP_PATH (so_providers)
    host = tgt if tgt.arch == targets.host_arch() else targets.default_target()
    libraries = [custom_libraries.load_library(p, host) for p in custom_libraries.find_libraries(opts.custom_op_libs)]
    with custom_libraries.activated(libraries):
        ctx = LowerContext(tgt, GENERATOR, kernel_codegen.render, fusion=opts.fusion, winograd=opts.winograd,
                           winograd_weights=opts.winograd_weights)
        spec, loaded = _gear_spec(model, opts, frontend)
        # an .om runs the RT2 way, sizing its arena per run: an unbounded dim is allowed there
        token = symbolic.UNBOUNDED_PLANNED.set(format == "om")
        try:
            if spec is None:
                # a dynamic .om2 may take two dims equal, for its guard check (guard_check.so); the
                # RT2 path of an .om has no guard, so its compile takes nothing it cannot decide
                assume = symbolic.assuming() if format != "om" else contextlib.nullcontext([])
                with assume as assumptions:
                    graph, op_types = _optimized_graph(model, opts, frontend, ctx)
                    program = lower_graph(graph, ctx)
                if program.dynamic is not None:
                    program.dynamic.assumptions = list(assumptions)
            else:   # one graph per gear, merged into one model whose Case picks the gear (frontend/multi_batch.py)
                per_gear = [_optimized_graph(loaded, dataclasses.replace(opts, input_shapes=spec.shapes(i)), "onnx",
                                             ctx) for i in range(len(spec.gears))]
                graph = multi_batch.merge(spec, [g for g, _ in per_gear])
                op_types = frozenset().union(*(t for _, t in per_gear))
                program = lower_graph(graph, ctx)
        finally:
            symbolic.UNBOUNDED_PLANNED.reset(token)
        report.stage(f"imported {len(graph.nodes)} nodes")
    report.stage(f"lowered to {len(program.tasks)} tasks, {len(program.kernels)} kernels")
    if pool is not None:
        constant_pool.place(program, pool)
    if program.dynamic is not None and format == "om":   # the RT2 path: a host op library, no device tiling
        program = rt2_program.for_om(program)
        program.dynamic.host_plan.check()

    own = [k for k in program.kernels if not k.library]    # (the rest: the device tiling library's)
    builds = compiler.build_all([(k.source, k.entry) for k in own], tgt, opts.jobs, report.kernels,
                                model_sources=model_cpp.load_and_run_source() if format != "om" else None)
    notes = launch_note.of_program(program)   # what each kernel is launched with: checked at load
    index = {id(k): i for i, k in enumerate(program.kernels)}
    for k, b in zip(own, builds):
        k.binary = launch_note.attach(b.binary, notes[index[id(k)]])
    commands = {k.entry: b.commands[0] for k, b in zip(own, builds)}
    library = {name: command for b in builds for name, command in b.libraries.items()}
    if program.dynamic is not None and format == "om":
        commands.update(_build_host_library(program, tgt))
    elif program.dynamic is not None:
        if program.dynamic.tilings:
            commands.update(_build_tiling_library(program, tgt, notes))
        _build_autofuse(program, graph, tgt)
    so_pack = providers.pack(program, tgt, libraries, op_types)   # the shared objects this model needs

    if format == "om":
        from .formats.om import writer as om_writer
        om_writer.write(out, program, program.graph_json, tgt, so_pack, info.info(tgt))
        report.stage(f"wrote {out}")
        return out

    return write_archive(out, program, tgt, opts, commands, so_pack, graph.producer, report, library)


def _build_tiling_library(program: Program, tgt, notes: dict) -> dict:
    """A dynamic model's device tiling library: generated, built, its launch notes attached, and
    named by its content (codegen/tiling_library.py); returns {entry: its build command}."""
    d = program.dynamic
    d.tiling_source = tiling_library.source(program)
    d.tiling_library = tiling_library.library_name(program, d.tiling_source)
    entries = [(i, k) for i, k in enumerate(program.kernels) if k.library]
    built = compiler.build_tiling_library(d.tiling_source, [k.entry for _, k in entries], tgt)
    d.tiling_binary = launch_note.attach(built.binary, [notes[i] for i, _ in entries])
    for _, k in entries:
        k.library, k.binary = d.tiling_library, d.tiling_binary
    return {k.entry: built.commands[0] for _, k in entries}


def _build_host_library(program: Program, tgt) -> dict:
    """A dynamic .om's host op library (codegen/host_library.py): InferShape and Tiling per op,
    built for the target and named by its content and the host OS/CPU; returns {name: command}."""
    d = program.dynamic
    host_library.check(d.host_plan)
    d.host_source = host_library.source(d.host_plan, program.name, [i.name for i in program.inputs])
    d.host_library = host_library.library_name(d.host_source, tgt.arch)
    built = compiler.build_host_library(d.host_source, tgt)
    d.host_binary = built.binary
    return {d.host_library: built.commands[0]}


def _build_autofuse(program: Program, graph, tgt) -> None:
    """A dynamic model's kAutofuse shared objects (codegen/autofuse_library.py): the autofuse
    library when it has fused nodes, each of which then names it in GE's bin_file_path, and
    guard_check.so when its compile made assumptions (GE's _guard_check_so_data)."""
    d = program.dynamic
    nodes = [n for n in graph.nodes if n.op_type == fused_op.OP_TYPE]
    fused = autofuse_library.fused_nodes(program, [(n, n.attrs[fused_op.SPEC]) for n in nodes])
    if fused:
        d.autofuse_source = autofuse_library.library_source(program, graph, fused)
        d.autofuse_library = autofuse_library.library_name(d.autofuse_source)
        exports = [autofuse_library.ABI_VERSION_SYMBOL] + [f"{prefix}{f.ident}" for f in fused
                                                            for prefix in (autofuse_library.INFER_SHAPE,
                                                                           autofuse_library.TILING)]
        d.autofuse_binary = compiler.build_autofuse_library(d.autofuse_source, "autofuse.c", exports, tgt).binary
        names = {f.node.name for f in fused}
        for node in program.graph_json["nodes"]:
            if node["name"] in names:
                node["attrs"][BIN_FILE_PATH] = f"{providers.OM2GEN_VENDOR}/{d.autofuse_library}"
    if d.assumptions:
        d.guard_check_source = autofuse_library.guard_source(program, nodes)
        d.guard_function = "\n".join(autofuse_library.guard_function(program, nodes, "int32_t GuardCheck"))
        d.guard_check_so_data = compiler.build_autofuse_library(
            d.guard_check_source, "guard_check.c", [autofuse_library.ABI_VERSION_SYMBOL,
                                                    autofuse_library.GUARD_CHECK_SYMBOL], tgt).binary


def write_archive(out: Path, program: Program, tgt, opts: Options, kernel_commands: dict, so_pack, producer: str,
                  report, kernel_library: dict | None = None) -> Path:
    """The OM2 archive of a program whose kernel binaries are built: generate and build the model
    library, then write every entry. kernel_commands: {kernel entry: its build command, or a note
    saying where the binary came from}; kernel_library: {object file name: the command that
    compiles it} of the kernel library objects the kernels link (toolchain/kernel_lib.py)."""
    stem = f"{c_identifier(program.name)}_{_model_hash(program)}"
    sources = model_cpp.render_sources(program, stem, tgt.arch, producer)
    lib = compiler.build_model_library(sources, tgt)
    report.stage("built the model library")

    entries = _entries(program, tgt, stem, sources, lib, kernel_commands, opts, so_pack, kernel_library or {})
    writer.write(out, [_manifest(entries, program, tgt, opts, so_pack)] + entries)
    report.stage(f"wrote {out}")
    return out


def _optimized_graph(model, opts: Options, frontend, ctx: LowerContext):
    """The model's graph, imported, cleaned and fused, and the op types it was made of before fusion."""
    graph = _import_graph(model, opts, frontend)
    graph.verify("import")
    dce.run(graph)
    graph.verify("dead-code removal")
    op_types = providers.graph_op_types(graph)   # what the model is made of, before fusion
    optimize.run(graph, ctx)   # fusion: om2gen/passes/optimize.py
    return graph, op_types


def _gear_spec(model, opts: Options, frontend) -> tuple[gears.GearSpec | None, onnx_import.Loaded | None]:
    """The gears the options ask for and the ONNX model, read once for every gear's import
    ((None, None): a static model). Gears are compiled from ONNX models."""
    shapes = pins.shapes(opts.input_shapes)   # a shape that is no sequence of dims is refused first
    if opts.dynamic_batch_size is None and opts.dynamic_image_size is None and opts.dynamic_dims is None:
        return None, None    # -1 and ranges without a gear option: a dynamic model (frontend/dynamic_dims.py)
    shape_option = advice.shape_option
    ranged = [n for n, dims in shapes.items() if any(isinstance(d, pins.DimRange) for d in dims)]
    if ranged:
        raise ShapeError(f"{shape_option(ranged[0], shapes[ranged[0]])} gives a range, and a gear option is given "
                         "too: gears mark their dims -1 and list the sizes; a range is for a model that takes "
                         "any size in it (no gear option)")
    from .formats.om import proto as ge_proto
    if frontend == "ge" or isinstance(model, ge_proto.ModelDef):
        raise Om2Error("gears (dynamic_batch_size, dynamic_image_size, dynamic_dims) are compiled from ONNX "
                       "models; export the model to ONNX, or compile one GE graph per shape")
    loaded = onnx_import.load_model(model)
    declared = onnx_import.declared_inputs(loaded, opts.input_values)
    pins.check_names(opts.input_shapes, opts.input_values, [(n, pins.dims_text(d)) for n, d in declared])
    spec = gears.resolve(input_shapes=shapes, declared=declared,
                         dynamic_batch_size=opts.dynamic_batch_size, dynamic_image_size=opts.dynamic_image_size,
                         dynamic_dims=opts.dynamic_dims, input_format=opts.input_format)
    return spec, loaded


# --- frontend selection (ONNX or GE IR graph) -------------------------------------------------
FRONTENDS = ("onnx", "ge")
GE_SUFFIXES = (".pb", ".pbtxt", ".txt", ".prototxt", ".ge")


def _import_graph(model, opts: Options, frontend=None):
    """frontend None: a ge.proto.ModelDef object or a .pb/.pbtxt/.txt/.prototxt/.ge file is a GE
    graph; anything else is read as ONNX, and a file ONNX cannot read is tried as a GE graph."""
    from .formats.om import proto as ge_proto
    from .frontend import ge_import
    if frontend not in (None, *FRONTENDS):
        raise Om2Error(f"unknown frontend {frontend!r}; choose one of: {', '.join(FRONTENDS)}")
    if frontend is None and isinstance(model, ge_proto.ModelDef):
        frontend = "ge"
    if frontend is None and isinstance(model, (str, Path)) and Path(model).suffix.lower() in GE_SUFFIXES:
        try:  # an ONNX model saved as model.pb still compiles
            ge_import.load_model_def(model)
        except ModelError as ge_error:
            try:
                return import_onnx(model, opts.input_shapes, opts.input_values)
            except ModelError:
                raise ge_error from None
        frontend = "ge"
    if frontend == "ge":
        return ge_import.import_ge(model, opts.input_shapes, opts.input_values)
    if frontend is None and isinstance(model, (str, Path)) and Path(model).is_file():
        try:
            return import_onnx(model, opts.input_shapes, opts.input_values)
        except ModelError as onnx_error:
            try:
                ge_import.load_model_def(model)
            except ModelError:
                raise onnx_error from None
        return ge_import.import_ge(model, opts.input_shapes, opts.input_values)
    return import_onnx(model, opts.input_shapes, opts.input_values)


def _model_hash(program: Program) -> str:
    h = hashlib.sha256()
    for k in program.kernels:
        h.update(k.digest.encode())
    h.update(json.dumps(program.graph_json, sort_keys=True).encode())
    return h.hexdigest()[:12]


def _io_json(d, index, gears=None, dims=None):
    """An input's or output's model_meta entry; `dims`: a dynamic model's dims of it (ints and
    Exprs), which give GE's shape_range ([lo, hi] per dim, hi -1 where unbounded)."""
    dt = dtypes.BY_NAME[d.dtype]
    out = {"name": d.name, "index": index, "shape": list(d.shape), "data_type": dt.acl,
           "data_type_name": dt.ge_string, "dtype": d.dtype, "format": 2, "size": d.nbytes}
    if gears is not None and d.name in gears.origin_dims:
        out["origin_input_dims"] = list(gears.origin_dims[d.name])
    if dims is not None:
        out["shape_range"] = [[int(lo), -1 if math.isinf(hi) else int(hi)] for lo, hi in map(symbolic.bounds, dims)]
    return out


def dynamic_meta(program: Program) -> dict:
    """A dynamic model's model_meta key (docs/dynamic-shapes.md): its symbols and each input's
    and output's dims as expressions, and its device tiling library."""
    d = program.dynamic
    return {"dynamic_shapes": {
        "symbols": [{"name": s.name, "range": [s.lo, -1 if s.hi is None else s.hi], "input": s.input, "axis": s.axis,
                     "multiple": s.multiple, **({"producer": s.producer} if s.producer else {})}
                    for s in d.symbols],
        "inputs": [[symbolic.text(x) for x in dims] for dims in d.input_dims],
        "outputs": [[symbolic.text(x) for x in dims] for dims in d.output_dims],
        "tiling_library": d.tiling_library}}


def _entries(program, tgt, stem, sources, lib, kernel_commands, opts, so_pack, kernel_library) -> list[Entry]:
    idx = 0
    lib_name = layout.model_library(idx, stem)
    meta = {
        "name": program.name,
        "root_graph_name": program.name,
        "inputs": [_io_json(d, i, program.gears, program.dynamic and program.dynamic.input_dims[i])
                   for i, d in enumerate(program.inputs)],
        "outputs": [_io_json(d, i, None, program.dynamic and program.dynamic.output_dims[i])
                    for i, d in enumerate(program.outputs)],
        "work_size": program.work_size,
        "zero_copy_size": 0,
        "args_size": program.args_size,
        "abi_version": MODEL_ABI_VERSION,
        "library": lib_name,
        "entry_symbols": list(compiler.MODEL_EXPORTS),
        "kernels": [layout.kernel_binary(tgt.arch, k.file_name) for k in program.kernels if not k.library],
        "constants_config": layout.constants_config(idx),
        "custom_ops": {
            "shared_libs": sorted(layout.custom_op_library(b.name) for b in so_pack.of_type(SoBinType.kCustomOp)),
            "binaries": sorted({layout.custom_op_binary(tgt.arch, c.bin_name) for c in program.custom_ops}),
            "op_types": sorted({c.op_type for c in program.custom_ops}),
        },
        "stats": {"tasks": len(program.tasks), "kernels": len(program.kernels),
                  "constants_bytes": program.constants_size, "load_tasks": len(program.load_tasks),
                  "model_buffer_bytes": sum(b.size for b in program.model_buffers)},
    }
    if program.load_tasks:   # what GertModelLoad runs before the capture, and the buffers it makes
        meta.update(load_tasks_meta(program))
    if so_pack.bins:
        meta["so_bins"] = _so_bins_json(so_pack)
    if program.gears is not None:
        meta.update(gear_meta(program))
    if program.dynamic is not None:
        meta.update(dynamic_meta(program))
    consts = {
        "internal_weight_size": program.constants_size,
        "consts": {c.name: {"index": i, "type": "INTERNAL", "file_name": layout.constants_blob(idx).rsplit("/", 1)[1],
                            "offset": c.offset, "size": c.nbytes, "op_name": c.name,
                            "dtype": c.array.dtype.name, "shape": list(c.array.shape),
                            # where it comes from: the model's initializers, and how it was made
                            "sources": list(c.sources), "transforms": list(c.transforms)}
                   for i, c in enumerate(program.constants)},
    }
    blob = bytearray(program.constants_size)
    view = memoryview(blob)
    for c in program.constants:   # copied once, into place (no tobytes() copy of each)
        view[c.offset:c.offset + c.nbytes] = np.ascontiguousarray(c.array).reshape(-1).view(np.uint8)
    build_cmds = {"model_library": {"sources": sorted(sources), "commands": lib.commands},
                  "kernels": kernel_commands,
                  # compiled first, into the directory the kernel commands run in (each source
                  # copied there from the om2gen package)
                  **({"kernel_library": kernel_lib.recorded(kernel_library)} if kernel_library else {}),
                  "note": "<om2gen>/runtime_abi/include is the include/ folder shipped inside the om2gen package"}
    op_attr = {n["name"]: n["attrs"] for n in program.graph_json["nodes"] if n["attrs"]}
    entries = [
        Entry(layout.model_meta(idx), json_bytes(meta)),
        Entry(layout.op_attr(idx), json_bytes(op_attr)),
        *(Entry(layout.csrc_dir(idx) + name, text.encode()) for name, text in sorted(sources.items())),
        Entry(layout.build_commands(idx), json_bytes(build_cmds)),
        Entry(lib_name, lib.binary),
    ]
    for k in program.kernels:
        if k.library:   # a function of the device tiling library: in data/so_bins (kOpMasterDevice)
            continue
        if k.source:   # kernels converted from an OM file come without their source
            entries.append(Entry(layout.kernel_source(idx, k.entry), k.source.encode()))
        entries.append(Entry(layout.kernel_binary(tgt.arch, k.file_name), k.binary))
    if program.dynamic is not None:
        entries.append(Entry(layout.csrc_dir(idx) + "op_master_device.c", program.dynamic.tiling_source.encode()))
        for name, text in (("autofuse.c", program.dynamic.autofuse_source),
                           ("guard_check.c", program.dynamic.guard_check_source)):
            if text:   # the sources of the kAutofuse shared objects in data/so_bins
                entries.append(Entry(layout.csrc_dir(idx) + name, text.encode()))
    for b in so_pack.of_type(SoBinType.kCustomOp):   # the target's builds (the same bytes as in the store)
        entries.append(Entry(layout.custom_op_library(b.name), b.data))
    if so_pack.bins:
        entries.append(Entry(layout.SO_STORE, so_pack.store))
    for c in {c.bin_name: c for c in program.custom_ops}.values():
        entries.append(Entry(layout.custom_op_binary(tgt.arch, c.bin_name), c.blob))
    entries.append(Entry(layout.constants_config(idx), json_bytes(consts)))
    entries.append(Entry(layout.constants_blob(idx), blob))   # (the bytearray itself: no second copy)
    if opts.debug:
        entries.append(Entry(layout.ge_model_json(idx), json_bytes(program.graph_json)))
        entries.append(Entry(layout.task_info_json(idx), json_bytes(task_info(program))))
        entries.append(Entry(layout.memory_plan_json(idx), json_bytes(memory_plan(program))))
    return sorted(entries, key=lambda e: e.name)


def load_tasks_meta(program: Program) -> dict:
    """model_meta's load_tasks (each with its node, kernel and the buffer it writes) and
    model_buffers (bytes each): the layers whose Winograd weights are transformed at load."""
    tasks = [{"label": t.label, "node": t.op_name, "op_type": t.op_type, "kernel": program.kernels[t.kernel].entry,
              "block_dim": t.block_dim, "inputs": t.inputs_desc, "outputs": t.outputs_desc,
              "writes": [a.index for a in t.args if a.kind == ArgKind.MODEL_BUFFER]} for t in program.load_tasks]
    return {"load_tasks": tasks, "model_buffers": [{"name": b.name, "size": b.size, "node": b.node}
                                                   for b in program.model_buffers]}


def gear_meta(program: Program) -> dict:
    """A gear model's model_meta keys, GE's (om2_zip_saver.cc): each dynamic input's
    origin_input_dims, and dynamic_type, dynamic_batch_info, user_designate_shape_order and
    dynamic_output_shape ("gear,output,d0,d1,..."; gear -1: the same at every gear); and the
    newer writers' dynamic_dims object."""
    g = program.gears
    out_dims = dynamic_output_dims(g.output_shapes)
    # GE's newer model_meta groups the same under "dynamic_dims", each gear with its shapes
    grouped = {"dynamic_type": g.dynamic_type, "user_designate_shape_order": g.order,
               "gears": [{"inputs": [list(s) for s in ins], "outputs": [list(s) for s in outs]}
                         for ins, outs in zip(g.input_shapes, g.output_shapes)]}
    return {"dynamic_type": g.dynamic_type, "dynamic_batch_info": g.values,
            "user_designate_shape_order": g.order, "dynamic_output_shape": out_dims, "dynamic_dims": grouped}


def _so_bins_json(so_pack) -> dict:
    """model_meta.so_bins: where the OpSoStore is, its flag, and what it holds (for inspect)."""
    return {"store": layout.SO_STORE, "so_in_om_flag": so_pack.flag,
            "items": [{"name": b.name, "vendor": b.vendor, "type": b.bin_type.name, "size": len(b.data),
                       "sha256": hashlib.sha256(b.data).hexdigest()} for b in so_pack.bins]}


def task_info(program: Program) -> dict:
    return {"tasks": [{
        "id": i, "label": t.label, "type": t.task_type.name, "type_id": int(t.task_type),
        "dispatch_type": t.dispatch_type.name, "kernel_type": t.kernel_type.name,
        "kernel": program.kernels[t.kernel].entry if t.kernel >= 0 else None,
        "label_ref": t.label_ref if t.kernel < 0 else None, "block_dim": t.block_dim, "op_name": t.op_name,
        "op_type": t.op_type, "args_format": t.args_format, "args_offset": t.args_offset, "args_size": t.args_size,
        "args": [a.to_json() for a in t.args], "tiling": _tiling_json(t), "inputs": t.inputs_desc,
        "outputs": t.outputs_desc, "attrs": t.attrs_desc, "fuses": t.fuses} for i, t in enumerate(program.tasks)],
        "work_size": program.work_size, "args_size": program.args_size,
        **(load_tasks_meta(program) if program.load_tasks else {})}


def memory_plan(program: Program) -> dict:
    """debug/memory_plan.json: every workspace region with the tasks it lives between, and the
    views (values that are another's bytes) with what they are views of."""
    label = [t.label for t in program.tasks]
    buffers = [{"name": b.name, "offset": b.offset, "size": b.size, "end": b.offset + b.size,
                "first_task": b.first_task, "last_task": b.last_task,
                "written_by": label[b.first_task], "last_read_by": label[b.last_task]} for b in program.buffers]
    largest = max(program.buffers, key=lambda b: (b.size, -b.offset), default=None)
    return {"work_size": program.work_size, "alignment": memplan.ALIGN, "buffers": buffers,
            "largest": largest.name if largest else None,
            "views": [{"name": v.name, "view_of": v.source, "alias_of": v.root, "made_by": v.node,
                       "place": v.place.to_json() if v.place else None} for v in program.views]}


def _tiling_json(t) -> list:
    """A task's tiling words as [name, value] pairs, in order (the names of its kernel's TilingData)."""
    words = struct.unpack(f"<{len(t.tiling) // 8}q", t.tiling)
    return [[n, w] for n, w in zip(model_cpp.tiling_names(t), words)]


def _manifest(entries: list[Entry], program: Program, tgt, opts: Options, so_pack) -> Entry:
    features = {}
    if any(b.bin_type != SoBinType.kCustomOp for b in so_pack.bins):
        features[layout.SO_IN_OM_FEATURE] = layout.SO_IN_OM_EXECUTOR_VERSION
    manifest = {
        "format": layout.FORMAT,
        "format_version": layout.FORMAT_VERSION,
        "generator": GENERATOR,
        "model_num": 1,
        "compatibility": {"compiler_version": layout.FORMAT_VERSION,
                          "required_executor_version": max(features.values(), key=lambda v: tuple(map(int, v.split("."))),
                                                         default=layout.BASE_EXECUTOR_VERSION),
                          "used_features": features},
        "so_in_om_info": info.info(tgt).to_json(),
        "abi_version": MODEL_ABI_VERSION,
        "kernel_abi_version": KERNEL_ABI_VERSION,
        "target": {"name": tgt.name, "arch": tgt.arch, "isa_features": list(tgt.isa_features), "tune": tgt.tune},
        "compiler": {"c": compiler.compiler_identity(False, tgt), "cxx": compiler.compiler_identity(True, tgt)},
        "options": {"input_shapes": {k: list(v) for k, v in sorted(opts.input_shapes.items())},
                    "input_values": {k: np.asarray(v).tolist() for k, v in sorted(opts.input_values.items())},
                    "target": tgt.spec, "debug": opts.debug, "fusion": opts.fusion,
                    "winograd": winograd_name(opts.winograd), "winograd_weights": opts.winograd_weights,
                    **_gear_options(opts),
                    "custom_op_libs": sorted(Path(p).name for p in opts.custom_op_libs)},
        "models": [{"index": 0, "name": program.name, "meta": layout.model_meta(0)}],
        "entries": [{"name": e.name, "size": len(e.data), "sha256": e.sha256, "blake3": e.blake3,
                     "compression": "stored" if e.stored else "deflate"} for e in entries],
    }
    return Entry(layout.MANIFEST, json_bytes(manifest))


def _gear_options(opts: Options) -> dict:
    """The gear options given, as the manifest records them (ATC's option names)."""
    given = {"dynamic_batch_size": opts.dynamic_batch_size, "dynamic_image_size": opts.dynamic_image_size,
             "dynamic_dims": opts.dynamic_dims}
    out = {k: gears.atc_text(k, v) for k, v in given.items() if v is not None}
    if out and opts.input_format:
        out["input_format"] = opts.input_format
    return out


class _Progress:
    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.monotonic()

    def stage(self, text: str) -> None:
        if self.enabled:
            print(f"[{time.monotonic() - self.t0:6.2f}s] {text}", file=sys.stderr, flush=True)

    def kernels(self, done: int, total: int) -> None:
        if self.enabled:
            end = "\n" if done == total else ""
            print(f"\r[{time.monotonic() - self.t0:6.2f}s] kernels {done}/{total}", end=end, file=sys.stderr, flush=True)
