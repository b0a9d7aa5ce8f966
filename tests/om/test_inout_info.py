"""MODEL_INOUT_INFO (om2gen.formats.om.inout_info; docs/om-format.md, *MODEL_INOUT_INFO*): GE's TLV
"model introduction" of the inputs, outputs and gears. Its byte layout against bytes spelled out
from GE_FACTS §1.8 and GE's ge_model_inout_types.h; what om2gen writes for a static and a gear
model against GE's rules applied to the MODEL_DEF; the reader's refusal of a partition that
disagrees with MODEL_DEF or does not parse, whatever its bytes."""
import random
import struct
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import refresh_om_digests

import om2gen
from om2gen.errors import ArchiveError
from om2gen.formats.om import inout_info, proto
from om2gen.formats.om.container import Partition, read_om, write_om
from om2gen.formats.om.inout_info import InOutInfo, TensorInfo
from om2gen.formats.om.inspect import inspect_om, render_text
from om2gen.formats.om.layout import ModelPartitionType as PT
from om2gen.ir import dtypes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import gear_models  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "cnn" / "model.onnx"

X = TensorInfo("x", 24, 2, 0, (-1, 3), (-1, 3))
FULL = InOutInfo(inputs=(X, TensorInfo("ids", 64, 2, 9, (1, 8), (1, 8), ((1, 1), (1, 16)))),
                 outputs=(TensorInfo("y", 40, 2, 0, (2, 5), (2, 5)),), dynamic_batch=(1, 2, 4),
                 dynamic_hw=((16, 16), (24, 32)), dynamic_dims=((8, 1), (16, 2)),
                 dynamic_output_shape=("0,0,1,10", "-1,1,2"), data_name_order=("x", "ids"))


# ---- byte layout ---------------------------------------------------------------------------------

def test_an_input_desc_block_is_laid_out_as_ge_writes_it():
    assert inout_info.build(InOutInfo(inputs=(X,))) == bytes.fromhex(
        "00000000" "45000000"            # type MODEL_INPUT_DESC, length 4 + 32 + 1 + 16 + 16 = 69
        "01000000"                       # one tensor desc
        "1800000000000000"               # size_t size 24
        "02000000" "00000000"            # Format FORMAT_ND, DataType DT_FLOAT
        "01000000" "10000000" "10000000" "00000000"  # name_len, dims_len, dimsV2_len, shape_range_len
        "78"                             # "x"
        "ffffffffffffffff" "0300000000000000"        # dims -1, 3
        "ffffffffffffffff" "0300000000000000")       # dimsV2


def test_the_gear_blocks_are_laid_out_as_ge_writes_them():
    assert inout_info.build(InOutInfo(dynamic_batch=(1, 2, 4))) == bytes.fromhex(
        "02000000" "1c000000" "03000000" "0100000000000000" "0200000000000000" "0400000000000000")
    assert inout_info.build(InOutInfo(dynamic_hw=((16, 16), (24, 32)))) == bytes.fromhex(
        "03000000" "2c000000" "02000000" "02000000" "02000000"   # 2 gears of 2 values each
        "1000000000000000" "1000000000000000" "1800000000000000" "2000000000000000")
    assert inout_info.build(InOutInfo(dynamic_dims=((8,), (16,)))) == bytes.fromhex(
        "04000000" "1c000000" "02000000" "01000000" "01000000" "0800000000000000" "1000000000000000")
    assert inout_info.build(InOutInfo(data_name_order=("x", "ids"))) == bytes.fromhex(
        "06000000" "10000000" "02000000" "01000000" "03000000" "78" "696473")
    assert inout_info.build(InOutInfo(dynamic_output_shape=("-1,0,2",))) == bytes.fromhex(
        "05000000" "0e000000" "01000000" "06000000") + b"-1,0,2"


def test_blocks_come_in_type_order_and_read_back():
    data = inout_info.build(FULL)
    types, pos = [], 0
    while pos < len(data):
        t, n = struct.unpack_from("<iI", data, pos)
        types.append(t)
        pos += 8 + n
    assert types == [0, 1, 2, 3, 4, 5, 6] and pos == len(data)
    assert inout_info.parse(data) == FULL
    assert inout_info.build(InOutInfo()) == b"" and inout_info.parse(b"") == InOutInfo()


# ---- hostile bytes ---------------------------------------------------------------------------------

def _block(t: int, value: bytes, length: int | None = None) -> bytes:
    return struct.pack("<iI", t, len(value) if length is None else length) + value


def _desc(name=b"x", dims=(1,), size=4, dims_len=None, v2_len=None, range_len=0) -> bytes:
    d = struct.pack(f"<{len(dims)}q", *dims)
    return struct.pack("<QiiIIII", size, 2, 0, len(name), len(d) if dims_len is None else dims_len,
                       len(d) if v2_len is None else v2_len, range_len) + name + d + d


HOSTILE = {
    "a partial block header": (b"\0\0\0\0\x05", "5 bytes, too few for a block header"),
    "an unknown block type": (_block(7, b"\1\0\0\0"), "block type 7, which GE's ModelDescType does not have"),
    "a negative block type": (_block(-1, b""), "block type -1"),
    "a block longer than the partition": (_block(2, b"\1\0\0\0", length=0xFFFFFFFF),
                                          "says 4294967295 bytes, the partition has 4 left"),
    "a huge tensor count": (_block(0, struct.pack("<I", 0xFFFFFFFF) + _desc()),
                            "4294967295 entries need at least 137438953440 bytes"),
    "a huge dims_len": (_block(0, struct.pack("<I", 1) + _desc(dims_len=0xFFFFFFF8)),
                        r"dims \(536870911 values\) needs 4294967288 bytes"),
    "a dims_len not of whole int64s": (_block(0, struct.pack("<I", 1) + _desc(dims_len=7)),
                                       "dims_len 7 is not a multiple of 8"),
    "a shape_range_len not of whole pairs": (_block(0, struct.pack("<I", 1) + _desc(range_len=8)),
                                             "shape_range_len 8 is not a multiple of 16"),
    "a name that is not UTF-8": (_block(0, struct.pack("<I", 1) + _desc(name=b"\xff\xfe")), "name is not UTF-8"),
    "an empty block": (_block(1, struct.pack("<I", 0)), "0 entries; GE leaves an empty block out"),
    "a huge gear count": (_block(2, struct.pack("<I", 0x20000000)), "536870912 entries need at least"),
    "a huge part size": (_block(3, struct.pack("<II", 1, 0xFFFFFFFF)), r"part 0 \(4294967295 values\) needs"),
    "a huge string length": (_block(6, struct.pack("<II", 1, 0xFFFFFFFF) + b"x"), "string 0 needs 4294967295 bytes"),
    "bytes after the entries": (_block(2, struct.pack("<IQ", 1, 2) + b"\0"), "1 bytes before the block does"),
    "a repeated block": (_block(2, struct.pack("<IQ", 1, 2)) * 2,
                         "a MODEL_DYNAMIC_BATCH block after the MODEL_DYNAMIC_BATCH block"),
    "blocks out of order": (_block(2, struct.pack("<IQ", 1, 2)) + _block(1, struct.pack("<I", 1) + _desc()),
                            "a MODEL_OUTPUT_DESC block after the MODEL_DYNAMIC_BATCH block"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_malformed_partition_is_an_archive_error_naming_what_is_wrong(case):
    data, match = HOSTILE[case]
    with pytest.raises(ArchiveError, match=match):
        inout_info.parse(data)


def test_no_truncation_or_changed_byte_makes_the_parser_fail_otherwise():
    """Every prefix of a valid partition, and 3000 copies with a few bytes changed (lengths and
    counts among them), either parse or are an ArchiveError; a prefix parses only where a block
    ends, and then as the blocks before it."""
    data = inout_info.build(FULL)
    ends = set()
    pos = 0
    while pos < len(data):
        pos += 8 + struct.unpack_from("<I", data, pos + 4)[0]
        ends.add(pos)
    for n in range(len(data)):
        try:
            got = inout_info.parse(data[:n])
        except ArchiveError:
            assert n not in ends | {0}, n
        else:
            assert n in ends | {0}, n
            assert inout_info.build(got) == data[:n]
    rng = random.Random(8)
    for _ in range(3000):
        d = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(d))
            d[at] = rng.choice((0, 0xFF, d[at] ^ (1 << rng.randrange(8)), rng.randrange(256)))
        try:
            got = inout_info.parse(bytes(d))
        except ArchiveError:
            continue
        assert inout_info.build(got) == bytes(d)   # whatever parses is exactly what build writes for it


# ---- what om2gen writes, and the reader's check ---------------------------------------------------------

needs_cc = pytest.mark.needs_cc
GEARS = {
    "batch": (gear_models.cnn_batch, {"input_shapes": {"x": (-1, 3, 16, 16)}, "dynamic_batch_size": "1,2,4"}),
    "image": (gear_models.cnn_image, {"input_shapes": {"x": (1, 3, -1, -1)}, "dynamic_image_size": "16,16;24,32"}),
    "dims": (gear_models.encoder, {"input_shapes": {"input_ids": (1, -1)}, "dynamic_dims": "8;16;32"}),
}


@pytest.fixture(scope="module")
def oms(tmp_path_factory):
    d = tmp_path_factory.mktemp("inout")
    paths = {"static": om2gen.compile(SAMPLE, d / "static.om", input_shapes={"image": (1, 3, 32, 32)}, format="om")}
    for name, (make, opts) in GEARS.items():
        paths[name] = om2gen.compile(make(), d / f"{name}.om", format="om", **opts)
    paths["batch_again"] = om2gen.compile(GEARS["batch"][0](), d / "batch_again.om", format="om",
                                          **GEARS["batch"][1])
    return {"dir": d, **paths}


def _partition(path) -> bytes:
    return bytes(read_om(path).partition(PT.MODEL_INOUT_INFO))


def _rewritten(path, out, inout=None, model_def=None) -> Path:
    """The OM at `path` with MODEL_INOUT_INFO replaced (b"": left out) or MODEL_DEF replaced (its
    digests recomputed)."""
    o = read_om(path)
    parts = [Partition(p.type, model_def if p.type == PT.MODEL_DEF and model_def is not None
                       else inout if p.type == PT.MODEL_INOUT_INFO and inout is not None else p.data)
             for p in o.partitions]
    write_om(out, refresh_om_digests([p for p in parts if p.data]), header=o.header)
    return out


def _ge_introduction(md) -> InOutInfo:
    """What GE's ModelIntroduction (model_introduction.cc) makes of a MODEL_DEF, by its rules,
    apart from inout_info.describe: the root Data ops by index, each input's dims from
    _mbatch_origin_input_dims when it has one, else its input desc's shape, its size the desc's;
    the root NetOutput's input descs; the Case's gear values by mbatch_dynamic_type, its
    user_designate_shape_order, the NetOutput's _dynamic_output_dims. (GE names an output after
    the node that makes it; om2gen names it as the model does, by its tensor.)"""
    root = md.graph[0]
    by_proto = {d.ge_proto: d.acl for d in dtypes.BY_NAME.values()}

    def tensor(name, td, dims):
        return TensorInfo(name, td.size, td.attr["format_for_int"].i, by_proto[td.dtype], dims, dims)

    data = sorted((op for op in root.op if op.type == "Data"), key=lambda op: op.attr["index"].i)
    inputs = tuple(tensor(op.name, op.input_desc[0], tuple(op.attr["_mbatch_origin_input_dims"].list.i)
                          if "_mbatch_origin_input_dims" in op.attr else tuple(op.input_desc[0].shape.dim))
                   for op in data)
    net, = [op for op in root.op if op.type == "NetOutput"]
    outputs = tuple(tensor(td.name, td, tuple(td.shape.dim)) for td in net.input_desc)
    case = next((op for op in root.op if op.type == "Case"), None)
    if case is None:
        return InOutInfo(inputs, outputs)
    values = tuple(tuple(case.attr[f"_pred_value_{i}"].list.i) for i in range(case.attr["_batch_num"].i))
    kind = case.attr["mbatch_dynamic_type"].i
    return InOutInfo(inputs, outputs, dynamic_batch=tuple(v[0] for v in values) if kind == 1 else (),
                     dynamic_hw=values if kind == 2 else (), dynamic_dims=values if kind == 3 else (),
                     dynamic_output_shape=tuple(s.decode() for s in net.attr["_dynamic_output_dims"].list.s),
                     data_name_order=tuple(s.decode() for s in case.attr["user_designate_shape_order"].list.s))


@needs_cc
def test_a_static_model_describes_its_input_and_output(oms):
    o = read_om(oms["static"])
    assert [p.type for p in o.partitions].index(PT.MODEL_INOUT_INFO) == 0   # GE: before MODEL_DEF
    assert inout_info.parse(_partition(oms["static"])) == InOutInfo(
        inputs=(TensorInfo("image", 4 * 3 * 32 * 32, 2, 0, (1, 3, 32, 32), (1, 3, 32, 32)),),
        outputs=(TensorInfo("probs", 4 * 10, 2, 0, (1, 10), (1, 10)),))
    with om2gen.load(oms["static"]) as m:    # the reader checks it against MODEL_DEF
        assert [t.name for t in m.inputs] == ["image"]


@needs_cc
@pytest.mark.parametrize("name", ["static", *GEARS])
def test_what_is_written_is_what_ge_makes_of_the_model_def(oms, name):
    md = proto.ModelDef.FromString(bytes(read_om(oms[name]).partition(PT.MODEL_DEF)))
    assert inout_info.parse(_partition(oms[name])) == _ge_introduction(md)


@needs_cc
def test_a_gear_model_describes_its_gears(oms):
    batch, image, dims = (inout_info.parse(_partition(oms[n])) for n in GEARS)
    assert batch.dynamic_batch == (1, 2, 4) and not batch.dynamic_hw and not batch.dynamic_dims
    assert [(t.name, t.dims) for t in batch.inputs] == [("x", (-1, 3, 16, 16)), ("ascend_mbatch_shape_data", (1,))]
    assert batch.inputs[0].size == 4 * 4 * 3 * 16 * 16          # the largest gear's buffer
    assert batch.dynamic_output_shape == ("0,0,1,10", "1,0,2,10", "2,0,4,10") and batch.data_name_order == ("x",)
    assert image.dynamic_hw == ((16, 16), (24, 32)) and image.inputs[0].dims == (1, 3, -1, -1)
    assert image.dynamic_output_shape == ("0,0,1,8,8,8", "1,0,1,8,12,16", "-1,1,1,8")
    assert dims.dynamic_dims == ((8,), (16,), (32,)) and dims.inputs[0].dims == (1, -1)
    assert dims.inputs[0].dt == dtypes.BY_NAME["int64"].acl and dims.data_name_order == ("input_ids",)
    for name, info in zip(GEARS, (batch, image, dims)):
        with om2gen.load(oms[name]) as m:     # the reader checks it against MODEL_DEF
            assert len(m.gears) == len(info.dynamic_batch or info.dynamic_hw or info.dynamic_dims)
    assert oms["batch"].read_bytes() == oms["batch_again"].read_bytes()   # same model, same bytes


def _edited(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1, old
    return data.replace(old, new)


@needs_cc
def test_a_partition_that_disagrees_with_model_def_is_refused(oms, tmp_path):
    static, batch = _partition(oms["static"]), _partition(oms["batch"])
    dims = struct.pack("<4q", 1, 3, 32, 32)
    cases = {
        "dims": (oms["static"], _edited(static, dims + dims, struct.pack("<4q", 1, 3, 32, 33) + dims),
                 r"input 0 \('image'\): dims is \[1, 3, 32, 33\], MODEL_DEF says \[1, 3, 32, 32\]"),
        "dt": (oms["static"], _edited(static, struct.pack("<QiiI", 40, 2, 0, 5), struct.pack("<QiiI", 40, 2, 1, 5)),
               r"output 0 \('probs'\): dt is 1 \(float16\), MODEL_DEF says 0 \(float32\)"),
        "output left out": (oms["static"], inout_info.build(replace(inout_info.parse(static), outputs=())),
                            r"describes 0 model outputs \(none\), MODEL_DEF has 1 \('probs'\)"),
        "gear": (oms["batch"], _edited(batch, struct.pack("<I3Q", 3, 1, 2, 4), struct.pack("<I3Q", 3, 1, 2, 8)),
                 r"MODEL_DYNAMIC_BATCH is \[1, 2, 8\], MODEL_DEF says \[1, 2, 4\]"),
        "gear block left out": (oms["batch"], inout_info.build(replace(inout_info.parse(batch), dynamic_batch=())),
                                r"MODEL_DYNAMIC_BATCH is absent, MODEL_DEF says \[1, 2, 4\]"),
        "truncated": (oms["batch"], batch[:-3], "the MODEL_DESIGNATE_SHAPE_ORDER block says 9 bytes, the partition "
                                                "has 6 left"),
    }
    for what, (path, data, match) in cases.items():
        bad = _rewritten(path, tmp_path / f"{what}.om", inout=data)
        with pytest.raises(om2gen.ArchiveError, match=f"{bad.name}: MODEL_INOUT_INFO .*{match}.*the OM is corrupt"):
            om2gen.load(bad)
        info = inspect_om(bad)["models"][0]["inout_info"]    # inspect shows it, without raising
        assert "MODEL_INOUT_INFO" in info.get("check", info.get("error")), what
    # MODEL_DEF changed, MODEL_INOUT_INFO not: the check is against what the reader reads from MODEL_DEF
    md = proto.ModelDef.FromString(bytes(read_om(oms["static"]).partition(PT.MODEL_DEF)))
    net, = [op for op in md.graph[0].op if op.type == "NetOutput"]
    net.input_desc[0].name = "renamed"
    bad = _rewritten(oms["static"], tmp_path / "renamed.om", model_def=md.SerializeToString(deterministic=True))
    with pytest.raises(om2gen.ArchiveError, match=r"output 0 \('renamed'\): name is 'probs', MODEL_DEF says "
                                                  r"'renamed'"):
        om2gen.load(bad)


@needs_cc
def test_an_om_without_the_partition_still_loads(oms, tmp_path):
    """om2gen wrote none before; GE's loader treats a missing MODEL_INOUT_INFO as empty too."""
    old = _rewritten(oms["batch"], tmp_path / "old.om", inout=b"")
    assert PT.MODEL_INOUT_INFO not in [p.type for p in read_om(old).partitions]
    with om2gen.load(old) as m:
        assert len(m.gears) == 3
    assert inspect_om(old)["models"][0]["inout_info"] is None


@needs_cc
def test_inspect_shows_the_blocks(oms):
    model, = inspect_om(oms["batch"])["models"]
    info = model["inout_info"]
    assert info["check"] == "agrees with MODEL_DEF" and info["dynamic_batch"] == [1, 2, 4]
    assert info["inputs"][0] == {"name": "x", "size": 12288, "format": 2, "dt": 0, "dims": [-1, 3, 16, 16],
                                 "dimsV2": [-1, 3, 16, 16], "shape_range": []}
    text = render_text(inspect_om(oms["batch"]))
    assert "  MODEL_INOUT_INFO (agrees with MODEL_DEF):" in text
    assert "    input  x: float32[-1, 3, 16, 16] ND, 12288 bytes" in text
    assert "    MODEL_DYNAMIC_BATCH: [1, 2, 4]" in text and "    MODEL_DESIGNATE_SHAPE_ORDER: ['x']" in text
