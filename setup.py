"""Build glue only: everything else lives in pyproject.toml.

The cffi module om2gen._native (the CPU ACL runtime and the executor's native half) is
compiled here, at install time, so that loading a model never needs a compiler.
"""
from setuptools import setup

setup(cffi_modules=["om2gen/_build_native.py:ffibuilder"])
