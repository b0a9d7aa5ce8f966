"""The model library's load-and-run source (templates/model/load_and_run.cpp.j2): the same for
every model, so its object is compiled once per target (when om2gen is installed,
om2gen/prebuild.py, else on the first compile) and linked into every model library."""
from __future__ import annotations

from ..formats.om2 import layout
from ..version import GENERATOR
from . import render as jinja


def load_and_run_source() -> dict[str, str]:
    """{file name: text} of the model library's load-and-run code, the same for every model
    (the pipeline has it compiled while the kernels compile)."""
    return {layout.LOAD_AND_RUN_SOURCE: jinja.render("model/load_and_run.cpp.j2", generator=GENERATOR,
                                                     table_driven=False)}
