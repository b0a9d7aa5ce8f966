"""Drives the C/C++ compiler: kernels and the model library, in parallel, cached by content.

Each build runs in a private temporary directory with fixed file names and
-ffile-prefix-map, so outputs do not depend on where or when they were built; the result
is cached under $OM2GEN_CACHE_DIR (default ~/.cache/om2gen) keyed by the sha256 of the
source, the exact command line and the compiler's version.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import CompileError
from ..resources import include_dir
from . import elfcheck
from .targets import Target

COMMON_FLAGS = ("-fPIC", "-shared", "-fvisibility=hidden", "-Wl,--build-id=sha1")
KERNEL_FLAGS = ("-std=c11", "-O3", "-ffp-contract=off", "-fno-math-errno", "-Wall", "-Wextra", "-Werror")
MODEL_FLAGS = ("-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror")


@dataclass(frozen=True)
class BuildResult:
    binary: bytes
    command: list[str]
    cached: bool


def _tool(env_var: str, candidates: tuple[str, ...]) -> str:
    """The compiler named by $CC/$CXX if set (and then only it), else the first of `candidates`."""
    wanted = os.environ.get(env_var)
    names = [wanted] if wanted else list(candidates)
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    if wanted:
        raise CompileError(f"{env_var}={wanted} names no executable compiler; fix {env_var} or unset it")
    raise CompileError(f"no {'C' if env_var == 'CC' else 'C++'} compiler found (tried {', '.join(names)}); install "
                       f"gcc/g++ (Debian: apt-get install build-essential) or set {env_var}")


@lru_cache(maxsize=None)
def _version(compiler: str) -> str:
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.splitlines()[0] if out.stdout else compiler


@lru_cache(maxsize=1)
def headers_digest() -> str:
    """Digest of every header a build can include, so a changed header never hits a stale cache."""
    h = hashlib.sha256()
    for path in sorted(include_dir().rglob("*.h")):
        h.update(path.relative_to(include_dir()).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def cache_dir() -> Path:
    base = os.environ.get("OM2GEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "om2gen")
    return Path(base)


def compiler_identity(cxx: bool = False) -> str:
    cc = _tool("CXX", ("c++", "g++")) if cxx else _tool("CC", ("cc", "gcc"))
    return _version(cc)


def _build(source: str, file_name: str, cxx: bool, flags: tuple[str, ...], libs: tuple[str, ...],
           what: str, exports: tuple[str, ...], target: Target) -> BuildResult:
    cc = _tool("CXX", ("c++", "g++")) if cxx else _tool("CC", ("cc", "gcc"))
    command = [os.path.basename(cc), *flags, *target.march_flags, *COMMON_FLAGS,
               "-I", "<om2gen>/runtime_abi/include", "-o", "out.so", file_name, *libs]
    key = hashlib.sha256("\0".join([source, *command, _version(cc), headers_digest()]).encode()).hexdigest()
    cached = cache_dir() / "objects" / key[:2] / f"{key}.so"
    if cached.is_file():
        data = cached.read_bytes()
        return BuildResult(data, command, True)
    with tempfile.TemporaryDirectory(prefix="om2gen-cc-") as tmp:
        (Path(tmp) / file_name).write_text(source)
        real = [cc, *flags, *target.march_flags, *COMMON_FLAGS, f"-ffile-prefix-map={tmp}=.",
                "-I", str(include_dir()), "-o", "out.so", file_name, *libs]
        try:
            proc = subprocess.run(real, cwd=tmp, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise CompileError(f"compiling {what} timed out after 600 s: {' '.join(command)}") from None
        if proc.returncode != 0:
            output = (proc.stderr or proc.stdout).strip()
            raise CompileError(f"compiling {what} failed (exit {proc.returncode})\ncommand: {' '.join(real)}\n{output}")
        data = (Path(tmp) / "out.so").read_bytes()
    elfcheck.check_shared_object(data, what, target, exports)
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(data)
    os.replace(partial, cached)
    return BuildResult(data, command, False)


def build_kernel(source: str, entry: str, target: Target) -> BuildResult:
    # -z defs: a kernel may depend on libc/libm only, never on the runtime
    return _build(source, f"{entry}.c", False, KERNEL_FLAGS + ("-Wl,-z,defs",), ("-lm",), f"kernel {entry}", (entry,), target)


MODEL_EXPORTS = ("GertModelGetAbiVersion", "GertModelGetLastError", "GertModelLoad", "GertModelRun",
                 "GertModelRunAsync", "GertModelUnload", "GertModelGetStreamNum", "GertModelGetEventNum")


def build_model_library(source: str, file_name: str, target: Target) -> BuildResult:
    exports = MODEL_EXPORTS
    flags = MODEL_FLAGS  # acl* symbols stay undefined: the runtime in the loading process provides them
    return _build(source, file_name, True, flags, (), f"model library {file_name}", exports, target)


def build_all(kernels: list[tuple[str, str]], target: Target, jobs: int | None = None,
              progress=None) -> list[BuildResult]:
    """Builds (source, entry) kernels in parallel; results in the same order."""
    jobs = jobs or os.cpu_count() or 1
    results: list[BuildResult | None] = [None] * len(kernels)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(build_kernel, src, entry, target): i for i, (src, entry) in enumerate(kernels)}
        for done, future in enumerate(futures, 1):
            results[futures[future]] = future.result()
            if progress:
                progress(done, len(kernels))
    return results  # type: ignore[return-value]
