"""`om2gen config`: the flags to build a custom-op library against this om2gen, in the style of
python3-config / pkg-config (GE users know `--includes`).

    g++ $(om2gen config --cxxflags --ldflags) my_ops.cpp -o libmy_ops.so

A custom-op library includes om2/custom_op.h (and acl/acl.h for the kernels it launches) from
om2gen.resources.include_dir(). It links against nothing: the ACL runtime and the Om2* factory
functions stay undefined and are resolved when om2gen loads the library into a process that has
its runtime. It must be position-independent, C++17, and built with the C++ runtime om2gen's
own runtime uses (the system's libstdc++), as GE requires of its custom ops.
"""
from __future__ import annotations

from .. import resources

CXX_STANDARD = "-std=c++17"
OPTIONS = {   # option -> (help, the flags it prints)
    "--include-dir": ("the directory holding om2/custom_op.h and acl/acl.h", lambda: [str(resources.include_dir())]),
    "--includes": ("the -I flag for that directory", lambda: [f"-I{resources.include_dir()}"]),
    "--cflags": ("flags to compile C kernel or helper sources of a library", lambda: [f"-I{resources.include_dir()}",
                                                                                    "-fPIC"]),
    "--cxxflags": ("flags to compile a custom-op library's C++ sources",
                   lambda: [f"-I{resources.include_dir()}", CXX_STANDARD, "-fPIC"]),
    "--ldflags": ("flags to link it into a shared object (no -l: om2gen's runtime provides the symbols)",
                  lambda: ["-shared"]),
}


def flags(options) -> list[str]:
    """The flags the given options print, in order, each flag once."""
    out: list[str] = []
    for option in options:
        out += [f for f in OPTIONS[option][1]() if f not in out]
    return out


def add_parser(sub) -> None:
    """Registers `om2gen config` on the CLI's subparsers."""
    c = sub.add_parser("config", help="print the flags to build a custom-op library (like python3-config)",
                       description="Prints compiler flags for a custom-op library written against "
                                   "om2/custom_op.h, e.g. g++ $(om2gen config --cxxflags --ldflags) ops.cpp "
                                   "-o libops.so")
    for option, (text, _) in OPTIONS.items():
        c.add_argument(option, dest="options", action="append_const", const=option, help=text)
    c.set_defaults(func=cmd_config)


def cmd_config(args) -> int:
    if not args.options:
        from ..errors import Om2Error
        raise Om2Error(f"om2gen config: give at least one of {', '.join(OPTIONS)}")
    print(" ".join(flags(args.options)))
    return 0
