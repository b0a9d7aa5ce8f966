"""om2gen.acl.constants agrees with the runtime's acl_base.h and acl_rt.h, which mirror CANN's."""
import re
from pathlib import Path

from om2gen.acl import constants as C
from om2gen.ir import dtypes
from om2gen.ir.tasks import SLOT_KINDS

INCLUDE = Path(__file__).resolve().parents[2] / "runtime_abi" / "include" / "acl"


def _header_values() -> dict[str, int]:
    text = (INCLUDE / "acl_base.h").read_text() + (INCLUDE / "acl_rt.h").read_text()
    values = {m[1]: int(m[2]) for m in re.finditer(r"static const int (ACL_\w+) = (-?\d+);", text)}
    values.update({m[1]: int(m[2]) for m in re.finditer(r"#define (ACL_ERROR_\w+) (\d+)\b", text)})
    values.update({m[1]: int(m[2]) for m in re.finditer(r"\b(ACL_(?:MEMCPY|MEM_MALLOC|FORMAT|DT)_\w+) = (-?\d+)", text)})
    values.update({m[1]: int(m[2]) for m in re.finditer(r"\b(ACL_(?:DEVICE|HOST|STRING)) = (\d+)", text)})
    return values


def test_every_shared_name_has_the_header_value():
    header = _header_values()
    ours = {k: v for k, v in vars(C).items() if k.startswith("ACL_") and isinstance(v, int)}
    shared = sorted(set(header) & set(ours))
    assert len(shared) >= 30, shared            # the comparison really covers the tables
    assert {k: ours[k] for k in shared} == {k: header[k] for k in shared}


def test_data_types_are_the_dtype_table():
    """acl.mdl.get_*_data_type reports dtypes' `acl` column and generated C++ spells `acl_name`: each
    must be the header's aclDataType enumerator of that value."""
    text = (INCLUDE / "acl_base.h").read_text()
    block = re.search(r"typedef enum \{(.*?)\} aclDataType;", text, re.S)[1]
    enum = {m[1]: int(m[2]) for m in re.finditer(r"(ACL_\w+) = (-?\d+)", block)}
    assert {n: enum[d.acl_name] for n, d in dtypes.BY_NAME.items()} == {n: d.acl for n, d in dtypes.BY_NAME.items()}
    assert enum[dtypes.OMITTED.acl_name] == dtypes.OMITTED.acl
    assert C.ACL_DT_UNDEFINED == enum["ACL_DT_UNDEFINED"] and C.ACL_STRING == enum["ACL_STRING"]


def test_error_names():
    assert C.ERROR_NAMES[100011] == "ACL_ERROR_INVALID_MODEL_ID"
    assert C.ERROR_NAMES[0] == "ACL_SUCCESS"


def test_arg_kinds_are_the_header_enum():
    """ArgKind's slot kinds are om2/om2_model_tables.h's Om2ArgKind: names (generated C++) and values
    (the runtime's tables)."""
    text = (INCLUDE.parent / "om2" / "om2_model_tables.h").read_text()
    block = re.search(r"enum Om2ArgKind : uint32_t \{(.*?)\};", text, re.S)[1]
    enum = {m[1]: int(m[2]) for m in re.finditer(r"(OM2_ARG_\w+) = (\d+)", block)}
    assert enum == {k.c_name: int(k) for k in SLOT_KINDS}
