"""The kernel library: code that kernels of several kinds share and that takes its shapes at run
time (the packed GEMM's macro-kernel, packing and im2col; the few-row product with a packed B),
compiled once per target and GEMM blocking into an object and linked into each kernel binary
that calls it. Before it, every Conv, MatMul and Gemm kernel of a model compiled the whole GEMM
again (1.5-2.3 s of gcc -O3 each; ResNet-50's 16 s of compiler time were mostly that): now a
kernel compiles its own loop and epilogue only (about 0.2 s) and links the cached object.

A kernel binary stays self-contained: the object is linked in statically, its functions hidden
(OM2_KERNEL_LIB), so the binary still exports its entry alone and needs libc/libm only. Which
library a kernel needs is read from its source: the functions it calls (LIBRARIES); the object
is compiled with the OM2_GEMM_* / OM2_GEMV_* values the kernel defines before its includes, so
kernel and library agree on the blocking.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..resources import runtime_abi_dir


@dataclass(frozen=True)
class Library:
    name: str                   # runtime_abi/src/kernel_lib/<name>.c, linked as <name>.o
    calls: re.Pattern           # a kernel source calling one of its functions

    def source(self) -> str:
        return (runtime_abi_dir() / "src" / "kernel_lib" / f"{self.name}.c").read_text()


LIBRARIES = (
    Library("om2_gemm_lib", re.compile(r"\bom2_gemm_rect(?:_t|_t_images)?\s*\(")),
    Library("om2_gemv_lib", re.compile(r"\bom2_gemv\s*\(")),
)

# the blocking a kernel compiles in: `#define OM2_GEMM_MR 16` and the like, before its includes
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(OM2_GEM[MV]_[A-Z_]+)[ \t]+(\d+)[ \t]*$", re.M)


def needed(kernel_source: str) -> list[Library]:
    """The libraries whose functions the kernel calls (its comments aside)."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", kernel_source, flags=re.S)
    return [lib for lib in LIBRARIES if lib.calls.search(code)]


def defines(kernel_source: str) -> tuple[str, ...]:
    """The -D flags that compile a library as this kernel sees it."""
    return tuple(f"-D{name}={value}" for name, value in _DEFINE.findall(kernel_source))


def recorded(objects: dict[str, list[str]]) -> dict:
    """build_commands.json's "kernel_library": per object file, where its source is in the om2gen
    package (no host paths) and the command that compiles it, in the directory the kernel
    commands run in, with the source copied there."""
    return {name: {"source": f"<om2gen>/runtime_abi/src/kernel_lib/{name.removesuffix('.o')}.c", "command": command}
            for name, command in sorted(objects.items())}
