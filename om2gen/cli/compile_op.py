"""`om2gen compile-op`: one operator (ONNX, GE or custom op type) into an .om2 archive or .om file
(the work is cli/single_op.py)."""
from __future__ import annotations


def add_parser(sub) -> None:
    o = sub.add_parser("compile-op", help="compile one operator (ONNX or GE op type) into an .om2 archive or .om file")
    o.add_argument("op", help="op type: ONNX (Conv, MatMul, Softmax, ...), GE (Conv2D, MatMulV2, ...) or custom")
    o.add_argument("--input", dest="operands", action="append", type=lambda t: ("input", t),
                   metavar="NAME:DTYPE:SHAPE", help="a run-time input, in the op's input order (SHAPE: 1,3,224,224)")
    o.add_argument("--const", dest="operands", action="append", type=lambda t: ("const", t),
                   metavar="NAME:DTYPE:SHAPE=FILE.npy|V0,V1,...", help="a constant input, in the op's input order")
    o.add_argument("--skip-input", dest="operands", action="append_const", const=None,
                   help="leave this optional input position empty")
    o.add_argument("--attr", action="append", metavar="K=V|K:TYPE=V",
                   help="an attribute; TYPE: int, float, string, ints, floats, strings, bool, tensor")
    o.add_argument("--output", dest="outputs", action="append", metavar="NAME",
                   help="output names, in order (default: the op's required outputs)")
    o.add_argument("--dynamic-batch-size", "--dynamic_batch_size", dest="dynamic_batch_size", metavar="B1,B2,...",
                   help="gears of dim 0 of the inputs whose SHAPE marks it -1 (as for compile)")
    o.add_argument("--dynamic-image-size", "--dynamic_image_size", dest="dynamic_image_size", metavar="H,W;H,W",
                   help="gears of H and W of the inputs marked -1 there (as for compile)")
    o.add_argument("--dynamic-dims", "--dynamic_dims", dest="dynamic_dims", metavar="D,D;D,D",
                   help="gears of every -1 dim of the inputs, in input order (as for compile)")
    o.add_argument("--input-format", "--input_format", dest="input_format", choices=("NCHW", "NHWC", "ND"),
                   help="where H and W are for --dynamic-image-size (default NCHW)")
    o.add_argument("-o", dest="output", required=True, metavar="FILE", help="the .om2 (or .om) file to write")
    o.add_argument("--format", choices=("om2", "om"), default=None,
                   help="om2 or om (classic GE OM); default: from the output's extension (.om: om, otherwise om2)")
    o.add_argument("--opset", type=int, help="ONNX opset (default: the newest om2gen supports)")
    o.add_argument("--domain", default="", help="the op's domain (custom operators)")
    o.add_argument("--frontend", choices=("onnx", "ge"), help="read OP as an ONNX or a GE op type (default: ONNX, GE)")
    o.add_argument("--custom-op-lib", action="append", metavar="LIB.so", help="a custom-operator library")
    o.add_argument("--target", help="CPU target (as for compile)")
    o.add_argument("--save-onnx", metavar="FILE.onnx", help="also write the one-operator ONNX model compiled")
    o.add_argument("--debug", action="store_true", help="also pack debug/ge_model.json and debug/task_info.json")
    o.add_argument("-j", "--jobs", type=int, help="parallel compiler jobs (default: all cores)")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    o.set_defaults(func=cmd_compile_op)


def cmd_compile_op(args) -> int:
    from ..advice import cli_words
    from .single_op import run_cli
    with cli_words():
        return run_cli(args)
