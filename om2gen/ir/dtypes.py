"""One table of data types: ONNX id, GE proto id, ge::DataType / aclDataType id, numpy, C.

GE has three numberings (GE_FACTS 2.6); aclDataType equals ge::DataType for every type ACL
exposes. Everything in om2gen reads dtypes from this table.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedOpError


@dataclass(frozen=True)
class DType:
    name: str          # om2gen's name, also numpy's
    onnx: int          # TensorProto.DataType (onnx.proto3's numbers, written out: loading a model
                       # imports this table and must not import onnx)
    ge_proto: int      # ge.proto.DataType (ge_ir.proto)
    acl: int           # ge::DataType == aclDataType
    acl_name: str      # the aclDataType enumerator (acl_base.h), as generated C++ spells it
    ge_string: str     # TypeUtils::DataTypeToSerialString
    c_type: str
    itemsize: int

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.name)


_TABLE = [
    DType("float32", 1, 1, 0, "ACL_FLOAT", "DT_FLOAT", "float", 4),
    DType("float16", 10, 2, 1, "ACL_FLOAT16", "DT_FLOAT16", "uint16_t", 2),
    DType("int8", 3, 3, 2, "ACL_INT8", "DT_INT8", "int8_t", 1),
    DType("uint8", 2, 4, 4, "ACL_UINT8", "DT_UINT8", "uint8_t", 1),
    DType("int16", 5, 5, 6, "ACL_INT16", "DT_INT16", "int16_t", 2),
    DType("uint16", 4, 6, 7, "ACL_UINT16", "DT_UINT16", "uint16_t", 2),
    DType("int32", 6, 7, 3, "ACL_INT32", "DT_INT32", "int32_t", 4),
    DType("int64", 7, 8, 9, "ACL_INT64", "DT_INT64", "int64_t", 8),
    DType("uint32", 12, 9, 8, "ACL_UINT32", "DT_UINT32", "uint32_t", 4),
    DType("uint64", 13, 10, 10, "ACL_UINT64", "DT_UINT64", "uint64_t", 8),
    DType("bool", 9, 11, 12, "ACL_BOOL", "DT_BOOL", "uint8_t", 1),
    DType("float64", 11, 12, 11, "ACL_DOUBLE", "DT_DOUBLE", "double", 8),
]

BY_NAME = {d.name: d for d in _TABLE}
BY_ONNX = {d.onnx: d for d in _TABLE}
BY_ACL = {d.acl: d for d in _TABLE}

FLOAT32 = BY_NAME["float32"]
INT64 = BY_NAME["int64"]


def from_onnx(elem_type: int, where: str = "") -> DType:
    try:
        return BY_ONNX[elem_type]
    except KeyError:
        from onnx import TensorProto
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else elem_type
        raise UnsupportedOpError(f"{where}: data type {name} is not supported by om2gen "
                                 f"(supported: {', '.join(sorted(BY_NAME))})") from None


def from_numpy(dtype) -> DType:
    name = np.dtype(dtype).name
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnsupportedOpError(f"numpy dtype {name} is not supported by om2gen") from None


class _Omitted:
    """The dtype of an omitted optional output position (ONNX's "" output name): described to the
    runtime as ACL_DT_UNDEFINED, which om2/custom_op.h's hooks see as a null desc / tensor."""
    acl = -1
    name = "omitted"
    acl_name = "ACL_DT_UNDEFINED"

    def __repr__(self):
        return "OMITTED"


OMITTED = _Omitted()
