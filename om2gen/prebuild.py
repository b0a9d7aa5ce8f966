"""The objects every model compiled for a target shares, built when om2gen is installed
(setup.py runs this after the runtime is built): per target of this machine's architecture, the
kernel library (toolchain/kernel_lib.py: the packed GEMM and the few-row product, at the
target's blocking) and the model library's load-and-run object (codegen/load_and_run.py). A
compile finds them by the same content key as its cache (toolchain/compiler.py _cached), so a
first compile on a new machine, with an empty kernel cache, compiles only what is the model's
own: the kernels' loops and epilogues and the model's tables. Without them (an install that
could not build them, a changed compiler, a tuned target not listed here) nothing changes but
time: the objects are compiled into the cache on first use, with the same bytes.

    python -m om2gen.prebuild [DIR]     (DIR: default om2gen/_prebuilt inside the package)
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .codegen.load_and_run import load_and_run_source
from .resources import prebuilt_dir
from .toolchain import compiler, kernel_lib, targets
from .toolchain.blocking import blocking


def prebuilt_targets() -> list[targets.Target]:
    """This machine's default target (tuned for its CPU) and every untuned target of its
    architecture (what --target names most often, and what the tests pin)."""
    arch = targets.host_arch()
    chosen = [targets.default_target()]
    chosen += [t for t in targets.TARGETS.values() if t.arch == arch and t not in chosen]
    return chosen


def _library_defines(target) -> tuple[str, ...]:
    """The kernel library's -D flags for a target, read back as the kernels' sources define them."""
    return kernel_lib.defines("".join(f"#define {k} {v}\n" for k, v in blocking(target).defines().items()))


def build(dest: Path, jobs: int | None = None) -> dict:
    """Builds the objects for prebuilt_targets() into dest (replacing what it held); returns
    what was built, also written to dest/prebuilt.json."""
    with tempfile.TemporaryDirectory(prefix="om2gen-prebuild-") as tmp:
        # a cache of its own, copied out below; built, never read from an older prebuild
        with compiler.cache_settings(tmp, prebuilt=False):
            work = []
            for t in prebuilt_targets():
                defines = _library_defines(t)
                work += [(compiler.library_object, (lib, defines, t), f"{t.spec}: {lib.name}")
                         for lib in kernel_lib.LIBRARIES]
                work += [(compiler.model_object, (name, text, t), f"{t.spec}: {name}")
                         for name, text in load_and_run_source().items()]
            with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
                for future in [pool.submit(fn, *args) for fn, args, _ in work]:
                    future.result()
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(Path(tmp) / "objects", dest / "objects")
    report = {"compiler": compiler.compiler_identity(), "targets": [t.spec for t in prebuilt_targets()],
              "objects": [what for _, _, what in work]}
    (dest / "prebuilt.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    dest = Path(args[0]) if args else prebuilt_dir()
    report = build(dest)
    print(f"om2gen: prebuilt {len(report['objects'])} objects for {', '.join(report['targets'])} into {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
