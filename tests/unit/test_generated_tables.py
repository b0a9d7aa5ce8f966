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
