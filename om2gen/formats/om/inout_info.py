"""MODEL_INOUT_INFO (partition 8): GE's "model introduction", the model's inputs, outputs and gears
as TLV blocks, which GE reads without loading the model (model_introduction.cc writes it,
model_parser_base.cc reads it; GE_FACTS §1.8; docs/om-format.md, *MODEL_INOUT_INFO*).

What it says is what MODEL_DEF says: `describe` gives it for a Program (the compiler's, or the
one formats/om/reader.py reads back from MODEL_DEF), `build` lays it out, `parse` reads it back
and `check` compares a file's with MODEL_DEF's, naming the first field that differs. Parsing
accepts exactly the form `build` writes (blocks in type order, each once, none empty, every byte
accounted for), so a file whose blocks agree with MODEL_DEF holds the bytes om2gen writes for it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ...errors import ArchiveError
from ...ir import dtypes
from ...ir.gears import DYNAMIC_BATCH, DYNAMIC_DIMS, DYNAMIC_IMAGE, dynamic_output_dims
from ..om2.integrity import RECOMPILE
from .layout import FORMAT_ND, TENSOR_DESC_FORMAT, TENSOR_DESC_SIZE, TLV_HEAD_FORMAT, TLV_HEAD_SIZE
from .layout import ModelDescType as T


@dataclass(frozen=True)
class TensorInfo:
    """One ModelTensorDescBaseInfo and what follows it (GE's field names in comments)."""
    name: str
    size: int                               # size: the tensor's bytes
    format: int                             # format: ge::Format
    dt: int                                 # dt: ge::DataType
    dims: tuple[int, ...]                   # an input's dims are -1 where a gear decides
    dims_v2: tuple[int, ...]                # dimsV2: the dims after static AIPP, else the dims
    shape_range: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class InOutInfo:
    """The blocks of a MODEL_INOUT_INFO; an empty field is a block GE leaves out."""
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    dynamic_batch: tuple[int, ...] = ()
    dynamic_hw: tuple[tuple[int, ...], ...] = ()
    dynamic_dims: tuple[tuple[int, ...], ...] = ()
    dynamic_output_shape: tuple[str, ...] = ()
    data_name_order: tuple[str, ...] = ()


def describe(inputs, outputs, table, ranges=None) -> InOutInfo:
    """What GE's ModelIntroduction says of a model with these inputs and outputs (a Program's
    IoDescs) and gears (its GearTable, None for a static model), as MODEL_DEF holds it: each
    input (the root Data ops, the gear shape data last) with its dims, -1 where a gear decides
    (_mbatch_origin_input_dims); each output at its buffer's shape; a gear model's gear values by
    its type, its outputs' shapes per gear (_dynamic_output_dims) and the input order the values
    follow (user_designate_shape_order). Names are the inputs' and outputs' names. `ranges`: a
    dynamic-shape model's (formats/om/dynamic_shapes.py), ({input: [lo, hi] per dim}, {output: ...}),
    which its tensors carry (shape_range)."""
    origin = table.origin_dims if table is not None else {}
    in_ranges, out_ranges = ranges or ({}, {})

    def tensor(d, dims, rows=()) -> TensorInfo:
        dims = tuple(int(x) for x in dims)
        return TensorInfo(d.name, d.nbytes, FORMAT_ND, dtypes.BY_NAME[d.dtype].acl, dims, dims,
                          tuple(tuple(int(x) for x in r) for r in rows))

    inputs = tuple(tensor(d, origin.get(d.name, d.shape), in_ranges.get(i, ())) for i, d in enumerate(inputs))
    outputs = tuple(tensor(d, d.shape, out_ranges.get(j, ())) for j, d in enumerate(outputs))
    if table is None:
        return InOutInfo(inputs, outputs)
    values = tuple(tuple(int(x) for x in v) for v in table.values)
    kind = table.dynamic_type
    return InOutInfo(inputs, outputs,
                     dynamic_batch=tuple(v[0] for v in values) if kind == DYNAMIC_BATCH else (),
                     dynamic_hw=values if kind == DYNAMIC_IMAGE else (),
                     dynamic_dims=values if kind == DYNAMIC_DIMS else (),
                     dynamic_output_shape=tuple(dynamic_output_dims(table.output_shapes)),
                     data_name_order=tuple(table.order))


# ---------------------------------------------------------------------------------------------
# the value layouts (GE's ModelTensorDescsValue, vecIntValue, vecIntIntValue, vecStrValue)

def _pack_tensors(descs) -> bytes:
    out = [struct.pack("<I", len(descs))]
    for t in descs:
        name = t.name.encode("utf-8")
        out.append(struct.pack(TENSOR_DESC_FORMAT, t.size, t.format, t.dt, len(name), 8 * len(t.dims),
                               8 * len(t.dims_v2), 16 * len(t.shape_range)))
        out += [name, struct.pack(f"<{len(t.dims)}q", *t.dims), struct.pack(f"<{len(t.dims_v2)}q", *t.dims_v2),
                struct.pack(f"<{2 * len(t.shape_range)}q", *(x for r in t.shape_range for x in r))]
    return b"".join(out)


def _pack_ints(values) -> bytes:
    return struct.pack(f"<I{len(values)}Q", len(values), *values)


def _pack_int_lists(lists) -> bytes:
    return struct.pack(f"<I{len(lists)}I", len(lists), *map(len, lists)) + \
        b"".join(struct.pack(f"<{len(v)}Q", *v) for v in lists)


def _pack_strings(texts) -> bytes:
    raw = [s.encode("utf-8") for s in texts]
    return struct.pack(f"<I{len(raw)}I", len(raw), *map(len, raw)) + b"".join(raw)


def _fail(what: str):
    raise ArchiveError(f"{what}; the OM is corrupt or was modified: {RECOMPILE}")


class _Cursor:
    """Reads one block's value; every read is checked against the block's end first, so no
    count or length in the file makes anything allocate more than the block holds."""

    def __init__(self, data, start: int, end: int, block: str):
        self.data, self.pos, self.end, self.block = data, start, end, block

    def fail(self, what: str):
        _fail(f"MODEL_INOUT_INFO {self.block} block: {what}")

    def take(self, n: int, what: str) -> bytes:
        if n > self.end - self.pos:
            self.fail(f"{what} needs {n} bytes at offset {self.pos}, the block has {self.end - self.pos} left")
        self.pos += n
        return bytes(self.data[self.pos - n:self.pos])

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def array(self, code: str, n: int, what: str) -> tuple:
        return self.unpack(f"<{n}{code}", f"{what} ({n} values)")

    def text(self, n: int, what: str) -> str:
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
        self.fail(f"{what} is not UTF-8")

    def count(self, least: int) -> int:
        """The block's entry count, each entry at least `least` bytes."""
        (n,) = self.unpack("<I", "the entry count")
        if n == 0:
            self.fail("0 entries; GE leaves an empty block out")
        if n * least > self.end - self.pos:
            self.fail(f"{n} entries need at least {n * least} bytes, the block has {self.end - self.pos} left")
        return n


def _parse_tensors(c: _Cursor) -> tuple[TensorInfo, ...]:
    out = []
    for i in range(c.count(TENSOR_DESC_SIZE)):
        size, fmt, dt, name_len, dims_len, v2_len, range_len = c.unpack(TENSOR_DESC_FORMAT, f"tensor desc {i}")
        for field, n, unit in (("dims_len", dims_len, 8), ("dimsV2_len", v2_len, 8),
                               ("shape_range_len", range_len, 16)):
            if n % unit:
                c.fail(f"tensor desc {i}: {field} {n} is not a multiple of {unit}")
        name = c.text(name_len, f"tensor desc {i}'s name")
        dims = c.array("q", dims_len // 8, f"tensor desc {i} ({name!r})'s dims")
        dims_v2 = c.array("q", v2_len // 8, f"tensor desc {i} ({name!r})'s dimsV2")
        flat = c.array("q", range_len // 8, f"tensor desc {i} ({name!r})'s shape ranges")
        out.append(TensorInfo(name, size, fmt, dt, dims, dims_v2, tuple(zip(flat[::2], flat[1::2]))))
    return tuple(out)


def _parse_ints(c: _Cursor) -> tuple[int, ...]:
    return c.array("Q", c.count(8), "the values")


def _parse_int_lists(c: _Cursor) -> tuple[tuple[int, ...], ...]:
    sizes = c.array("I", c.count(4), "the part sizes")
    return tuple(c.array("Q", n, f"part {i}") for i, n in enumerate(sizes))


def _parse_strings(c: _Cursor) -> tuple[str, ...]:
    lengths = c.array("I", c.count(4), "the string lengths")
    return tuple(c.text(n, f"string {i}") for i, n in enumerate(lengths))


_TENSORS = (_pack_tensors, _parse_tensors)
_INTS = (_pack_ints, _parse_ints)
_INT_LISTS = (_pack_int_lists, _parse_int_lists)
_STRINGS = (_pack_strings, _parse_strings)
# the blocks in the order GE writes them: type, InOutInfo field, value layout
_BLOCKS = ((T.MODEL_INPUT_DESC, "inputs", _TENSORS), (T.MODEL_OUTPUT_DESC, "outputs", _TENSORS),
           (T.MODEL_DYNAMIC_BATCH, "dynamic_batch", _INTS), (T.MODEL_DYNAMIC_HW, "dynamic_hw", _INT_LISTS),
           (T.MODEL_DYNAMIC_DIMS, "dynamic_dims", _INT_LISTS),
           (T.MODEL_DYNAMIC_OUTPUT_SHAPE, "dynamic_output_shape", _STRINGS),
           (T.MODEL_DESIGNATE_SHAPE_ORDER, "data_name_order", _STRINGS))
_BY_TYPE = {t: (field, layout) for t, field, layout in _BLOCKS}
FIELDS = {field: t for t, field, _ in _BLOCKS}      # InOutInfo field -> its block's type
assert tuple(t for t, _, _ in _BLOCKS) == tuple(T)


def build(info: InOutInfo) -> bytes:
    """The partition's bytes: one TLV block per non-empty field, in type order (b"" if none)."""
    out = []
    for t, field, (pack, _) in _BLOCKS:
        value = getattr(info, field)
        if value:
            payload = pack(value)
            out += [struct.pack(TLV_HEAD_FORMAT, int(t), len(payload)), payload]
    return b"".join(out)


def parse(data) -> InOutInfo:
    """The blocks of a MODEL_INOUT_INFO partition. Anything but the form `build` writes is an
    ArchiveError naming the block and what is wrong with it."""
    fields, pos, last = {}, 0, None
    while pos < len(data):
        where = f"MODEL_INOUT_INFO at offset {pos}"
        if len(data) - pos < TLV_HEAD_SIZE:
            _fail(f"{where}: {len(data) - pos} bytes, too few for a block header ({TLV_HEAD_SIZE})")
        code, length = struct.unpack_from(TLV_HEAD_FORMAT, data, pos)
        if code not in T._value2member_map_:
            _fail(f"{where}: block type {code}, which GE's ModelDescType does not have "
                  f"({', '.join(f'{t.value} {t.name}' for t in T)})")
        t = T(code)
        if last is not None and t <= last:
            _fail(f"{where}: a {t.name} block after the {last.name} block; each comes once, in type order")
        start, end = pos + TLV_HEAD_SIZE, pos + TLV_HEAD_SIZE + length
        if end > len(data):
            _fail(f"{where}: the {t.name} block says {length} bytes, the partition has {len(data) - start} left")
        field, (_, read) = _BY_TYPE[t]
        c = _Cursor(data, start, end, t.name)
        fields[field] = read(c)
        if c.pos != end:
            c.fail(f"its entries end at offset {c.pos}, {end - c.pos} bytes before the block does")
        pos, last = end, t
    return InOutInfo(**fields)


# ---------------------------------------------------------------------------------------------
# agreement with MODEL_DEF

def _tensor_json(t: TensorInfo) -> dict:
    return {"name": t.name, "size": t.size, "format": t.format, "dt": t.dt, "dims": list(t.dims),
            "dimsV2": list(t.dims_v2), "shape_range": [list(r) for r in t.shape_range]}


def _shown(field: str, value):
    if field == "dt":
        d = dtypes.BY_ACL.get(value)
        return f"{value} ({d.name})" if d else value
    return repr(value) if isinstance(value, str) else value


def check(data, expected: InOutInfo) -> InOutInfo:
    """Parses a file's MODEL_INOUT_INFO and checks it says what MODEL_DEF says (`expected`, from
    `describe`); a difference is an ArchiveError naming the block, the tensor and the field."""
    info = parse(data)
    got, want = to_json(info), to_json(expected)
    for t, field, layout in _BLOCKS:
        have, should = got[field], want[field]
        if layout is not _TENSORS:
            if have != should:
                _fail(f"MODEL_INOUT_INFO {t.name} is {have or 'absent'}, MODEL_DEF says {should or 'absent'}")
            continue
        if len(have) != len(should):
            _fail(f"MODEL_INOUT_INFO describes {len(have)} model {field} "
                  f"({', '.join(repr(d['name']) for d in have) or 'none'}), MODEL_DEF has {len(should)} "
                  f"({', '.join(repr(d['name']) for d in should) or 'none'})")
        for i, (h, w) in enumerate(zip(have, should)):
            for key in w:
                if h[key] != w[key]:
                    _fail(f"MODEL_INOUT_INFO {field[:-1]} {i} ({w['name']!r}): {key} is {_shown(key, h[key])}, "
                          f"MODEL_DEF says {_shown(key, w[key])}")
    return info


def to_json(info: InOutInfo) -> dict:
    """Every block by its InOutInfo field (lists; [] for a block left out), tensors with GE's
    field names: what `om2gen inspect --json` shows."""
    out = {"inputs": [_tensor_json(t) for t in info.inputs], "outputs": [_tensor_json(t) for t in info.outputs]}
    for _, field, layout in _BLOCKS:
        if layout is not _TENSORS:
            out[field] = [list(v) if isinstance(v, tuple) else v for v in getattr(info, field)]
    return out
