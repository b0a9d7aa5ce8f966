"""`om2gen config`: the flags to build a custom-op library (python3-config style). The library of
test_author_ops.py is built with `om2gen config --cxxflags --ldflags` (authorlib.py)."""
import subprocess
import sys
from pathlib import Path

import om2gen.resources


def config(*options):
    return subprocess.run([sys.executable, "-m", "om2gen.cli.entry", "config", *options], capture_output=True, text=True)


def test_includes_names_the_directory_of_the_custom_op_header():
    out = config("--includes")
    assert out.returncode == 0, out.stderr
    flag, = out.stdout.split()
    assert flag.startswith("-I") and (Path(flag[2:]) / "om2" / "custom_op.h").is_file()
    assert Path(flag[2:]) == om2gen.resources.include_dir()
    assert config("--include-dir").stdout.strip() == str(om2gen.resources.include_dir())


def test_flags_for_a_library_each_once_in_order():
    out = config("--cxxflags", "--ldflags", "--includes").stdout.split()
    assert out == [f"-I{om2gen.resources.include_dir()}", "-std=c++17", "-fPIC", "-shared"]
    assert config("--cflags").stdout.split() == [f"-I{om2gen.resources.include_dir()}", "-fPIC"]


def test_no_option_is_an_error_that_lists_them():
    out = config()
    assert out.returncode != 0 and "--includes" in out.stderr and "Traceback" not in out.stderr
