"""The om2gen command line: one module per subcommand (each adds its parser and runs it); errors
print one line and exit non-zero."""
from __future__ import annotations

import argparse
import os
import sys

from ..errors import Om2Error
from . import bench, compile_model, compile_op, config, convert, inspect, run_model, sign

# in the order `om2gen --help` lists them
SUBCOMMANDS = (compile_model, run_model, convert, inspect, sign, bench, config, compile_op)


def build_parser() -> argparse.ArgumentParser:
    from ..version import __version__
    p = argparse.ArgumentParser(prog="om2gen", description="Compile ONNX models into OM2 archives and run them.")
    p.add_argument("--version", action="version", version=f"om2gen {__version__}")
    p.add_argument("--verbose", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True)
    for command in SUBCOMMANDS:
        command.add_parser(sub)
    _verbose_after_subcommands(sub)
    return p


def _verbose_after_subcommands(sub) -> None:
    """`om2gen compile ... --verbose` as well as `om2gen --verbose compile ...`: each subcommand
    takes it too, without overriding the top-level flag when it is not repeated there."""
    for parser in sub.choices.values():
        if not any("--verbose" in a.option_strings for a in parser._actions):
            parser.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                                help="show tracebacks on errors")


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
