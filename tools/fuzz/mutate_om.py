"""Mutants of a classic .om file. Every family is a function (rng, Base) -> (description, bytes).

A classic OM carries no digests of its partitions (only of SO_BINS items), so every change here is
one a loader should refuse (by a digest om2gen records, or by checking the tasks against the model's
own shapes and buffers): edits of MODEL_DEF and TASK_INFO are re-serialized and the container
rebuilt with correct sizes, so they look like a file a tool wrote."""
from __future__ import annotations

import dataclasses
import hashlib
import struct

from om2gen.formats.om import container, kernel_store
from om2gen.formats.om import layout as L
from om2gen.formats.om import proto
from om2gen.formats.om.layout import ModelPartitionType as PT

from . import common
from .common import flip_in


@dataclasses.dataclass
class Base:
    name: str
    data: bytes
    others: list

    def __post_init__(self):
        self.om = container.read_om(self.data)
        num, = struct.unpack_from("<I", self.data, L.HEADER_SIZE)
        table_end = L.HEADER_SIZE + L.table_size(num)
        self.table = (L.HEADER_SIZE, table_end)
        self.spans = {}
        for i in range(num):
            ptype, off, size = struct.unpack_from(L.TABLE_ENTRY_FORMAT, self.data,
                                                  L.HEADER_SIZE + L.TABLE_HEAD_SIZE + i * L.TABLE_ENTRY_SIZE)
            self.spans[PT(ptype)] = (table_end + off, table_end + off + size)
        self.kernels = kernel_store.load(self.om.partition(PT.TBE_KERNELS))
        self.md = proto.ModelDef.FromString(bytes(self.om.partition(PT.MODEL_DEF)))
        self.mtd = proto.ModelTaskDef.FromString(bytes(self.om.partition(PT.TASK_INFO)))

    def rebuild(self, changes: dict | None = None, order=None, redigest: bool = False) -> bytes:
        """The OM with partitions replaced ({type: bytes, or None to leave it out}), sizes recomputed.
        redigest: the partition digests MODEL_DEF records (om2gen's `_om2gen_partition_*` attrs,
        "NAME:hex" strings) are recomputed for the new partitions, so the file looks genuine."""
        changes = dict(changes or {})
        if redigest:
            changes[PT.MODEL_DEF] = _redigested(changes.get(PT.MODEL_DEF, bytes(self.om.partition(PT.MODEL_DEF))),
                                                {p.type: changes.get(p.type, p.data) for p in self.om.partitions}
                                                | {t: d for t, d in changes.items()})
        parts = []
        for p in self.om.partitions:
            data = changes.get(p.type, p.data)
            if data is not None:
                parts.append(container.Partition(p.type, bytes(data)))
        for ptype, data in changes.items():
            if data is not None and all(p.type != ptype for p in parts):
                parts.append(container.Partition(ptype, data))
        if order:
            parts = order(parts)
        return container.write_om(None, parts, header=self.om.header)

    def with_model_def(self, md) -> bytes:
        return self.rebuild({PT.MODEL_DEF: md.SerializeToString(deterministic=True)})

    def with_task_def(self, mtd) -> bytes:
        return self.rebuild({PT.TASK_INFO: mtd.SerializeToString(deterministic=True)})

    def kernel_tasks(self):
        return [i for i, t in enumerate(self.mtd.task) if t.type == 0]


def _redigested(model_def: bytes, partitions: dict) -> bytes:
    md = proto.ModelDef.FromString(bytes(model_def))
    for name, attr in md.attr.items():
        if not name.startswith("_om2gen_partition_") or attr.WhichOneof("value") != "list":
            continue
        algo = name.rsplit("_", 1)[1]
        values = []
        for entry in attr.list.s:
            pname = entry.decode("ascii", "replace").split(":", 1)[0]
            data = partitions.get(PT[pname]) if pname in PT.__members__ else None
            h = _hasher(algo)
            h.update(bytes(data or b""))
            values.append(f"{pname}:{h.hexdigest()}".encode())
        del attr.list.s[:]
        attr.list.s.extend(values)
    return md.SerializeToString(deterministic=True)


def _hasher(algo: str):
    if algo == "blake3":
        import blake3
        return blake3.blake3()
    return hashlib.new(algo)


def _partition_flip(ptype):
    def family(rng, b: Base):
        if ptype not in b.spans:
            ptype2 = rng.choice(list(b.spans))
        else:
            ptype2 = ptype
        start, end = b.spans[ptype2]
        if ptype2 == PT.TBE_KERNELS and rng.random() < 0.3:   # an item head (magic, lengths, name)
            off, heads = start, []
            for name, binary in b.kernels:
                heads.append((off, off + 12 + len(name.encode())))
                off += 12 + len(name.encode()) + len(binary)
            start, end = rng.choice(heads)
            return flip_in(rng, b.data, start, end, "TBE_KERNELS item head")
        return flip_in(rng, b.data, start, end, ptype2.name)
    return family


def flips_anywhere(rng, b: Base):
    data, desc = common.flip(rng, b.data, 0, len(b.data), rng.choice((1, 2, 4, 8)))
    return f"anywhere: {desc}", data


def flips_header(rng, b: Base):
    if rng.random() < 0.5:
        return flip_in(rng, b.data, 0, L.HEADER_SIZE, "file header")
    return flip_in(rng, b.data, *b.table, "partition table")


def truncations(rng, b: Base):
    start, end = rng.choice(list(b.spans.values()))
    size = rng.choice((rng.randrange(len(b.data)), start, end - 1, (start + end) // 2, L.HEADER_SIZE, 255, 4, 0,
                       len(b.data) - 1))
    return f"truncated to {size} of {len(b.data)} bytes", b.data[:size]


# ---- the container, rebuilt -------------------------------------------------------------------------
def container_edits(rng, b: Base):
    kind = rng.randrange(10)
    if kind == 0:
        gone = rng.choice([p.type for p in b.om.partitions])
        return f"partition {gone.name} left out", b.rebuild({gone: None})
    if kind == 1:
        w = bytes(b.om.partition(PT.WEIGHTS_DATA))
        size = rng.choice((1, 8, 64, len(w) // 2, len(w) - 4, len(w) + 64))
        return f"WEIGHTS_DATA is {size} bytes (compiled: {len(w)})", b.rebuild(
            {PT.WEIGHTS_DATA: (w + bytes(64))[:size]})
    if kind in (2, 3, 4):
        ks = [list(k) for k in b.kernels]
        i = rng.randrange(len(ks))
        edit = rng.randrange(6)
        if edit == 0:
            ks[i][1], desc = common.elf_truncate(rng, ks[i][1])
        elif edit == 1:
            ks[i][1], desc = common.elf_structure_edit(rng, ks[i][1])
        elif edit == 2 and len(ks) > 1:
            j = rng.choice([x for x in range(len(ks)) if x != i])
            ks[i][1], ks[j][1] = ks[j][1], ks[i][1]
            desc = f"binary swapped with {ks[j][0]}"
        elif edit == 3:
            o = rng.choice(b.others)
            name, donor = rng.choice(o.kernels)
            ks[i][1], desc = donor, f"binary replaced by {o.name}'s {name}"
        elif edit == 4:
            ks.pop(i)
            return f"TBE_KERNELS: {b.kernels[i][0]} left out", b.rebuild({PT.TBE_KERNELS: store(ks)})
        else:
            ks[i][1], desc = ks[i][1][:64] + b"\0" * (len(ks[i][1]) - 64), "all but the ELF header zeroed"
        return f"TBE_KERNELS {ks[i][0]}: {desc}", b.rebuild({PT.TBE_KERNELS: store(ks)})
    if kind == 5:   # raw partition-table edits
        d = bytearray(b.data)
        i = rng.randrange(len(b.spans))
        at = L.HEADER_SIZE + L.TABLE_HEAD_SIZE + i * L.TABLE_ENTRY_SIZE
        field, off, code = rng.choice((("type", 0, "I"), ("mem_offset", 8, "Q"), ("mem_size", 16, "Q"),
                                       ("partition count", -L.TABLE_HEAD_SIZE - i * L.TABLE_ENTRY_SIZE, "I")))
        old = struct.unpack_from("<" + code, d, at + off)[0]
        new = rng.choice((old + 1, old - 1, 0, old + 8, 1 << 32, (1 << 63) - 1, 5, 26, 12)) & ((1 << 64) - 1)
        new &= (1 << (8 * struct.calcsize(code))) - 1
        struct.pack_into("<" + code, d, at + off, new)
        return f"partition table entry {i}: {field} {old} -> {new}", bytes(d)
    if kind == 6:   # header fields
        d = bytearray(b.data)
        name, off, code = rng.choice([f for f in L.HEADER_FIELDS if not f[2].endswith("s") or f[0] == "name"])
        if code.endswith("s"):
            d[off:off + 32] = bytes(rng.randrange(1, 256) for _ in range(32))
            return "header name: 32 bytes without a NUL", bytes(d)
        old = struct.unpack_from("<" + code, d, off)[0]
        new = rng.choice((old + 1, old - 1, 0, 1, 2, 3, 0xFF, old * 2)) & ((1 << (8 * struct.calcsize(code))) - 1)
        struct.pack_into("<" + code, d, off, new)
        return f"header {name} {old} -> {new}", bytes(d)
    if kind == 7:
        return "partitions in reverse order", b.rebuild(order=lambda ps: ps[::-1])
    if kind == 8:
        ptype = rng.choice((PT.SO_BINS, PT.CUSTOM_OPS, PT.CUST_AICPU_KERNELS, PT.MODEL_INOUT_INFO, PT.TILING_DATA))
        junk = rng.choice((b"\0" * 8, bytes(rng.randrange(256) for _ in range(64)), struct.pack("<I", 1) + b"\xfd\x6e\x77\x5d"
                           + bytes(12)))
        held = any(p.type == ptype for p in b.om.partitions)   # MODEL_INOUT_INFO: every om2gen .om has one
        what = f"{'the' if held else 'an extra'} {ptype.name} partition"
        return f"{what} as {len(junk)} junk bytes", b.rebuild({ptype: junk})
    o = rng.choice(b.others)
    ptype = rng.choice((PT.WEIGHTS_DATA, PT.TBE_KERNELS, PT.TASK_INFO, PT.MODEL_DEF))
    return f"{ptype.name} taken from {o.name}", b.rebuild({ptype: bytes(o.om.partition(ptype))})


def store(ks) -> bytes:
    """A TBE_KERNELS payload of (name, binary) pairs, in the given order."""
    out = b""
    for name, binary in ks:
        raw = name.encode()
        out += struct.pack("<III", kernel_store.KERNEL_ITEM_MAGIC, len(raw), len(binary)) + raw + binary
    return out


# ---- MODEL_DEF edits ---------------------------------------------------------------------------------
_ATTRS = ("memory_size", "task_gen_base_addr", "task_gen_weight_addr", "weight_size", "label_num", "soc_version",
          "zero_copy_memory_size", "host_env_cpu", "opp_version", "stream_num")


def model_def_edits(rng, b: Base):
    md = proto.ModelDef()
    md.CopyFrom(b.md)
    g = md.graph[0]
    data_ops = [op for op in g.op if op.type == "Data"]
    net = [op for op in g.op if op.type == "NetOutput"][0]
    kind = rng.randrange(8)
    if kind <= 1:   # an input or output description
        op, desc = (rng.choice(data_ops), "output_desc") if rng.random() < 0.5 else (net, "input_desc")
        td = getattr(op, desc)[0]
        dims = list(td.shape.dim)
        edit = rng.randrange(4)
        if edit == 0:
            i = rng.randrange(len(dims))
            dims[i] = rng.choice((dims[i] * 2, max(dims[i] // 2, 1), 0, -1, 1 << 40, 1 << 62))
        elif edit == 1:
            dims = dims[::-1] + [1]
        elif edit == 2:
            td.dtype = rng.choice((2, 3, 4, 7, 8, 11, 12, 13, 99))   # ge.proto DataType numbers
            return f"{op.name} {desc} dtype -> {td.dtype}", b.with_model_def(md)
        else:
            dims = dims[:-1]
        old = list(td.shape.dim)
        del td.shape.dim[:]
        td.shape.dim.extend(dims)
        return f"{op.name} {desc} shape {old} -> {dims}", b.with_model_def(md)
    if kind == 2:   # an I/O address
        op, field = (rng.choice(data_ops), "output_i") if rng.random() < 0.5 else (net, "input_i")
        addrs = getattr(op, field)
        old = addrs[0]
        addrs[0] = rng.choice((old + 4, old - 512, old + 512, 0, old + (1 << 30), old + 0xFFF_FFFF_FFFF))
        if field == "output_i" and op.input_i:
            op.input_i[0] = addrs[0]
        return f"{op.name} {field}[0] {old:#x} -> {addrs[0]:#x}", b.with_model_def(md)
    if kind in (3, 4):   # a model attribute
        name = rng.choice([a for a in _ATTRS if a in md.attr])
        a = md.attr[name]
        if a.WhichOneof("value") == "i":
            old = a.i
            a.i = rng.choice((0, 1, old // 2, old - 64, old + 64, old * 2, (1 << 63) - 1, -1, -(1 << 63)))
            return f"MODEL_DEF attr {name} {old} -> {a.i}", b.with_model_def(md)
        old = a.s
        a.s = rng.choice((b"", b"x86_64-avx9", b"aarch64", old + b"\0", old[::-1], b"\xff\xfe"))
        return f"MODEL_DEF attr {name} {old!r} -> {a.s!r}", b.with_model_def(md)
    if kind == 5:   # an attribute of the wrong kind
        name = rng.choice([a for a in _ATTRS if a in md.attr])
        a = md.attr[name]
        if a.WhichOneof("value") == "i":
            a.s = b"12"
        else:
            a.i = 7
        return f"MODEL_DEF attr {name} of another kind ({a.WhichOneof('value')})", b.with_model_def(md)
    if kind == 6:   # ops
        i = rng.randrange(len(g.op))
        edit = rng.randrange(3)
        if edit == 0:
            name = g.op[i].name
            del g.op[i]
            return f"op {i} ({name}) deleted", b.with_model_def(md)
        if edit == 1:
            g.op.add().CopyFrom(g.op[i])
            return f"op {i} ({g.op[i].name}) duplicated at the end", b.with_model_def(md)
        switches = [op for op in g.op if "_label_switch_list" in op.attr]
        if switches:
            lst = switches[0].attr["_label_switch_list"].list.i
            old = list(lst)
            new = rng.choice(([], [0, 0], [lst[0], 1 << 20], [lst[-1], lst[0]], [-1, lst[0]], old * 3))
            del lst[:]
            lst.extend(new)
            return f"op {switches[0].name} _label_switch_list {old} -> {new}", b.with_model_def(md)
        op = data_ops[0]
        op.attr["index"].i = rng.choice((1, -1, 1 << 31))
        return f"Data op {op.name} index -> {op.attr['index'].i}", b.with_model_def(md)
    if rng.random() < 0.5:
        md.graph.add().CopyFrom(g)
        return "MODEL_DEF holds the graph twice", b.with_model_def(md)
    del md.graph[:]
    return "MODEL_DEF holds no graph", b.with_model_def(md)


# ---- TASK_INFO edits ---------------------------------------------------------------------------------
_ODD_WORDS = (0, 1, 2, -1, 268435457, 1 << 31, (1 << 31) - 1, 1 << 40, (1 << 63) - 1, -(1 << 63))


def task_def_edits(rng, b: Base):
    mtd = proto.ModelTaskDef()
    mtd.CopyFrom(b.mtd)
    tasks = mtd.task
    ki = rng.choice(b.kernel_tasks())
    t = tasks[ki]
    k = t.kernel
    n = k.context.args_count
    words = (len(k.args) - 8 * n) // 8
    kind = rng.randrange(12)
    where = f"task {ki} ({k.kernel_name})"
    if kind == 0:
        old = n
        k.context.args_count = rng.choice((n - 1, 1, 0, n + 1, n + words, 1 << 20, (1 << 32) - 1))
        return f"{where}: args_count {old} -> {k.context.args_count}", b.with_task_def(mtd)
    if kind in (1, 2) and words:   # a tiling word
        w = rng.randrange(words)
        at = 8 * (n + w)
        old, = struct.unpack_from("<q", k.args, at)
        new = rng.choice(_ODD_WORDS + (old + 1, old - 1, old * 2, old // 2, old * 1000))
        args = bytearray(k.args)
        struct.pack_into("<q", args, at, max(min(new, (1 << 63) - 1), -(1 << 63)))
        k.args = bytes(args)
        return f"{where}: tiling word {w} {old} -> {new}", b.with_task_def(mtd)
    if kind == 3:   # an address slot
        s = rng.randrange(n)
        old, = struct.unpack_from("<Q", k.args, 8 * s)
        others = [struct.unpack_from("<Q", tasks[j].kernel.args, 0)[0] for j in b.kernel_tasks()]
        new = rng.choice((old + 4, old + 8, old - 8, old + 512, old + 4096, 0, (1 << 64) - 1, rng.choice(others),
                          b.md.attr["task_gen_weight_addr"].i if "task_gen_weight_addr" in b.md.attr else 0))
        args = bytearray(k.args)
        struct.pack_into("<Q", args, 8 * s, new & ((1 << 64) - 1))
        k.args = bytes(args)
        return f"{where}: address slot {s} {old:#x} -> {new & ((1 << 64) - 1):#x}", b.with_task_def(mtd)
    if kind == 4:
        victim = rng.choice((len(tasks) - 1, len(tasks) - 1, rng.randrange(len(tasks))))
        del tasks[victim]
        return f"task {victim} of {len(b.mtd.task)} deleted", b.with_task_def(mtd)
    if kind == 5:
        edit = rng.randrange(4)
        if edit == 0:
            tasks.add().CopyFrom(tasks[ki])
            return f"{where} duplicated at the end", b.with_task_def(mtd)
        if edit == 1 and len(tasks) > 1:
            i = rng.randrange(len(tasks) - 1)
            a, c = proto.TaskDef(), proto.TaskDef()
            a.CopyFrom(tasks[i])
            c.CopyFrom(tasks[i + 1])
            tasks[i].CopyFrom(c)
            tasks[i + 1].CopyFrom(a)
            return f"tasks {i} and {i + 1} swapped", b.with_task_def(mtd)
        if edit == 2:
            del tasks[:]
            return "no tasks", b.with_task_def(mtd)
        tasks.add().CopyFrom(tasks[0])
        return "task 0 repeated at the end", b.with_task_def(mtd)
    if kind == 6:
        old = k.block_dim
        k.block_dim = rng.choice((0, 2, 7, 64, 65535, 65536, (1 << 32) - 1))
        return f"{where}: block_dim {old} -> {k.block_dim}", b.with_task_def(mtd)
    if kind == 7:
        names = [x for x, _ in b.kernels if x != k.kernel_name] or ["x"]
        old = k.kernel_name
        k.kernel_name = rng.choice(names + ["", old + "_", "../" + old])
        return f"task {ki}: kernel_name {old} -> {k.kernel_name}", b.with_task_def(mtd)
    if kind == 8:
        old = k.context.op_index
        k.context.op_index = rng.choice((0, old + 1, old - 1, len(b.md.graph[0].op) - 1, len(b.md.graph[0].op),
                                         (1 << 32) - 1))
        return f"{where}: op_index {old} -> {k.context.op_index}", b.with_task_def(mtd)
    if kind == 9:
        old = t.type
        t.type = rng.choice((1, 9, 12, 13, 23, 24, 50, 9999))
        return f"task {ki}: type {old} -> {t.type}", b.with_task_def(mtd)
    if kind == 10:
        edit = rng.randrange(4)
        if edit == 0:
            old = k.args_size
            k.args_size = rng.choice((old - 8, old + 8, 0))
            return f"{where}: args_size {old} -> {k.args_size}", b.with_task_def(mtd)
        if edit == 1:
            cut = rng.choice((8 * n, 8 * n - 8, len(k.args) - 8))
            k.args, k.args_size = k.args[:cut], cut
            return f"{where}: args cut to {cut} bytes (args_size too)", b.with_task_def(mtd)
        if edit == 2:
            old = k.context.args_format
            k.context.args_format = rng.choice(("", old[::-1], "{o}" * n, "{i}" * n, "{ws}" * n + "{t}"))
            return f"{where}: args_format {old} -> {k.context.args_format}", b.with_task_def(mtd)
        k.args += struct.pack("<q", rng.choice(_ODD_WORDS))
        k.args_size = len(k.args)
        return f"{where}: one more tiling word", b.with_task_def(mtd)
    labels = [i for i, x in enumerate(tasks) if x.type in (9, 12, 23, 24)]
    if labels:   # a label task
        i = rng.choice(labels)
        x = tasks[i]
        body = {9: x.label_set, 24: x.label_goto_ex, 23: x.label_switch_by_index, 12: x.label_goto_ex}[x.type]
        field = "label_max" if x.type == 23 else rng.choice(("label_id", "op_index"))
        old = getattr(body, field)
        setattr(body, field, rng.choice((0, 1, old + 1, max(old - 1, 0), 7, 1 << 20, (1 << 32) - 1)))
        return f"label task {i} (type {x.type}): {field} {old} -> {getattr(body, field)}", b.with_task_def(mtd)
    field = rng.choice(("memory_size", "weight_size", "base_addr", "weight_addr"))
    old = getattr(mtd, field)
    setattr(mtd, field, rng.choice((0, old + 64, old // 2, (1 << 64) - 1)))
    return f"ModelTaskDef {field} {old} -> {getattr(mtd, field)}", b.with_task_def(mtd)


def repacks(rng, b: Base):
    """Edits a loader can catch by checking the tasks against the model's own shapes, buffers and
    kernels, with the partition digests MODEL_DEF records recomputed (the file looks genuine)."""
    mtd = proto.ModelTaskDef()
    mtd.CopyFrom(b.mtd)
    tasks = mtd.task
    ki = rng.choice(b.kernel_tasks())
    k = tasks[ki].kernel
    n = k.context.args_count
    words = (len(k.args) - 8 * n) // 8
    where = f"task {ki} ({k.kernel_name})"
    kind = rng.randrange(10)
    if kind == 0:
        old = n
        k.context.args_count = rng.choice((n - 1, max(n - 2, 0), 0, n + 1, 1 << 20))
        desc = f"{where}: args_count {old} -> {k.context.args_count}"
    elif kind == 1 and words:
        w = rng.randrange(words)
        new = rng.choice((268435457, 1 << 31, 1 << 40, (1 << 62), -1, -(1 << 63)))
        old, = struct.unpack_from("<q", k.args, 8 * (n + w))
        args = bytearray(k.args)
        struct.pack_into("<q", args, 8 * (n + w), new)
        k.args = bytes(args)
        desc = f"{where}: tiling word {w} {old} -> {new}"
    elif kind == 2:
        victim = len(tasks) - 1
        del tasks[victim]
        desc = f"the last task ({victim}) deleted"
    elif kind == 3:
        s_ = rng.randrange(n)
        old, = struct.unpack_from("<Q", k.args, 8 * s_)
        memory = b.md.attr["memory_size"].i if "memory_size" in b.md.attr else 0
        base = b.md.attr["task_gen_base_addr"].i if "task_gen_base_addr" in b.md.attr else 0
        new = rng.choice((0, (1 << 64) - 1, base + memory + 4096, base - 8, old + 1, old + 2, 1 << 63))
        args = bytearray(k.args)
        struct.pack_into("<Q", args, 8 * s_, new)
        k.args = bytes(args)
        desc = f"{where}: address slot {s_} {old:#x} -> {new:#x}"
    elif kind == 4:
        old = k.context.op_index
        k.context.op_index = rng.choice((len(b.md.graph[0].op), (1 << 32) - 1))
        desc = f"{where}: op_index {old} -> {k.context.op_index}"
    elif kind == 5:
        k.block_dim = rng.choice((65536, (1 << 32) - 1))
        desc = f"{where}: block_dim -> {k.block_dim}"
    elif kind == 6:
        tasks[ki].type = rng.choice((9999, 50, 1))
        desc = f"task {ki}: type -> {tasks[ki].type}"
    elif kind == 7:
        cut = rng.choice((8 * n - 8, 8 * n, len(k.args) - 8))
        k.args, k.args_size = k.args[:max(cut, 0)], max(cut, 0)
        desc = f"{where}: args cut to {max(cut, 0)} bytes (args_size too)"
    elif kind == 9:
        ks = [list(x) for x in b.kernels]
        i = rng.randrange(len(ks))
        ks[i][1], d = (common.elf_truncate if rng.random() < 0.5 else common.elf_structure_edit)(rng, ks[i][1])
        return f"TBE_KERNELS {ks[i][0]}: {d}; digests recomputed", b.rebuild({PT.TBE_KERNELS: store(ks)},
                                                                             redigest=True)
    else:
        labels = [i for i, x in enumerate(tasks) if x.type in (12, 23, 24)]
        if labels:
            i = rng.choice(labels)
            x = tasks[i]
            body = x.label_switch_by_index if x.type == 23 else x.label_goto_ex
            field = "label_max" if x.type == 23 else "label_id"
            old = getattr(body, field)
            setattr(body, field, rng.choice((0, old + 5, 1 << 20)))
            desc = f"label task {i}: {field} {old} -> {getattr(body, field)}"
        else:
            w = bytes(b.om.partition(PT.WEIGHTS_DATA))
            size = rng.choice((1, 64, len(w) // 2, len(w) - 4))
            return f"WEIGHTS_DATA is {size} bytes (compiled: {len(w)}); digests recomputed", b.rebuild(
                {PT.WEIGHTS_DATA: w[:size]}, redigest=True)
    return f"{desc}; digests recomputed", b.rebuild({PT.TASK_INFO: mtd.SerializeToString(deterministic=True)},
                                                    redigest=True)


FAMILIES = {
    "om byte flips: anywhere": (3, flips_anywhere),
    "om byte flips: header + partition table": (2, flips_header),
    "om byte flips: MODEL_DEF": (2, _partition_flip(PT.MODEL_DEF)),
    "om byte flips: WEIGHTS_DATA": (2, _partition_flip(PT.WEIGHTS_DATA)),
    "om byte flips: TBE_KERNELS": (3, _partition_flip(PT.TBE_KERNELS)),
    "om byte flips: TASK_INFO": (2, _partition_flip(PT.TASK_INFO)),
    "om truncations": (2, truncations),
    "om container edits": (3, container_edits),
    "om MODEL_DEF edits": (3, model_def_edits),
    "om TASK_INFO edits": (5, task_def_edits),
    "om repacks, digests recomputed": (4, repacks),
}
