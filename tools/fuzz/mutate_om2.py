"""Mutants of an .om2 archive. Every family is a function (rng, Base) -> (description, bytes).

Families whose name ends "digests kept" leave the manifest as compiled, so every change to an
entry is detectable by its digest. "digests recomputed" families rewrite the ZIP so the archive
looks genuine (the manifest's size and every digest it records, sha256 and BLAKE3, and the CRC-32
match the new bytes): only changes a
loader can catch by checking structure and consistency (ELF structure, sizes the model library
knows, model_meta.json against the library's own tables) are made there, never a change to code or
weights that only a signature could tell from a real build."""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import struct

from . import common, zipkit
from .common import flip_in

BOMB_SIZES = (256 << 20, 1 << 30, 2 << 30)


@dataclasses.dataclass
class Base:
    name: str
    data: bytes
    entries: list          # zipkit.Entry, in file order
    others: list           # Base of the other models (kernels and libraries to swap in)

    def __post_init__(self):
        self.by_name = {e.name: e for e in self.entries}
        self.manifest = zipkit.manifest_of(self.entries)
        self.meta_name = self.manifest["models"][0]["meta"]
        self.meta = json.loads(self.by_name[self.meta_name].payload)
        self.library = self.meta["library"]
        self.kernels = list(self.meta["kernels"])
        self.constants = "data/constants/constants_0"

    def pick(self, rng, what: str) -> zipkit.Entry:
        if what == "kernel":
            return self.by_name[rng.choice(self.kernels)]
        if what == "other":
            return rng.choice([e for e in self.entries if e.method != 0])
        return self.by_name[{"manifest": zipkit.MANIFEST, "meta": self.meta_name, "constants": self.constants,
                             "library": self.library}[what]]

    def repack(self, changes=None, **kw) -> bytes:
        return zipkit.build(zipkit.items_of(self.entries, changes, **kw))


def _entry_flip(what):
    def family(rng, b: Base):
        e = b.pick(rng, what)
        return flip_in(rng, b.data, e.data_start, e.data_end, e.name)
    return family


def flips_anywhere(rng, b: Base):
    data, desc = common.flip(rng, b.data, 0, len(b.data), rng.choice((1, 2, 4, 8)))
    return f"anywhere: {desc}", data


def flips_zip_headers(rng, b: Base):
    cd_start, cd_end = zipkit.central_directory_span(b.data)
    region = rng.random()
    if region < 0.4:
        e = rng.choice(b.entries)
        return flip_in(rng, b.data, e.header_offset, e.data_start, f"local header of {e.name}")
    if region < 0.85:
        return flip_in(rng, b.data, cd_start, cd_end, "central directory")
    return flip_in(rng, b.data, cd_end, len(b.data), "end of central directory record")


def truncations(rng, b: Base):
    e = rng.choice(b.entries)
    cd_start, _ = zipkit.central_directory_span(b.data)
    size = rng.choice([rng.randrange(len(b.data)), e.header_offset, e.data_start, (e.data_start + e.data_end) // 2,
                       e.data_end, cd_start, cd_start + rng.randrange(len(b.data) - cd_start), len(b.data) - 1,
                       len(b.data) - 22, rng.choice((0, 1, 3, 4, 21, 22, 30))])
    return f"truncated to {size} of {len(b.data)} bytes (near {e.name})", b.data[:size]


# ---- ZIP-level edits, the manifest as compiled ----------------------------------------------------
_FIELDS = {   # (offset in the central record, offset in the local header, struct code)
    "method": (10, 8, "H"), "crc": (16, 14, "I"), "csize": (20, 18, "I"), "usize": (24, 22, "I"),
    "name_len": (28, 26, "H"), "extra_len": (30, 28, "H"), "header_offset": (42, None, "I")}


def _field(b: Base, e, record: str, field: str, value_of) -> tuple[str, bytes]:
    """One field of the entry's central directory record or local header set to value_of(old)."""
    central, local, code = _FIELDS[field]
    at = e.central_offset + central if record == "central" else e.header_offset + local
    d = bytearray(b.data)
    old = struct.unpack_from("<" + code, d, at)[0]
    new = value_of(old) & ((1 << (8 * struct.calcsize(code))) - 1)
    struct.pack_into("<" + code, d, at, new)
    return f"{'central record' if record == 'central' else 'local header'} of {e.name}: {field} {old} -> {new}", \
        bytes(d)


def _central_field(b: Base, e, field: str, value_of) -> tuple[str, bytes]:
    return _field(b, e, "central", field, value_of)


def _local_field(b: Base, e, field: str, value_of) -> tuple[str, bytes]:
    return _field(b, e, "local", field, value_of)


def zip_edits(rng, b: Base):
    e = rng.choice(b.entries + [b.pick(rng, w) for w in ("constants", "library", "kernel", "meta", "manifest")])
    other = rng.choice([x for x in b.entries if x is not e])
    k = rng.choice((1, 2, 4, 8, 64, 4096))
    edit = rng.randrange(16)
    if edit == 0:
        return _central_field(b, e, "method", lambda v: 8 if v == 0 else 0)
    if edit == 1:
        desc, data = _central_field(b, e, "method", lambda v: 8 if v == 0 else 0)
        b2 = dataclasses.replace(b, data=data)
        desc2, data = _local_field(b2, e, "method", lambda v: 8 if v == 0 else 0)
        return f"{desc}, and in the local header", data
    if edit == 2:
        field = rng.choice(("csize", "usize"))
        return _central_field(b, e, field, rng.choice((lambda v: v + k, lambda v: v - k, lambda v: 0,
                                                           lambda v: 0xFFFFFFFF)))
    if edit == 3:
        return _central_field(b, e, "header_offset",
                              rng.choice((lambda v: other.header_offset, lambda v: v + k, lambda v: v - k)))
    if edit == 4:
        return _local_field(b, e, "extra_len", rng.choice((lambda v: v + k, lambda v: v - 2, lambda v: 0)))
    if edit == 5:
        return _local_field(b, e, "name_len", rng.choice((lambda v: v + 1, lambda v: v - 1, lambda v: 0)))
    if edit == 6:
        field = rng.choice(("crc", "csize", "usize"))
        return _local_field(b, e, field, lambda v: v ^ (1 << rng.randrange(32)))
    if edit == 7:
        return _central_field(b, e, "crc", lambda v: v ^ 1)
    if edit == 8:   # end record fields
        d = bytearray(b.data)
        field, off, code = rng.choice((("count", len(d) - 12, "H"), ("count on this disk", len(d) - 14, "H"),
                                       ("directory size", len(d) - 10, "I"), ("directory offset", len(d) - 6, "I"),
                                       ("comment length", len(d) - 2, "H"), ("disk", len(d) - 18, "H")))
        old = struct.unpack_from("<" + code, d, off)[0]
        new = rng.choice((old + 1, old - 1, 0, old + k)) & ((1 << (8 * struct.calcsize(code))) - 1)
        struct.pack_into("<" + code, d, off, new)
        return f"end record: {field} {old} -> {new}", bytes(d)
    if edit == 9:
        junk = bytes(rng.randrange(256) for _ in range(k))
        where = rng.choice(("appended", "prepended", "inserted"))
        if where == "appended":
            return f"{k} bytes appended", b.data + junk
        if where == "prepended":
            return f"{k} bytes prepended", junk + b.data
        return f"{k} bytes inserted into {e.name}", b.data[:e.data_start] + junk + b.data[e.data_start:]
    if edit == 10:   # rename in the central directory (same length)
        d = bytearray(b.data)
        name_at = e.central_offset + 46 + rng.randrange(len(e.name.encode()))
        old = d[name_at]
        d[name_at] = ord(rng.choice("abcXYZ09_/.\\")) if rng.random() < 0.9 else 0
        return f"central record of {e.name}: name byte {old:#x} -> {d[name_at]:#x}", bytes(d)
    items = zipkit.items_of(b.entries, fix_manifest=False)
    if edit == 11:
        dup = rng.choice(items)
        return f"entry {dup.name} written twice", zipkit.build(items + [dup])
    if edit == 12:
        gone = rng.choice([i for i in items if i.name != zipkit.MANIFEST])
        return f"entry {gone.name} left out of the ZIP (still listed in the manifest)", zipkit.build(
            [i for i in items if i is not gone])
    if edit == 13:
        name = rng.choice(("data/extra.bin", "../escape.so", "/abs/path.o", "data\\win.o", "data//x", "data/./x",
                           "data/a\x00b", "data/" + "n" * 2000, "data/kernels_x86_64/Evil_000000000000.o"))
        return f"an unlisted entry {name!r} added", zipkit.build(items + [zipkit.Item(name, b"\x7fELF" + bytes(60))])
    if edit == 14:   # a mapped entry unaligned: an odd-length unlisted entry shifts it
        target = rng.choice([i for i in items if i.name in (b.constants, b.library, *b.kernels)])
        target.align = False
        items.insert(items.index(target), zipkit.Item("data/aaa_odd", b"x" * rng.choice((1, 3, 4, 8, 17)), method=0,
                                                     align=False))
        return f"{target.name} stored unaligned (an unlisted entry before it)", zipkit.build(items)
    rng.shuffle(items)
    return "entries in another order (manifest not first)", zipkit.build(items)


# ---- genuine-looking repacks: sizes, CRC and digests recomputed -----------------------------------------
def _meta_change(b: Base, meta: dict, what: str):
    return what, b.repack({b.meta_name: zipkit.json_bytes(meta)})


def _io_edit(rng, b: Base):
    meta = copy.deepcopy(b.meta)
    side = rng.choice(("inputs", "outputs"))
    io = rng.choice(meta[side])
    shape = list(io["shape"])
    kind = rng.randrange(8)
    if kind == 0:
        i = rng.randrange(len(shape))
        shape[i] = rng.choice((shape[i] * 2, max(shape[i] // 2, 1), shape[i] + 1, 0, 4096, 1 << 31, 1 << 62))
    elif kind == 1:
        shape = shape[::-1] if len(set(shape)) > 1 else shape + [1]
    elif kind == 2:
        shape = shape + [1] if rng.random() < 0.5 else shape[1:]
    elif kind == 3:
        shape = [math.prod(shape)]
    elif kind == 4:
        io["dtype"] = rng.choice(("float16", "int32", "float64", "uint8", "int64", "bool"))
        io["shape"] = shape
        return _meta_change(b, meta, f"model_meta {side} {io['name']!r}: dtype float32 -> {io['dtype']}")
    elif kind == 5:
        new = rng.choice(("", io["name"] + "_", io["name"].upper(), "x" * 300, "é", meta["inputs"][0]["name"]))
        old, io["name"] = io["name"], new
        return _meta_change(b, meta, f"model_meta {side}: name {old!r} -> {new!r}")
    elif kind == 6:
        meta[side] = meta[side] * 2 if rng.random() < 0.5 else []
        return _meta_change(b, meta, f"model_meta {side}: {len(meta[side])} entries instead of {len(b.meta[side])}")
    else:
        io["size"] = rng.choice((0, 1, io["size"] * 2))
        return _meta_change(b, meta, f"model_meta {side} {io['name']!r}: size -> {io['size']}")
    old, io["shape"] = io["shape"], shape
    return _meta_change(b, meta, f"model_meta {side} {io['name']!r}: shape {old} -> {shape}")


def _kernels_edit(rng, b: Base):
    meta = copy.deepcopy(b.meta)
    kind = rng.randrange(5)
    ks = meta["kernels"]
    if kind == 0 and len(ks) > 1:
        i, j = rng.sample(range(len(ks)), 2)
        ks[i], ks[j] = ks[j], ks[i]
        return _meta_change(b, meta, f"model_meta kernels {i} and {j} swapped")
    if kind == 1:
        gone = ks.pop(rng.randrange(len(ks)))
        return _meta_change(b, meta, f"model_meta kernels: {gone} left out")
    if kind == 2:
        ks.append(rng.choice(ks))
        return _meta_change(b, meta, f"model_meta kernels: {ks[-1]} listed twice")
    if kind == 3:
        i = rng.randrange(len(ks))
        ks[i] = rng.choice((b.constants, b.library, zipkit.MANIFEST, b.meta_name))
        return _meta_change(b, meta, f"model_meta kernels[{i}] -> {ks[i]}")
    meta["library"] = rng.choice(b.kernels + [b.constants, zipkit.MANIFEST, b.meta_name])
    return _meta_change(b, meta, f"model_meta library -> {meta['library']}")


def repacks(rng, b: Base):
    kind = rng.randrange(9)
    if kind <= 1:   # a truncated ELF with a matching digest
        e = b.pick(rng, rng.choice(("library", "kernel", "kernel")))
        new, desc = common.elf_truncate(rng, e.payload)
        return f"{e.name}: {desc}; size, CRC and digests recomputed", b.repack({e.name: new})
    if kind == 2:   # ELF structure edits with a matching digest
        e = b.pick(rng, rng.choice(("library", "kernel")))
        new, desc = common.elf_structure_edit(rng, e.payload)
        return f"{e.name}: {desc}; CRC and digests recomputed", b.repack({e.name: new})
    if kind == 3:   # the constants blob of the wrong size
        old = b.by_name[b.constants].payload
        size = rng.choice((0, 1, 64, len(old) // 2, len(old) - 64, len(old) - 4, len(old) + 64))
        new = old[:size] + bytes(max(0, size - len(old)))
        return f"constants_0 is {size} bytes (compiled: {len(old)}); size, CRC and digests recomputed", b.repack(
            {b.constants: new})
    if kind in (4, 5):
        return _io_edit(rng, b)
    if kind == 6:
        return _kernels_edit(rng, b)
    if kind == 7:   # two kernels' bytes swapped, or a kernel from another model
        a = b.pick(rng, "kernel")
        if rng.random() < 0.5 and len(b.kernels) > 1:
            c = b.by_name[rng.choice([k for k in b.kernels if k != a.name])]
            return f"{a.name} and {c.name} swap bytes; digests recomputed", b.repack(
                {a.name: c.payload, c.name: a.payload})
        o = rng.choice(b.others)
        donor = o.by_name[rng.choice(o.kernels)]
        return f"{a.name} holds {o.name}'s {donor.name}; digest recomputed", b.repack({a.name: donor.payload})
    o = rng.choice(b.others)   # another model's library under this model's name
    return f"the model library is {o.name}'s; digest recomputed", b.repack({b.library: o.by_name[o.library].payload})


# ---- manifest and model_meta garbage ---------------------------------------------------------------
def _nested(depth: int, leaf=0):
    text = "[" * depth + json.dumps(leaf) + "]" * depth
    return text


def _garbage_value(rng):
    return rng.choice((0, -1, 1.5, True, None, "", "x", [], {}, [[]], [None], {"a": None}, 2 ** 64, -(2 ** 63),
                       1e308, "\u0000", "9" * 50, ["2"], {"name": []}))


_RAW_VALUES = ("1e400", "-1e400", "NaN", "Infinity", "-Infinity", "9" * 5000, "-0", "1" * 20, "\"\\ud800\"",
               "\"\\u0000\"", "1.0e-400")


def _path_garbage(rng, doc: dict, paths) -> tuple[str, dict | str]:
    """Sets one key (a path into the document) to a garbage value; or splices in raw JSON text."""
    path = rng.choice(paths)
    doc = copy.deepcopy(doc)
    node = doc
    for k in path[:-1]:
        node = node[k]
    key = path[-1]
    if rng.random() < 0.25:
        marker = "\"@@RAW@@\""
        node[key] = "@@RAW@@"
        raw = rng.choice(_RAW_VALUES + (_nested(rng.choice((100, 1000, 5000, 100000))),))
        text = zipkit.json_bytes(doc).decode().replace(marker, raw)
        return f"{'.'.join(map(str, path))} = {raw[:40]}{'...' if len(raw) > 40 else ''}", text
    value = _garbage_value(rng)
    node[key] = value
    return f"{'.'.join(map(str, path))} = {json.dumps(value)[:60]}", doc


def _paths(doc, prefix=(), depth=0):
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append(prefix + (k,))
            if depth < 3:
                out += _paths(v, prefix + (k,), depth + 1)
    elif isinstance(doc, list) and doc:
        out.append(prefix + (0,))
        if depth < 3:
            out += _paths(doc[0], prefix + (0,), depth + 1)
    return out


# the cases issue 12 names, and their kin: (path, value), drawn in a third of the garbage cases
_NAMED_MANIFEST = [
    (("target",), 0), (("entries", 0, "name"), []), (("entries",), 0), (("entries",), {}), (("entries", 0), 0),
    (("entries", 0, "size"), -1), (("entries", 0, "size"), "12"), (("entries", 0, "sha256"), 0),
    (("entries", 0, "size"), 2 ** 70), (("models",), [0]), (("models", 0, "meta"), 0),
    (("models", 0, "meta"), "manifest.json"), (("models", 0, "meta"), "data/constants/constants_0"),
    (("models", 0, "meta"), "../../etc/passwd"), (("abi_version",), "2"), (("abi_version",), 2.0),
    (("format_version",), 1), (("compatibility",), 0), (("compatibility", "required_executor_version"), []),
    (("so_in_om_info",), 0), (("so_in_om_info", "cpu_info"), []), (("target", "isa_features"), "avx2"),
    (("target", "arch"), 0), (("target", "isa_features"), [0]), (("model_num",), 2 ** 64), (("options",), None),
]
_NAMED_META = [
    (("inputs", 0, "shape"), [2 ** 62, 2 ** 62]), (("inputs", 0, "shape"), [True, 3]), (("inputs", 0, "shape"), []),
    (("inputs", 0, "shape"), [1e3]), (("outputs", 0, "shape"), [-1]), (("outputs", 0, "shape"), [2 ** 31, 2 ** 31]),
    (("inputs",), {}), (("kernels",), [0]), (("library",), 0), (("custom_ops",), 0),
    (("custom_ops", "shared_libs"), ["../x.so"]), (("so_bins",), {"store": "manifest.json"}),
    (("inputs", 0, "dtype"), "float33"), (("inputs", 0, "name"), 0), (("outputs",), [None]),
]


def _named(rng, doc: dict, named) -> tuple[str, dict]:
    path, value = rng.choice(named)
    doc = copy.deepcopy(doc)
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return f"{'.'.join(map(str, path))} = {json.dumps(value)[:60]}", doc


def manifest_garbage(rng, b: Base):
    if rng.random() < 0.33:
        desc, doc = _named(rng, b.manifest, _NAMED_MANIFEST)
        return f"manifest {desc}", b.repack(manifest=doc)
    kind = rng.random()
    if kind < 0.12:
        text = rng.choice(("", "[]", "null", "0", "\"om2\"", "{", "{}", "\ufeff" + zipkit.json_bytes(b.manifest).decode(),
                           _nested(rng.choice((1000, 5000, 50000))), "{\"format\": \"om2\"}"))
        return f"manifest.json is {text[:30]!r}{'...' if len(text) > 30 else ''}", b.repack(manifest=text.encode())
    if kind < 0.18:
        raw = zipkit.json_bytes(b.manifest)
        enc = rng.choice(("utf-16", "utf-32", "latin-1 bytes"))
        data = raw.decode().encode(enc) if enc != "latin-1 bytes" else raw.replace(b"\"om2\"", b"\"om\xe9\"")
        return f"manifest.json encoded as {enc}", b.repack(manifest=data)
    desc, doc = _path_garbage(rng, b.manifest, _paths(b.manifest))
    return f"manifest {desc}", b.repack(manifest=doc if isinstance(doc, dict) else doc.encode())


def meta_garbage(rng, b: Base):
    if rng.random() < 0.33:
        desc, doc = _named(rng, b.meta, _NAMED_META)
        return f"model_meta {desc}; digest recomputed", b.repack({b.meta_name: zipkit.json_bytes(doc)})
    if rng.random() < 0.1:
        text = rng.choice(("", "[]", "null", "{}", _nested(rng.choice((1000, 5000, 50000))), "{\"inputs\": []}"))
        return f"model_meta.json is {text[:30]!r}; digest recomputed", b.repack({b.meta_name: text.encode()})
    desc, doc = _path_garbage(rng, b.meta, _paths(b.meta))
    data = zipkit.json_bytes(doc) if isinstance(doc, dict) else doc.encode()
    return f"model_meta {desc}; digest recomputed", b.repack({b.meta_name: data})


# ---- entries that inflate far beyond what they should ---------------------------------------------
def deflate_bombs(rng, b: Base):
    size = rng.choice(BOMB_SIZES)
    target = rng.choice(("meta", "meta", "manifest", "kernel", "library", "constants"))
    e = b.pick(rng, target)
    json_entry = target in ("meta", "manifest")
    suffix = e.payload if json_entry else b""
    stream, digests, crc = zipkit.bomb(size, b" " if json_entry else b"\0", suffix)
    total = len(suffix) + size
    honest = rng.random() < 0.7   # the directory declares the inflated size (else: the original size)
    items = zipkit.items_of(b.entries)
    m = copy.deepcopy(b.manifest)
    for rec in m["entries"]:
        if rec["name"] == e.name and honest:
            rec.update(size=total, compression="deflate", **{k: v for k, v in digests.items() if k in rec})
    for it in items:
        if it.name == zipkit.MANIFEST and e.name != zipkit.MANIFEST:
            it.payload = zipkit.json_bytes(m)
        if it.name == e.name:
            it.method, it.align, it.raw = 8, False, stream
            it.crc, it.usize = (crc, total) if honest else (None, len(e.payload))
            it.payload = e.payload
    declared = f"declared {total} bytes, manifest and CRC match" if honest else \
        f"declared {len(e.payload)} bytes (its real size)"
    return f"{e.name} DEFLATEd, inflates to {total >> 20} MiB ({len(stream)} bytes stored; {declared})", \
        zipkit.build(items)


FAMILIES = {   # name: (weight, function)
    "om2 byte flips: anywhere": (3, flips_anywhere),
    "om2 byte flips: manifest.json": (2, _entry_flip("manifest")),
    "om2 byte flips: model_meta.json": (2, _entry_flip("meta")),
    "om2 byte flips: constants_0": (2, _entry_flip("constants")),
    "om2 byte flips: model library": (2, _entry_flip("library")),
    "om2 byte flips: kernels": (2, _entry_flip("kernel")),
    "om2 byte flips: deflated entries": (1, _entry_flip("other")),
    "om2 byte flips: ZIP headers": (2, flips_zip_headers),
    "om2 truncations": (2, truncations),
    "om2 ZIP edits, digests kept": (3, zip_edits),
    "om2 repacks, digests recomputed": (4, repacks),
    "om2 manifest garbage": (3, manifest_garbage),
    "om2 model_meta garbage": (2, meta_garbage),
    "om2 deflate bombs": (1, deflate_bombs),
}
