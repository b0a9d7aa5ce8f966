"""om2gen.acl.constants agrees with the runtime's acl_base.h and acl_rt.h, which mirror CANN's."""
import re
from pathlib import Path

from om2gen.acl import constants as C
from om2gen.ir import dtypes

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


ACL_NAMES = {"float32": "ACL_FLOAT", "float16": "ACL_FLOAT16", "int8": "ACL_INT8", "uint8": "ACL_UINT8",
             "int16": "ACL_INT16", "uint16": "ACL_UINT16", "int32": "ACL_INT32", "uint32": "ACL_UINT32",
             "int64": "ACL_INT64", "uint64": "ACL_UINT64", "bool": "ACL_BOOL", "float64": "ACL_DOUBLE"}


def test_data_types_are_the_dtype_table():
    """acl.mdl.get_*_data_type reports dtypes' `acl` column: it must be the header's aclDataType."""
    text = (INCLUDE / "acl_base.h").read_text()
    block = re.search(r"typedef enum \{(.*?)\} aclDataType;", text, re.S)[1]
    enum = {m[1]: int(m[2]) for m in re.finditer(r"(ACL_\w+) = (-?\d+)", block)}
    assert {name: enum[ACL_NAMES[name]] for name in dtypes.BY_NAME} == {n: d.acl for n, d in dtypes.BY_NAME.items()}
    assert C.ACL_DT_UNDEFINED == enum["ACL_DT_UNDEFINED"] and C.ACL_STRING == enum["ACL_STRING"]


def test_error_names():
    assert C.ERROR_NAMES[100011] == "ACL_ERROR_INVALID_MODEL_ID"
    assert C.ERROR_NAMES[0] == "ACL_SUCCESS"
