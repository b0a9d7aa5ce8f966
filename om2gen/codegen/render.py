"""The one Jinja environment: StrictUndefined, templates from the top-level templates/ folder."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from pathlib import Path

import jinja2
import jinja2.meta

from ..resources import templates_dir
from ..toolchain.compiler import cache_dir
from . import literals


def _cached_here() -> Path:
    """Where compiled templates and their import lists are cached: under the kernel cache (it
    follows $OM2GEN_CACHE_DIR as it changes)."""
    return cache_dir() / "templates"


class _TemplateCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates, cached (jinja2 keys each by its name and checks its source's digest,
    so an edited template compiles again): compiling the templates took 0.9 s of every ResNet-50
    compile with a warm kernel cache. A cache that cannot be read or written is passed over."""

    def __init__(self):
        super().__init__(str(_cached_here()))

    def load_bytecode(self, bucket) -> None:
        self.directory = str(_cached_here())
        try:
            super().load_bytecode(bucket)
        except OSError:
            pass

    def dump_bytecode(self, bucket) -> None:
        self.directory = str(_cached_here())
        try:
            os.makedirs(self.directory, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        bytecode_cache=_TemplateCache(),
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
    """Every template that `name` imports or includes, directly or through another, sorted (found
    once per process: the shipped templates do not change under a running compiler)."""
    found: set[str] = set()
    todo = [name]
    while todo:
        for ref in _references(todo.pop()):
            if ref not in found:
                found.add(ref)
                todo.append(ref)
    return tuple(sorted(found))


def _references(name: str) -> list[str]:
    """The templates `name` itself imports or includes. Parsing a template is most of what this
    costs (0.3 s of a warm BERT compile), so the answer is cached next to the compiled templates,
    keyed by the template's source."""
    source = template_source(name)
    cached = _cached_here() / f"refs-{hashlib.sha256(source.encode()).hexdigest()}.json"
    try:
        return json.loads(cached.read_text())
    except (OSError, ValueError):
        pass
    refs = sorted(jinja2.meta.find_referenced_templates(environment().parse(source)), key=str)
    assert None not in refs, f"{name}: a template imported by a computed name cannot be hashed"
    partial = cached.with_name(f"{cached.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(refs))
        os.replace(partial, cached)
    except OSError:
        partial.unlink(missing_ok=True)
    return refs


def render(name: str, **context) -> str:
    return environment().get_template(name).render(**context)
