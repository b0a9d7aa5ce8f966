"""Run-time misuse cases: a genuine model, used oddly. Each family draws the parameters of one
case (rng) and returns (description, scenario, params, extra) for the child (child.SCENARIOS)."""
from __future__ import annotations

import io

from . import feeds

RAW = ("ok", "no-inputs", "extra-input", "no-outputs", "null-input", "null-output", "none", "str", "float", "np-int",
       "array", "tuple", "generator", "huge")
LOAD = ("path", "pathlike", "bytes", "bytearray", "memoryview", "numpy", "mmap", "memoryview-strided", "threads-0",
        "threads-neg", "threads-float", "threads-str", "threads-bool", "threads-huge", "threads-1", "threads-np",
        "mismatch-str", "fifo", "directory", "none", "int", "float", "list", "dict", "object", "missing", "empty-path",
        "nul-path", "long-path", "empty-bytes", "magic-only", "om-magic-only", "dev-null", "dev-zero", "proc",
        "str-content")


def odd_inputs(rng, ctx):
    recipe = feeds.draw(rng)
    return feeds.describe(recipe), "inputs", recipe, {}


def odd_raw(rng, ctx):
    what = rng.choice(RAW)
    return f"execute_raw({what})", "raw", {"what": what}, {}


def odd_load(rng, ctx):
    what = rng.choice(LOAD)
    return f"load({what})", "load_args", {"what": what}, {}


def race_close(rng, ctx):
    p = {"api": rng.choice(("run", "execute_raw")), "delay_us": rng.choice((0, 10, 50, 100, 300, 1000, 3000)),
         "runs": rng.choice((5, 50, 500))}
    return f"{p['api']}() x{p['runs']} racing close() after {p['delay_us']} us", "race_close", p, {}


def double_close(rng, ctx):
    p = {"threads": rng.choice((2, 2, 3, 8)), "via": rng.choice(("close", "close", "exit", "del")),
         "run_first": rng.random() < 0.5}
    return f"{p['via']}() from {p['threads']} threads at once{' after a run' if p['run_first'] else ''}", \
        "double_close", p, {}


def concurrent(rng, ctx):
    p = {"what": rng.choice(("runs", "loads")), "threads": rng.choice((2, 4, 8)), "runs": rng.choice((3, 10)),
         "model_threads": rng.choice((None, 1, 2))}
    return f"{p['threads']} threads x {p['runs']} {p['what']} (threads={p['model_threads']})", "concurrent", p, {}


def file_change(rng, ctx):
    size = len(ctx.data)
    action = rng.choice(("truncate", "truncate", "overwrite-range", "overwrite-range", "overwrite-other",
                         "rewrite-same", "replace", "unlink"))
    p = {"action": action}
    if action == "truncate":
        p["size"] = rng.choice((0, 4096, size // 2, size - 1))
    elif action == "overwrite-range":
        p["offset"], p["length"] = ctx.weights_span(rng)
    elif action in ("overwrite-other", "replace"):
        p["other"] = "@other"
    desc = {"truncate": f"file truncated to {p.get('size')} bytes", "overwrite-range":
            f"{p.get('length')} bytes at {p.get('offset')} rewritten in place", "overwrite-other":
            "file rewritten in place with another model", "rewrite-same": "file rewritten in place, same bytes",
            "replace": "another model renamed over the file", "unlink": "file deleted"}[action]
    return f"{desc} while loaded", "file_change", p, {}


def poison(rng, ctx):
    other_fmt = rng.choice(ctx.formats)
    return f"{ctx.fmt} with a tampered kernel (digest recomputed) loaded, then the genuine {other_fmt}", "poison", \
        {"genuine": "@genuine:" + other_fmt}, {"tamper": True}


FAMILIES = {
    "run() with odd inputs": (6, odd_inputs),
    "execute_raw() with odd arguments": (2, odd_raw),
    "load() with odd arguments": (2, odd_load),
    "run()/execute_raw() racing close()": (3, race_close),
    "close() twice at once": (2, double_close),
    "concurrent run()/load() from threads": (2, concurrent),
    "file changed under a loaded model": (2, file_change),
    "kernel-store poisoning": (1, poison),
}


def ret_patched(elf: bytes, symbol: str) -> bytes:
    """The kernel with its entry function replaced by a bare `ret`: a valid ELF that defines the
    same entry and does nothing (x86-64 only)."""
    from elftools.elf.elffile import ELFFile
    f = ELFFile(io.BytesIO(elf))
    sym = f.get_section_by_name(".dynsym").get_symbol_by_name(symbol)[0]
    vaddr = sym["st_value"]
    for seg in f.iter_segments():
        if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= vaddr < seg["p_vaddr"] + seg["p_filesz"]:
            off = vaddr - seg["p_vaddr"] + seg["p_offset"]
            b = bytearray(elf)
            b[off] = 0xC3
            return bytes(b)
    raise ValueError(f"{symbol} is not in a loaded segment")


def tampered_om2(base) -> bytes:
    """base: mutate_om2.Base. Its last kernel (the output's producer) made a no-op, digest recomputed."""
    name = base.kernels[-1]
    symbol = name.rsplit("/", 1)[1][:-2]
    return base.repack({name: ret_patched(base.by_name[name].payload, symbol)})


def tampered_om(base) -> bytes:
    """base: mutate_om.Base. The kernel of its last kernel task made a no-op, the partition digests
    MODEL_DEF records (if any) recomputed."""
    from .mutate_om import PT, store
    last = base.mtd.task[base.kernel_tasks()[-1]].kernel.kernel_name
    return base.rebuild({PT.TBE_KERNELS: store([(n, ret_patched(b, n) if n == last else b) for n, b in base.kernels])},
                        redigest=True)
