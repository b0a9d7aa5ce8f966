"""The generated tables name what they hold: kOpDefs fields, tiling words, fused ops (issue 13)."""
import re

from om2gen.codegen import model_cpp
from om2gen.resources import include_dir


def _struct_fields(header: str, name: str) -> list[str]:
    body = re.search(r"struct %s \{(.*?)\n\};" % name, header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [re.search(r"(\w+)\s*;", d).group(1) for d in body.split(";")[:-1] for d in [d + ";"]]


def test_op_def_field_names_are_the_headers():
    header = (include_dir() / "om2" / "om2_model_tables.h").read_text()
    assert tuple(_struct_fields(header, "Om2OpDef")) == model_cpp.OP_DEF_FIELDS


def test_tiling_rows_name_every_word():
    rows = model_cpp._tiling_rows(list(range(8)), [f"f{i}" for i in range(8)])
    assert [r["names"] for r in rows] == ["f0=0 f1=1 f2=2 f3=3 f4=4 f5=5", "f6=6 f7=7"]
    assert len({len(r["words"]) for r in rows}) == 1      # the names line up


def test_tiling_fields_are_read_from_the_kernel_source():
    from om2gen.codegen.kernels import tiling_fields
    assert tiling_fields("typedef struct {\n    int64_t N;\n    int64_t tile_m;\n} TilingData;") == ["N", "tile_m"]
    assert tiling_fields("/* no tiling */") == []

