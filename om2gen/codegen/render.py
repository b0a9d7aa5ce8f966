"""The one Jinja environment: StrictUndefined, templates from the top-level templates/ folder."""
from __future__ import annotations

import functools

import jinja2

from ..resources import templates_dir
from . import literals


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,
    )
    env.filters["c_float"] = literals.c_float
    env.filters["c_int"] = literals.c_int
    env.filters["c_string"] = literals.c_string
    env.filters["c_comment"] = literals.c_comment
    return env


def template_source(name: str) -> str:
    return (templates_dir() / name).read_text()


def render(name: str, **context) -> str:
    return environment().get_template(name).render(**context)
