"""Build glue only: everything else lives in pyproject.toml.

The cffi module om2gen._native (the CPU ACL runtime and the executor's native half) is
compiled here, at install time, so that loading a model never needs a compiler. Then the
objects every model of a target shares (om2gen/prebuild.py: the kernel library, the model
library's load-and-run code) are compiled into om2gen/_prebuilt, so that a first compile
compiles only the model's own code.
"""
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

# om2gen.prebuild imported from the source tree without running the package's __init__ (which
# loads the runtime this very build is making): the build's environment has only what
# pyproject.toml's [build-system] requires.
_PREBUILD = """
import importlib.util, sys
root = sys.argv[1]
spec = importlib.util.spec_from_file_location("om2gen", root + "/om2gen/__init__.py",
                                              submodule_search_locations=[root + "/om2gen"])
sys.modules["om2gen"] = importlib.util.module_from_spec(spec)
from om2gen import prebuild
sys.exit(prebuild.main(sys.argv[2:]))
"""


class BuildExtAndPrebuild(build_ext):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parent
        dest = (root if self.inplace else Path(self.build_lib).resolve()) / "om2gen" / "_prebuilt"
        proc = subprocess.run([sys.executable, "-c", _PREBUILD, str(root), str(dest)], cwd=root)
        if proc.returncode != 0:   # om2gen works without them: the first compile builds them
            print("warning: om2gen could not prebuild its shared objects (see above); each will be compiled "
                  "once, on first use, into the kernel cache", file=sys.stderr)


setup(cffi_modules=["om2gen/_build_native.py:ffibuilder"], cmdclass={"build_ext": BuildExtAndPrebuild})
