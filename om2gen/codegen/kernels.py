"""Kernel specialisations → C sources, named by content so identical ones share a binary."""
from __future__ import annotations

import hashlib
import json
import re

from ..ir.program import Kernel, KernelCall
from ..toolchain import compiler
from ..version import GENERATOR
from . import render as jinja


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


_TILING_STRUCT = re.compile(r"typedef struct \{([^}]*)\} TilingData;")


def tiling_fields(source: str) -> list[str]:
    """The field names of a kernel source's TilingData (none: the kernel reads no tiling)."""
    m = _TILING_STRUCT.search(source)
    return re.findall(r"int64_t (\w+);", m.group(1)) if m else []


def addresses(call: KernelCall) -> dict:
    """The address slots a call's kernel reads (OM2_ADDR(i)) and the slot its tiling follows
    (OM2_TILING(..., i)), in the order lowering lays out a task's args (lower/lowering.py): the
    inputs given (an omitted one, "", has none), the outputs, the data-dependent count it writes
    (`symbol`, its entry of the symbols table) when it writes one, the scratch region when the
    call has one, then the tiling. `workspace` (`symbol`) is absent without a scratch region (a
    count), so that a template asking for it fails to render."""
    first_output = sum(not (isinstance(name, str) and not name) for name in call.inputs)
    after = first_output + len(call.outputs)
    slots = {"outputs": list(range(first_output, after))}
    if call.count_symbol:
        slots["symbol"] = after
        after += 1
    slots["tiling"] = after + bool(call.workspace)
    if call.workspace:
        slots["workspace"] = after
    return slots


def render(call: KernelCall, ctx) -> Kernel:
    """Renders one kernel call. The entry name is the op name plus a digest of everything that
    determines the source, so the same specialisation always gets the same name and binary."""
    # The name is also the kernel's id in the process-wide bin-handle store, so everything that
    # changes the binary is in it: source inputs (the template and every template it imports),
    # target and compiler (and a tuned target's -mtune, when the compiler has it: an untuned
    # target's names stay as they were).
    key = hashlib.sha256()
    imported = [jinja.template_source(t) for t in jinja.imported_templates(call.template)]
    addr = addresses(call)
    for part in (call.template, jinja.template_source(call.template), *imported,
                 call.name, _canonical(call.params), _canonical(addr), GENERATOR, ctx.target.name,
                 compiler.compiler_identity(), compiler.headers_digest(), "sink" if call.sink else "",
                 *compiler.tune_flags(ctx.target)):
        key.update(part.encode())
        key.update(b"\0")
    entry = f"{call.name}_{key.hexdigest()[:12]}"
    k = dict(call.params)
    k.update(entry=entry, template=call.template, generator=GENERATOR.split()[-1], addr=addr)
    k.setdefault("notes", [])
    source = jinja.render(call.template, k=k)
    if call.sink:   # a dynamic model's kernel: its tiling is at an address (om2/om2_kernel.h)
        source = (f"/* A tiling-sink kernel of a dynamic model: slot {addr['tiling']} holds the address of its tiling,\n"
                  f" * which its PREPROCESS_KERNEL task writes before each run (docs/dynamic-shapes.md). */\n"
                  f"#define OM2_TILING_SINK {addr['tiling']}\n" + source)
    fields = tiling_fields(source)
    assert fields == list(call.tiling), \
        f"{call.template}: TilingData declares {fields}, but the lowering of {call.name} gives {list(call.tiling)}"
    return Kernel(entry=entry, source=source, template=call.template,
                  digest=hashlib.sha256(source.encode()).hexdigest())
