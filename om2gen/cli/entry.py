"""The om2gen command line: compile, run, inspect. Errors print one line and exit non-zero."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..errors import InputError, Om2Error
from . import parsing


def _input_arg(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--input {text!r}: expected NAME=FILE.npy")
    return name, path


def cmd_compile(args) -> int:
    from ..advice import cli_words
    from ..pipeline import compile as om2_compile
    shapes = parsing.merged(args.input_shape, "--input-shape")
    values = parsing.merged(args.input_value, "--input-value")
    with cli_words():
        out = om2_compile(args.model, args.output, input_shapes=shapes, input_values=values,
                          custom_op_libs=args.custom_op_lib, target=args.target, debug=args.debug, jobs=args.jobs,
                          progress=not args.quiet, format=args.format, frontend=args.frontend, fusion=args.fusion,
                          winograd=args.winograd)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


def cmd_run(args) -> int:
    import numpy as np

    from .. import load
    from ..advice import cli_words
    with cli_words(), load(args.model, threads=args.threads, allow_platform_mismatch=args.allow_platform_mismatch,
                           trusted_keys=args.trusted_key) as model:
        feeds = {}
        for name, path in args.input or []:
            try:
                feeds[name] = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise InputError(f"--input {name}={path}: cannot read a .npy array ({exc})") from None
        outputs = model.run(feeds)
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, (name, arr) in enumerate(outputs.items()):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or f"output_{i}"
        path = out_dir / f"{safe}.npy"
        np.save(path, arr)
        print(f"{name}: {arr.dtype}{list(arr.shape)} -> {path}")
    return 0


def cmd_convert(args) -> int:
    from ..formats.om.container import read_om
    from ..formats.om.signature import signers
    from .convert import convert
    out = convert(args.model, args.output, progress=not args.quiet, trusted_keys=args.trusted_key)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    signed_by = signers(read_om(args.model))
    if signed_by:
        print(f"note: {args.model} is signed (by {', '.join(signed_by)}); the signature covers that file only, and "
              f"{out} (new bytes, its model library built here) is unsigned: sign it with `om2gen sign {out} --key "
              "KEY.pem`")
    return 0


def cmd_inspect(args) -> int:
    import json

    from .inspect import inspect_archive, render_text
    info = inspect_archive(args.model)
    print(json.dumps(info, indent=1, sort_keys=True) if args.json else render_text(info))
    return 0


def cmd_sign(args) -> int:
    from ..formats.sign import sign
    out = sign(args.model, args.key, args.output)
    print(f"signed {out}")
    return 0


def cmd_keygen(args) -> int:
    from ..formats.om2.signing import key_id, keygen, public_key_bytes
    private, public = keygen(args.key)
    print(f"wrote {private} (private, keep it secret) and {public} (public, key id "
          f"{key_id(public_key_bytes(public))}: give it to those who load your archives)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from ..version import __version__
    p = argparse.ArgumentParser(prog="om2gen", description="Compile ONNX models into OM2 archives and run them.")
    p.add_argument("--version", action="version", version=f"om2gen {__version__}")
    p.add_argument("--verbose", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True)

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
    c.add_argument("--input-shape", action="append", type=parsing.shape_arg, metavar="NAME:D0,D1,...",
                   help="pin an input's shape; repeat per input, or ATC's form \"a:1,3,224,224;b:1,10\"")
    c.add_argument("--input-value", action="append", type=parsing.value_arg, metavar="NAME=V[,V...]",
                   help="freeze an input to constant value(s), e.g. a sample rate; repeat per input, or "
                        "\"sr=16000;k=1,2\"")
    c.add_argument("--custom-op-lib", action="append", metavar="LIB.so",
                   help="a custom-operator library (om2/custom_op.h); repeatable; $OM2GEN_CUSTOM_OP_PATH names a "
                        "directory of more")
    c.add_argument("--target", help="CPU target (x86_64, x86_64-avx2, x86_64-avx512, aarch64); default: this machine")
    c.add_argument("--debug", action="store_true", help="also pack debug/ge_model.json and debug/task_info.json")
    c.add_argument("-j", "--jobs", type=int, help="parallel compiler jobs (default: all cores)")
    # no GE/ATC flag of these names (design/GE_FACTS.md): om2gen's own spelling
    c.add_argument("--fusion", choices=("on", "off"), default=None,
                   help="graph fusion (docs/fusion.md); off compiles every node to its own kernel; default: "
                        "$OM2GEN_FUSION, else on")
    c.add_argument("--winograd", choices=("auto", "off", "2", "4"), default=None,
                   help="Winograd for 3x3 stride-1 convolutions: auto (the cost model chooses), off, or a forced "
                        "tile size; default: $OM2GEN_WINOGRAD, else auto")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    c.set_defaults(func=cmd_compile)

    r = sub.add_parser("run", help="run an .om2 archive or .om file on .npy inputs")
    r.add_argument("model", help="the .om2 or .om file (the format is read from its content)")
    r.add_argument("--input", action="append", type=_input_arg, metavar="NAME=FILE.npy", help="one per input")
    r.add_argument("--output-dir", default=".", help="where to write one .npy per output (default: .)")
    r.add_argument("--threads", type=int, help="worker threads (default: all cores)")
    r.add_argument("--allow-platform-mismatch", action="store_true",
                   help="load even if the model was compiled for another platform (CPU, OS, runtime or compiler "
                        "version recorded at compile time); at your own risk")
    r.add_argument("--trusted-key", action="append", metavar="KEY.pub",
                   help="run only if an Ed25519 public key given here signed the archive (om2gen sign); "
                        "repeatable; default: the keys $OM2GEN_TRUSTED_KEYS names")
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("convert", help="turn a classic .om file into an .om2 archive (same kernels and weights)")
    v.add_argument("model", help="the .om file")
    v.add_argument("-o", "--output", required=True, help="the .om2 file to write")
    v.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    v.add_argument("--trusted-key", action="append", metavar="KEY.pub",
                   help="convert only if an Ed25519 public key given here signed the .om (om2gen sign); repeatable. "
                        "The .om2 written is unsigned either way")
    v.set_defaults(func=cmd_convert)

    i = sub.add_parser("inspect", help="show what an .om2 archive or .om file holds")
    i.add_argument("model", help="the .om2 or .om file")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.set_defaults(func=cmd_inspect)

    g = sub.add_parser("sign", help="sign an .om2 archive or .om file with an Ed25519 key (om2gen.load(..., "
                       "trusted_keys=...))")
    g.add_argument("model", help="the .om2 archive or .om file (the format is read from its content)")
    g.add_argument("--key", required=True, help="the private key (PEM), e.g. from `om2gen keygen`")
    g.add_argument("-o", "--output", help="write the signed file here (default: in place)")
    g.set_defaults(func=cmd_sign)

    k = sub.add_parser("keygen", help="make an Ed25519 key pair for `om2gen sign`")
    k.add_argument("key", help="the private key file to write; the public key goes to KEY.pub")
    k.set_defaults(func=cmd_keygen)

    from .bench import add_parser as add_bench_parser
    add_bench_parser(sub, _input_arg)
    from .config import add_parser as add_config_parser
    add_config_parser(sub)

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
    _verbose_after_subcommands(sub)
    return p


def _verbose_after_subcommands(sub) -> None:
    """`om2gen compile ... --verbose` as well as `om2gen --verbose compile ...`: each subcommand
    takes it too, without overriding the top-level flag when it is not repeated there."""
    for parser in sub.choices.values():
        if not any("--verbose" in a.option_strings for a in parser._actions):
            parser.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                                help="show tracebacks on errors")


def cmd_compile_op(args) -> int:
    from ..advice import cli_words
    from .single_op import run_cli
    with cli_words():
        return run_cli(args)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except Om2Error as exc:
        if args.verbose:
            raise
        first, *rest = str(exc).splitlines() or [""]
        print(f"om2gen: error: {first}", file=sys.stderr)
        for line in rest:
            print(f"  {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("om2gen: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:   # e.g. `om2gen inspect m.om2 | head`: the reader went away, stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
