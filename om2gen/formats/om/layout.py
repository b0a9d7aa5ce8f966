"""The OM (v1) byte layout: the single source of truth for constants, header field offsets and
the enumerations stored in an OM file. `container` (writer and reader) and the tests read these
tables; nothing else spells an offset or a partition number.

Section numbers (§) refer to /work/shared/design/GE_FACTS.md, which names the GE sources.
Everything is little-endian: GE writes its in-memory structs as-is on x86-64/aarch64 (§1.2).
"""
from __future__ import annotations

import struct
from enum import IntEnum

# --- §1.1 constants --------------------------------------------------------------------------
MAGIC = 0x444F4D49               # MODEL_FILE_MAGIC_NUM; on disk b"IMOD"
HEADER_SIZE = 256                # MODEL_FILE_HEAD_LEN == sizeof(ModelFileHeader)
MODEL_VERSION = 0x20000000       # "model version 2.0"; the only version this package reads
UINT32_MAX = 0xFFFFFFFF

# --- §1.2 ModelFileHeader: (field, offset, struct code) in file order ------------------------
# Natural alignment, no packing; offsets are gcc-computed in GE_FACTS and re-checked below.
# "<n>s" fields are fixed-size byte arrays; `padd` and `reserved` are kept verbatim on read.
HEADER_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("magic", 0, "I"),
    ("headsize", 4, "I"),
    ("version", 8, "I"),
    ("checksum", 12, "64s"),             # never verified by public GE code; zeros
    ("length", 76, "I"),                 # legacy total length, used only if model_length == 0
    ("is_encrypt", 80, "B"),             # ModelEncryptType
    ("is_checksum", 81, "B"),            # ModelCheckType
    ("modeltype", 82, "B"),              # ModelHeaderType (§1.3)
    ("genmode", 83, "B"),                # 0 offline, 1 online
    ("name", 84, "32s"),                 # NUL-terminated, GE truncates to 31 bytes
    ("ops", 116, "I"),                   # "computing power (Kops)"
    ("userdefineinfo", 120, "32s"),
    ("om_ir_version", 152, "I"),
    ("model_num", 156, "I"),             # number of (sub)models, one partition table each (§1.6)
    ("platform_version", 160, "20s"),
    ("platform_type", 180, "B"),
    ("padd", 181, "3s"),                 # alignment padding before the uint64
    ("model_length", 184, "Q"),          # bytes after the header: all tables + partitions
    ("need_check_os_cpu_info", 192, "B"),  # OsCpuInfoCheckType
    ("is_unknow_model", 193, "B"),       # 0 static, 1 dynamic (unknown-shape) model
    ("reserved", 194, "62s"),
)
HEADER_FORMAT = "<" + "".join(code for _, _, code in HEADER_FIELDS)
HEADER_OFFSETS = {name: off for name, off, _ in HEADER_FIELDS}


def _check_header_table() -> None:
    pos = 0
    for name, off, code in HEADER_FIELDS:
        size = struct.calcsize("<" + code)
        # natural alignment of scalars (byte arrays align to 1)
        assert off == pos and (code.endswith("s") or off % size == 0), (name, off, pos)
        pos += size
    assert pos == struct.calcsize(HEADER_FORMAT) == HEADER_SIZE, pos


_check_header_table()

# --- §1.4 partition tables -------------------------------------------------------------------
# Current form (ModelPartitionTable / ModelPartitionMemInfo): uint32 num, 4 pad bytes, then
# entries {uint32 type, 4 pad bytes, uint64 mem_offset, uint64 mem_size}. Used when
# header.model_length != 0 or modeltype == FLOW_MODEL; every file this package writes uses it.
TABLE_HEAD_FORMAT = "<I4x"
TABLE_ENTRY_FORMAT = "<I4xQQ"
# Legacy "tiny" form (model_length == 0, pre-2022 writers): uint32 num, entries
# {uint32 type, uint32 mem_offset, uint32 mem_size}; the data length then comes from `length`.
TINY_TABLE_HEAD_FORMAT = "<I"
TINY_TABLE_ENTRY_FORMAT = "<III"
TABLE_HEAD_SIZE = struct.calcsize(TABLE_HEAD_FORMAT)
TABLE_ENTRY_SIZE = struct.calcsize(TABLE_ENTRY_FORMAT)
TINY_TABLE_HEAD_SIZE = struct.calcsize(TINY_TABLE_HEAD_FORMAT)
TINY_TABLE_ENTRY_SIZE = struct.calcsize(TINY_TABLE_ENTRY_FORMAT)
assert (TABLE_HEAD_SIZE, TABLE_ENTRY_SIZE, TINY_TABLE_HEAD_SIZE, TINY_TABLE_ENTRY_SIZE) == (8, 24, 4, 12)

# `OmFileLoadHelper::CheckPartitionTableNum` accepts 1..8 entries per table (§1.4); flow
# models up to 4096.
MIN_PARTITIONS = 1
MAX_PARTITIONS = 8
MAX_FLOW_PARTITIONS = 4096


def table_size(num: int) -> int:
    """Bytes of a current-form partition table with `num` entries (SizeOfModelPartitionTable)."""
    return TABLE_HEAD_SIZE + TABLE_ENTRY_SIZE * num


# --- §1.3 ModelHeaderType (header.modeltype) -------------------------------------------------
class ModelHeaderType(IntEnum):
    IR_MODEL = 0            # what ordinary ATC .om files (and this package) write
    STANDARD_MODEL = 1
    OM_TINY_MODEL = 2
    FLOW_MODEL = 3
    LITE_MODEL = 4
    BUNDLE_MODEL = 5        # one table of sub-OMs; GE's root-model loader rejects it
    RESERVED = 6


# --- §1.2 single-byte flag enumerations --------------------------------------------------------
class ModelEncryptType(IntEnum):
    UNENCRYPTED = 0
    ENCRYPTED = 1


class ModelCheckType(IntEnum):
    CHECK = 0
    UNCHECK = 1


class OsCpuInfoCheckType(IntEnum):
    NO_CHECK = 0
    NEED_CHECK = 1


# --- §1.5 ModelPartitionType -----------------------------------------------------------------
class ModelPartitionType(IntEnum):
    """One row per partition type: (number, missing_ok, payload).

    `missing_ok`: GE's `GetModelPartition` treats a missing partition of this type as present
    and empty; a missing partition of any other type is an error. Numbers 13..19 are unused.
    """

    def __new__(cls, value: int, missing_ok: bool, payload: str):
        obj = int.__new__(cls, value)
        obj._value_ = value
        obj.missing_ok = missing_ok
        obj.payload = payload
        return obj

    MODEL_DEF = (0, False, "serialized ge.proto.ModelDef")
    WEIGHTS_DATA = (1, True, "raw weight bytes")
    TASK_INFO = (2, True, "serialized domi.ModelTaskDef")
    TBE_KERNELS = (3, True, "KernelStore of AI Core kernel ELF objects")
    CUST_AICPU_KERNELS = (4, True, "KernelStore of custom AI CPU .so files")
    SO_BINS = (5, True, "OpSoStore (SO in OM, §4)")
    FLOW_MODEL = (6, False, "dflow model")
    FLOW_SUBMODEL = (7, False, "dflow submodel")
    MODEL_INOUT_INFO = (8, True, "TLV model introduction (I/O descs, dynamic gears)")
    STATIC_TASK_DESC = (9, False, "exe-om static task descriptors")
    DYNAMIC_TASK_DESC = (10, False, "exe-om dynamic task descriptors")
    TASK_PARAM = (11, False, "exe-om task parameters")
    TILING_DATA = (12, True, "host tiling resources (TilingHeader + TL records)")
    PRE_MODEL_DESC = (20, False, "exe-om model descriptor")
    PRE_MODEL_SQE = (21, False, "exe-om SQEs")
    PRE_KERNEL_ARGS = (22, False, "exe-om kernel args")
    PRE_MODEL_DESC_EXTEND = (23, False, "exe-om model descriptor extension")
    BUNDLE_MODEL_INFO = (24, False, "bundle sub-OM")
    BUNDLE_MODEL_VAR_INFO = (25, False, "bundle variable size (uint64)")
    CUSTOM_OPS = (26, True, "CustomKernelItemHeader items (KCSK)")


# --- §1.8 MODEL_INOUT_INFO: TLV blocks (GE model_introduction.cc, ge_model_inout_types.h) ----
# A block is [int32 type][uint32 length][value]; GE writes the non-empty ones in type order.
class ModelDescType(IntEnum):
    MODEL_INPUT_DESC = 0            # tensor descs of the root graph's Data ops, by index
    MODEL_OUTPUT_DESC = 1           # tensor descs of the root NetOutput's inputs
    MODEL_DYNAMIC_BATCH = 2         # uint32 n, uint64[n]
    MODEL_DYNAMIC_HW = 3            # uint32 n, uint32[n] part sizes, then the int64 values
    MODEL_DYNAMIC_DIMS = 4          # as MODEL_DYNAMIC_HW
    MODEL_DYNAMIC_OUTPUT_SHAPE = 5  # uint32 n, uint32[n] string lengths, then the strings
    MODEL_DESIGNATE_SHAPE_ORDER = 6  # as MODEL_DYNAMIC_OUTPUT_SHAPE


TLV_HEAD_FORMAT = "<iI"
# ModelTensorDescBaseInfo {size_t size; Format format; DataType dt; uint32 name_len, dims_len,
# dimsV2_len, shape_range_len}: natural alignment leaves no padding (8 + 6 * 4 = 32, a multiple
# of 8). Then name, int64 dims, int64 dimsV2, (int64, int64) shape ranges.
TENSOR_DESC_FORMAT = "<QiiIIII"
TLV_HEAD_SIZE = struct.calcsize(TLV_HEAD_FORMAT)
TENSOR_DESC_SIZE = struct.calcsize(TENSOR_DESC_FORMAT)
assert (TLV_HEAD_SIZE, TENSOR_DESC_SIZE) == (8, 32) == (8, struct.calcsize("@QiiIIII"))
FORMAT_ND = 2                       # ge::Format FORMAT_ND (== ACL_FORMAT_ND), every om2gen tensor's


# --- MODEL_DEF's OpDef attributes ------------------------------------------------------------
# GE's ATTR_NAME_DATA_DUMP_ORIGIN_OP_NAMES (list of strings): on a fused op, the names of the
# original ops it computes, which data dumps and profiling map back to; om2gen writes a fused
# node's fused_from here
ORIGINAL_OP_NAMES = "_datadump_original_op_names"
