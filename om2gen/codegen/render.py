"""The one Jinja environment: StrictUndefined, templates from the top-level templates/ folder."""
from __future__ import annotations

import functools

import jinja2
import jinja2.meta

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


@functools.lru_cache(maxsize=None)
def imported_templates(name: str) -> tuple[str, ...]:
    """Every template that `name` imports or includes, directly or through another, sorted (parsed
    once per process: the shipped templates do not change under a running compiler)."""
    found: set[str] = set()
    todo = [name]
    while todo:
        ast = environment().parse(template_source(todo.pop()))
        for ref in jinja2.meta.find_referenced_templates(ast):
            assert ref is not None, f"{name}: a template imported by a computed name cannot be hashed"
            if ref not in found:
                found.add(ref)
                todo.append(ref)
    return tuple(sorted(found))


def render(name: str, **context) -> str:
    return environment().get_template(name).render(**context)
