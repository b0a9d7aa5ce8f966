"""`om2gen compile`: an ONNX model (or a GE IR graph) into an .om2 archive or a classic .om file."""
from __future__ import annotations

from . import parsing


def add_parser(sub) -> None:
    c = sub.add_parser("compile", help="compile an ONNX model into an .om2 archive")
    c.add_argument("model", help="the .onnx file (or a GE IR graph, see --frontend)")
    c.add_argument("-o", "--output", required=True, help="the file to write: .om2 (an OM2 archive) or .om (a classic "
                   "GE OM file)")
    c.add_argument("--format", choices=("om2", "om"), default=None,
                   help="om2: OM2 archive; om: classic Ascend GE OM file (both run with om2gen run); default: from "
                        "the output's extension (.om: om, otherwise om2); a contradicting extension is an error")
    c.add_argument("--frontend", choices=("onnx", "ge"), default=None,
                   help="input model kind: onnx, or ge (GE IR graph: ge.proto.ModelDef, binary or text); "
                        "default: .pb/.pbtxt/.txt/.prototxt/.ge files are GE graphs, others ONNX")
    c.add_argument("--input-shape", "--input_shape", action="append", type=parsing.shape_arg, metavar="NAME:D0,D1,...",
                   help="pin an input's shape; repeat per input, or ATC's form \"a:1,3,224,224;b:1,10\"")
    # gears (docs/gears.md): ATC's flags, with its value syntax and its underscore spellings
    c.add_argument("--dynamic-batch-size", "--dynamic_batch_size", metavar="B1,B2,...",
                   help="gears of the batch: dim 0 of the inputs marked -1 in --input-shape, e.g. 1,2,4,8")
    c.add_argument("--dynamic-image-size", "--dynamic_image_size", metavar="H,W;H,W;...",
                   help="gears of the image size: H and W of the inputs marked -1, e.g. \"224,224;448,448\"")
    c.add_argument("--dynamic-dims", "--dynamic_dims", metavar="D,D;D,D;...",
                   help="gears of any dims: each ';' group gives every -1 dim of --input-shape a value, in input "
                        "order, e.g. \"128,128;256,256\"")
    c.add_argument("--input-format", "--input_format", choices=("NCHW", "NHWC", "ND"), default=None,
                   help="where H and W are for --dynamic-image-size (default NCHW)")
    c.add_argument("--input-value", action="append", type=parsing.value_arg, metavar="NAME=V[,V...]",
                   help="freeze an input to constant value(s), e.g. a sample rate; repeat per input, or "
                        "\"sr=16000;k=1,2\"")
    c.add_argument("--custom-op-lib", action="append", metavar="LIB.so",
                   help="a custom-operator library (om2/custom_op.h); repeatable; $OM2GEN_CUSTOM_OP_PATH names a "
                        "directory of more")
    # ATC names the chip --soc_version; a comma list carries one kernel set per target (an .om2 only)
    c.add_argument("--target", "--soc_version", "--soc-version", dest="target",
                   help="CPU target (x86_64, x86_64-avx2, x86_64-avx512, aarch64), optionally tuned for a "
                        "microarchitecture (x86_64-avx2:znver1), or several separated by commas "
                        "(x86_64-avx2,x86_64-avx512): the .om2 carries each kernel set and a load runs the best the "
                        "CPU supports; default: this machine")
    c.add_argument("--debug", action="store_true", help="also pack debug/ge_model.json and debug/task_info.json")
    c.add_argument("-j", "--jobs", type=int, help="parallel compiler jobs (default: all cores)")
    # no GE/ATC flag of these names (design/GE_FACTS.md): om2gen's own spelling
    c.add_argument("--fusion", choices=("on", "off"), default=None,
                   help="graph fusion (docs/fusion.md); off compiles every node to its own kernel; default: "
                        "$OM2GEN_FUSION, else on")
    c.add_argument("--winograd", choices=("auto", "off", "2", "4"), default=None,
                   help="Winograd for 3x3 stride-1 convolutions: auto (the cost model chooses), off, or a forced "
                        "tile size; default: $OM2GEN_WINOGRAD, else auto")
    c.add_argument("--winograd-weights", choices=("auto", "stored", "load"), default=None,
                   help="Winograd's transformed weights: stored in the archive, or made at load from the raw "
                        "filters (the same bytes; a smaller archive); auto chooses per layer by a cost model; "
                        "default: $OM2GEN_WINOGRAD_WEIGHTS, else auto")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    c.set_defaults(func=cmd_compile)


def cmd_compile(args) -> int:
    from ..advice import cli_words
    from ..pipeline import compile as om2_compile
    shapes = parsing.merged(args.input_shape, "--input-shape")
    values = parsing.merged(args.input_value, "--input-value")
    with cli_words():
        out = om2_compile(args.model, args.output, input_shapes=shapes, input_values=values,
                          custom_op_libs=args.custom_op_lib, target=args.target, debug=args.debug, jobs=args.jobs,
                          progress=not args.quiet, format=args.format, frontend=args.frontend, fusion=args.fusion,
                          winograd=args.winograd, dynamic_batch_size=args.dynamic_batch_size,
                          dynamic_image_size=args.dynamic_image_size, dynamic_dims=args.dynamic_dims,
                          input_format=args.input_format, winograd_weights=args.winograd_weights)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0
