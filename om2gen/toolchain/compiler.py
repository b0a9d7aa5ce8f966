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
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from ..errors import CompileError
from ..resources import include_dir, prebuilt_dir
from . import elfcheck, kernel_lib, uarch
from .targets import Target, host_arch

# -z noseparate-code: code and read-only data share one page-aligned segment, which halves a
# small kernel's file (15 KB -> 7 KB; an archive holds dozens) at no run-time cost.
_NOSEPARATE = "-Wl,-z,noseparate-code"
COMMON_FLAGS = ("-fPIC", "-shared", "-fvisibility=hidden", "-Wl,--build-id=sha1", _NOSEPARATE)
# -fno-trapping-math: no float operation traps (the runtime never unmasks a floating-point
# exception), so the vectorizer may compute both sides of a select: without it GCC leaves every
# loop over om2_vmath.h's expf/erff/tanhf scalar ("control flow in loop"). Results are the same.
KERNEL_FLAGS = ("-std=c11", "-O3", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-Wall", "-Wextra",
                "-Werror")
MODEL_FLAGS = ("-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror")


@dataclass(frozen=True)
class BuildResult:
    binary: bytes
    commands: list[list[str]]   # as recorded in the archive (run in order in one directory)
    cached: bool
    # the kernel library objects the binary links ({object file name: the command that compiles
    # it, to run first}; toolchain/kernel_lib.py)
    libraries: dict[str, list[str]] = field(default_factory=dict)


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


@contextmanager
def cache_settings(cache: Path | str, *, prebuilt: bool = True):
    """Within it, builds use `cache` as the kernel cache ($OM2GEN_CACHE_DIR) and, with prebuilt
    False, ignore the objects prebuilt at install ($OM2GEN_NO_PREBUILT); both restored after."""
    saved = {k: os.environ.get(k) for k in ("OM2GEN_CACHE_DIR", "OM2GEN_NO_PREBUILT")}
    os.environ["OM2GEN_CACHE_DIR"] = str(cache)
    if prebuilt:
        os.environ.pop("OM2GEN_NO_PREBUILT", None)
    else:
        os.environ["OM2GEN_NO_PREBUILT"] = "1"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _compiler(cxx: bool, target: Target | None = None) -> str:
    """$CC/$CXX (else cc/c++) for this machine's CPU; for another CPU, Debian's cross compiler
    <arch>-linux-gnu-gcc/g++ (packages gcc-<arch>-linux-gnu, g++-<arch>-linux-gnu)."""
    if target is None or target.arch == host_arch():
        return _tool("CXX", ("c++", "g++")) if cxx else _tool("CC", ("cc", "gcc"))
    name = f"{target.arch}-linux-gnu-{'g++' if cxx else 'gcc'}"
    path = shutil.which(name)
    if path is None:
        raise CompileError(f"cross-compiling for --target {target.name} needs {name}, which is not installed; "
                           f"install Debian's cross toolchain: apt-get install gcc-{target.arch}-linux-gnu "
                           f"g++-{target.arch}-linux-gnu")
    return path


def compiler_identity(cxx: bool = False, target: Target | None = None) -> str:
    return _version(_compiler(cxx, target))


def tune_flags(target: Target) -> tuple[str, ...]:
    """The -mtune flag of a tuned target when the C compiler knows its microarchitecture, else
    () (the ISA target's own -mtune=generic stays)."""
    if target.tune == uarch.GENERIC:
        return ()
    flag = uarch.mtune_flag(target.tune, _compiler(False, target))
    return () if flag == f"-mtune={uarch.GENERIC}" else (flag,)


def march_flags(target: Target) -> tuple[str, ...]:
    """The target's -march/-mtune flags, -mtune as tune_flags gives it."""
    tuned = tune_flags(target)
    return tuple(tuned[0] if tuned and f.startswith("-mtune=") else f for f in target.march_flags)


def _run(real: list[str], cwd: str, what: str) -> None:
    try:
        proc = subprocess.run(real, cwd=cwd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise CompileError(f"compiling {what} timed out after 600 s: {' '.join(real)}") from None
    if proc.returncode != 0:
        output = (proc.stderr or proc.stdout).strip()
        raise CompileError(f"compiling {what} failed (exit {proc.returncode})\ncommand: {' '.join(real)}\n{output}")


def _cached(key_parts: list[str], suffix: str, produce) -> tuple[bytes, bool]:
    """The bytes cached under the digest of key_parts (in the objects built when om2gen was
    installed, om2gen/prebuild.py, then in the cache), or produce() them and cache them."""
    key = hashlib.sha256("\0".join([*key_parts, headers_digest()]).encode()).hexdigest()
    name = Path("objects") / key[:2] / f"{key}{suffix}"
    if not os.environ.get("OM2GEN_NO_PREBUILT") and (prebuilt_dir() / name).is_file():
        return (prebuilt_dir() / name).read_bytes(), True
    cached = cache_dir() / name
    if cached.is_file():
        return cached.read_bytes(), True
    data = produce()
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f"{cached.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    partial.write_bytes(data)
    os.replace(partial, cached)
    return data, False


@lru_cache(maxsize=None)
def _library_linker(cxx: str) -> tuple[str, ...]:
    """The flags that link a model library: GNU gold where this toolchain has it (it links one
    against libstdc++ in about 55 ms where ld.bfd takes 140 ms, and a test run links thousands),
    else the default linker with -z noseparate-code. gold never splits code into a segment of its
    own, so both give one R+X and one RW segment. Decided once per compiler version by linking an
    empty library, and the answer cached with the objects: a compile whose objects are all cached
    runs no compiler at all."""
    gold, _ = _cached(["library linker: links with gold", cxx, _version(cxx)], ".linker",
                      lambda: b"gold" if _links_with_gold(cxx) else b"default")
    if gold != b"gold":
        return COMMON_FLAGS
    return ("-fuse-ld=gold", *(f for f in COMMON_FLAGS if f != _NOSEPARATE))


def _links_with_gold(cxx: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="om2gen-ld-") as tmp:
        (Path(tmp) / "probe.cpp").write_text("int om2gen_probe() { return 0; }\n")
        try:
            proc = subprocess.run([cxx, "-fuse-ld=gold", *(f for f in COMMON_FLAGS if f != _NOSEPARATE),
                                   "-o", "probe.so", "probe.cpp"], cwd=tmp, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return proc.returncode == 0


def _shown(cc: str, args: list[str]) -> list[str]:
    """The command as recorded in archives: no host paths."""
    return [os.path.basename(cc)] + ["<om2gen>/runtime_abi/include" if a == str(include_dir()) else a for a in args]


def _build(source: str, file_name: str, cxx: bool, flags: tuple[str, ...], libs: tuple[str, ...],
           what: str, exports: tuple[str, ...], target: Target,
           objects: tuple[tuple[str, bytes], ...] = ()) -> BuildResult:
    """One source file straight to a shared object, linked with `objects` ((file name, bytes):
    the kernel library's, written next to the source)."""
    cc = _compiler(cxx, target)
    args = [*flags, *march_flags(target), *COMMON_FLAGS, "-I", str(include_dir()), "-o", "out.so", file_name,
            *(name for name, _ in objects), *libs]

    def produce() -> bytes:
        with tempfile.TemporaryDirectory(prefix="om2gen-cc-") as tmp:
            (Path(tmp) / file_name).write_text(source)
            for name, data in objects:
                (Path(tmp) / name).write_bytes(data)
            _run([cc, f"-ffile-prefix-map={tmp}=.", *args], tmp, what)
            data = (Path(tmp) / "out.so").read_bytes()
        elfcheck.check_shared_object(data, what, target, exports)
        return data

    command = _shown(cc, args)
    digests = [hashlib.sha256(data).hexdigest() for _, data in objects]
    data, cached = _cached([source, *command, *digests, _version(cc), headers_digest()], ".so", produce)
    return BuildResult(data, [command], cached)


def library_object(lib: kernel_lib.Library, defines: tuple[str, ...], target: Target) -> tuple[list[str], bytes]:
    """A kernel library object for this target and blocking: (the command as recorded, its bytes),
    compiled once and cached by content like every build."""
    cc = _compiler(False, target)
    file_name = f"{lib.name}.c"
    args = [*KERNEL_FLAGS, *march_flags(target), "-fPIC", "-fvisibility=hidden", *defines, "-I", str(include_dir()),
            "-c", "-o", f"{lib.name}.o", file_name]
    source = lib.source()

    def produce() -> bytes:
        with tempfile.TemporaryDirectory(prefix="om2gen-cc-") as tmp:
            (Path(tmp) / file_name).write_text(source)
            _run([cc, f"-ffile-prefix-map={tmp}=.", *args], tmp, f"the kernel library {lib.name}")
            return (Path(tmp) / f"{lib.name}.o").read_bytes()

    command = _shown(cc, args)
    # kernels built side by side that need the same object wait for one compile of it
    with _LIBRARY_LOCKS_GUARD:
        lock = _LIBRARY_LOCKS.setdefault((lib.name, defines, target), threading.Lock())
    with lock:
        data, _ = _cached([source, *command, _version(cc), headers_digest()], ".o", produce)
    return command, data


_LIBRARY_LOCKS: dict = {}
_LIBRARY_LOCKS_GUARD = threading.Lock()


def build_kernel(source: str, entry: str, target: Target) -> BuildResult:
    """A kernel binary, linked with the kernel library objects it calls (toolchain/kernel_lib.py)."""
    defines = kernel_lib.defines(source)
    built = {lib.name: library_object(lib, defines, target) for lib in kernel_lib.needed(source)}
    # -z defs: a kernel may depend on libc/libm only, never on the runtime; -nostartfiles: no
    # constructors (crt's), so the runtime maps it without the dynamic loader (om2_kernel_image.h)
    result = _build(source, f"{entry}.c", False, KERNEL_FLAGS + ("-nostartfiles", "-Wl,-z,defs"), ("-lm",),
                    f"kernel {entry}", (entry,), target, tuple((f"{n}.o", data) for n, (_, data) in built.items()))
    return replace(result, libraries={f"{n}.o": command for n, (command, _) in built.items()})


def build_tiling_library(source: str, entries: list[str], target: Target) -> BuildResult:
    """A dynamic model's device tiling library (codegen/tiling_library.py): built and loaded as
    a kernel binary, one entry per PREPROCESS_KERNEL task."""
    return _build(source, "op_master_device.c", False, KERNEL_FLAGS + ("-nostartfiles", "-Wl,-z,defs"), ("-lm",),
                  "the device tiling library", tuple(entries), target)


def build_host_library(source: str, target: Target) -> BuildResult:
    """A dynamic .om's host op library (codegen/host_library.py, om2/om2_op_host.h): host code,
    dlopen'ed by the executor, exporting Om2OpHostGetTable."""
    return _build(source, "op_host.c", False, KERNEL_FLAGS, (), "the host op library", ("Om2OpHostGetTable",),
                  target)


HOST_C_FLAGS = ("-std=c11", "-O2", "-Wall", "-Wextra", "-Werror")


def build_autofuse_library(source: str, file_name: str, exports: list[str], target: Target) -> BuildResult:
    """One of a dynamic model's kAutofuse shared objects (codegen/autofuse_library.py): host C for
    the target, linked against libc only, exporting `exports` (om2/om2_autofuse.h)."""
    return _build(source, file_name, False, HOST_C_FLAGS + ("-Wl,-z,defs",), (), f"{file_name}", tuple(exports),
                  target)


MODEL_EXPORTS = ("GertModelGetAbiVersion", "GertModelGetLastError", "GertModelLoad", "GertModelRun",
                 "GertModelRunAsync", "GertModelUnload", "GertModelGetStreamNum", "GertModelGetEventNum",
                 "Om2ModelGetTables")


def model_object(name: str, text: str, target: Target) -> tuple[str, list[str], bytes, bool]:
    """One model library source compiled to an object, cached by content: (object file name,
    the command as recorded, its bytes, whether it came from the cache)."""
    cxx = _compiler(True, target)
    obj = name.rsplit(".", 1)[0] + ".o"
    args = [*MODEL_FLAGS, *march_flags(target), "-fPIC", "-fvisibility=hidden", "-I", str(include_dir()),
            "-c", "-o", obj, name]

    def produce() -> bytes:
        with tempfile.TemporaryDirectory(prefix="om2gen-cc-") as tmp:
            (Path(tmp) / name).write_text(text)
            _run([cxx, f"-ffile-prefix-map={tmp}=.", *args], tmp, f"model source {name}")
            return (Path(tmp) / obj).read_bytes()

    command = _shown(cxx, args)
    data, cached = _cached([text, *command, _version(cxx), headers_digest()], ".o", produce)
    return obj, command, data, cached


def build_model_library(sources: dict[str, str], target: Target) -> BuildResult:
    """Compiles each C++ source to an object (cached by content: the load-and-run source is the
    same for every model, so only the tables compile per model), then links the library."""
    cxx = _compiler(True, target)
    commands, objects = [], []
    any_built = False
    for name, text in sorted(sources.items()):
        obj, command, data, cached = model_object(name, text, target)
        any_built |= not cached
        commands.append(command)
        objects.append((obj, data))
    # acl* symbols stay undefined: the runtime in the loading process provides them
    link = [*_library_linker(cxx), "-o", "out.so", *(o for o, _ in objects)]

    def produce_lib() -> bytes:
        with tempfile.TemporaryDirectory(prefix="om2gen-cc-") as tmp:
            for obj, data in objects:
                (Path(tmp) / obj).write_bytes(data)
            _run([cxx, *link], tmp, "the model library")
            data = (Path(tmp) / "out.so").read_bytes()
        elfcheck.check_shared_object(data, "the model library", target, MODEL_EXPORTS)
        return data

    commands.append(_shown(cxx, link))
    digests = [hashlib.sha256(d).hexdigest() for _, d in objects]
    lib, cached = _cached([*digests, *commands[-1], _version(cxx)], ".so", produce_lib)
    return BuildResult(lib, commands, cached and not any_built)


def build_all(kernels: list[tuple[str, str]], target: Target, jobs: int | None = None,
              progress=None, model_sources: dict[str, str] | None = None) -> list[BuildResult]:
    """Builds (source, entry) kernels in parallel; results in the same order. model_sources:
    model library sources ({file name: text}) whose objects are compiled into the cache in the
    same pool, so that build_model_library finds them there (the load-and-run source, the same
    for every model, took 6 s of a cold compile after all kernels were done). The longest
    sources are started first, so that no long compile is left running alone at the end."""
    jobs = jobs or os.cpu_count() or 1
    results: list[BuildResult | None] = [None] * len(kernels)
    objects = sorted((model_sources or {}).items())
    # the kernel library objects first (the longest compiles), then the kernels that need none,
    # so that those run while the objects compile
    libraries = sorted({(lib, kernel_lib.defines(src)) for src, _ in kernels for lib in kernel_lib.needed(src)},
                       key=lambda ld: (ld[0].name, ld[1]))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending = [pool.submit(library_object, lib, defines, target) for lib, defines in libraries]
        pending += [pool.submit(model_object, name, text, target) for name, text in objects]
        futures = {}
        for i in sorted(range(len(kernels)), key=lambda i: (bool(kernel_lib.needed(kernels[i][0])),
                                                            -len(kernels[i][0]))):
            src, entry = kernels[i]
            futures[pool.submit(build_kernel, src, entry, target)] = i
        for done, future in enumerate(futures, 1):
            results[futures[future]] = future.result()
            if progress:
                progress(done, len(kernels))
        for future in pending:
            future.result()
    return results  # type: ignore[return-value]
