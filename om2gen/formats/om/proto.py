"""GE's protobuf messages, built at import time from the field numbers in GE_FACTS §2 and §3.

``ge_ir.proto`` (package ``ge.proto``: the MODEL_DEF partition) and ``task.proto`` (package
``domi``: the TASK_INFO partition) are described here as Python tables, turned into
``FileDescriptorProto``s, added to a private ``DescriptorPool`` and turned into message classes.
No protoc, no generated ``_pb2`` files, no dependency beyond ``protobuf``. The wire format is
what matters: field numbers, wire types and proto3 packing equal GE's, so bytes written by GE
parse here and bytes written here parse in GE.

Messages GE_FACTS names without fields (``AttrGroups``; the FFTS/DSA/CMO/... task bodies) are
empty placeholders: their field number in the parent is right, and their content survives a
parse/serialize round trip as unknown fields.

Every message is a module attribute: ``proto.ModelDef``, ``proto.TaskDef``,
``proto.AttrDef.ListValue`` ... and the enum ``proto.DataType``.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal import enum_type_wrapper

_FD = descriptor_pb2.FieldDescriptorProto

_SCALARS = {
    "double": _FD.TYPE_DOUBLE, "float": _FD.TYPE_FLOAT, "int64": _FD.TYPE_INT64,
    "uint64": _FD.TYPE_UINT64, "int32": _FD.TYPE_INT32, "uint32": _FD.TYPE_UINT32,
    "bool": _FD.TYPE_BOOL, "string": _FD.TYPE_STRING, "bytes": _FD.TYPE_BYTES,
}


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


class _Msg:
    """A message spec. ``fields``: ``(number, name, type)`` with type ``"uint32"``,
    ``"repeated int64"``, ``"map<string, AttrDef>"``, ``"GraphDef"`` (message, relative to the
    package), ``"enum DataType"``; a 4th element names the oneof the field belongs to."""

    def __init__(self, name, fields, *, nested=(), enums=()):
        self.name, self.fields, self.nested, self.enums = name, fields, nested, enums

    def proto(self, pkg: str) -> descriptor_pb2.DescriptorProto:
        m = descriptor_pb2.DescriptorProto(name=self.name)
        for e in self.enums:
            m.enum_type.append(_enum(*e))
        for n in self.nested:
            m.nested_type.append(n.proto(pkg))
        oneofs: list[str] = []
        for spec in self.fields:
            number, name, typ = spec[:3]
            f = m.field.add(name=name, number=number, label=_FD.LABEL_OPTIONAL)
            if typ.startswith("map<"):
                key, value = (t.strip() for t in typ[4:-1].split(","))
                entry = m.nested_type.add(name=_camel(name) + "Entry")
                entry.options.map_entry = True
                _set_type(entry.field.add(name="key", number=1, label=_FD.LABEL_OPTIONAL), key, pkg)
                _set_type(entry.field.add(name="value", number=2, label=_FD.LABEL_OPTIONAL),
                          value, pkg)
                f.label = _FD.LABEL_REPEATED
                f.type = _FD.TYPE_MESSAGE
                f.type_name = f".{pkg}.{self._path}.{entry.name}"
                continue
            if typ.startswith("repeated "):
                f.label = _FD.LABEL_REPEATED
                typ = typ[len("repeated "):]
            _set_type(f, typ, pkg)
            if len(spec) > 3:
                if spec[3] not in oneofs:
                    oneofs.append(spec[3])
                    m.oneof_decl.add(name=spec[3])
                f.oneof_index = oneofs.index(spec[3])
        return m

    def set_paths(self, prefix: str = "") -> None:
        self._path = f"{prefix}{self.name}"
        for n in self.nested:
            n.set_paths(self._path + ".")


def _set_type(f, typ: str, pkg: str) -> None:
    if typ in _SCALARS:
        f.type = _SCALARS[typ]
    elif typ.startswith("enum "):
        f.type, f.type_name = _FD.TYPE_ENUM, f".{pkg}.{typ[5:]}"
    else:
        f.type, f.type_name = _FD.TYPE_MESSAGE, f".{pkg}.{typ}"


def _enum(name: str, values: list[str]) -> descriptor_pb2.EnumDescriptorProto:
    """An enum whose values are numbered 0, 1, 2 ... in list order."""
    e = descriptor_pb2.EnumDescriptorProto(name=name)
    for number, vname in enumerate(values):
        e.value.add(name=vname, number=number)
    return e


def _file(name: str, pkg: str, messages, enums=()) -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name=name, package=pkg, syntax="proto3")
    for e in enums:
        fd.enum_type.append(_enum(*e))
    for m in messages:
        m.set_paths()
        fd.message_type.append(m.proto(pkg))
    return fd


# ============================================================================================
# ge_ir.proto, package ge.proto (GE_FACTS §2)

_ATTR_MAP = "map<string, AttrDef>"

# §2.6: ge.proto.DataType, the *protobuf* numbering (not ge::DataType, not aclDataType).
# DT_UNDEFINED (0) describes an omitted optional output: its position is kept, nothing is there.
DT_UNDEFINED = 0
_DATA_TYPE = ("DataType", [
    "DT_UNDEFINED", "DT_FLOAT", "DT_FLOAT16", "DT_INT8", "DT_UINT8", "DT_INT16", "DT_UINT16",
    "DT_INT32", "DT_INT64", "DT_UINT32", "DT_UINT64", "DT_BOOL", "DT_DOUBLE", "DT_STRING",
    "DT_DUAL_SUB_INT8", "DT_DUAL_SUB_UINT8", "DT_COMPLEX64", "DT_COMPLEX128", "DT_QINT8",
    "DT_QINT16", "DT_QINT32", "DT_QUINT8", "DT_QUINT16", "DT_RESOURCE", "DT_STRING_REF",
    "DT_DUAL", "DT_VARIANT", "DT_BF16", "DT_INT4", "DT_UINT1", "DT_INT2", "DT_UINT2",
    "DT_COMPLEX32", "DT_HIFLOAT8", "DT_FLOAT8_E5M2", "DT_FLOAT8_E4M3FN", "DT_FLOAT8_E8M0",
    "DT_FLOAT6_E3M2", "DT_FLOAT6_E2M3", "DT_FLOAT4_E2M1", "DT_FLOAT4_E1M2", "DT_HIFLOAT4",
])

_GE_IR_MESSAGES = [
    # §2.5 AttrDef: oneof `value`; ListValue / ListListInt / ListListFloat are nested in it.
    _Msg("AttrDef", [
        (1, "list", "AttrDef.ListValue", "value"),
        (2, "s", "bytes", "value"),
        (3, "i", "int64", "value"),
        (4, "f", "float", "value"),
        (5, "b", "bool", "value"),
        (7, "bt", "bytes", "value"),
        (10, "func", "NamedAttrs", "value"),
        (11, "td", "TensorDescriptor", "value"),
        (12, "t", "TensorDef", "value"),
        (13, "g", "GraphDef", "value"),
        (14, "list_list_int", "AttrDef.ListListInt", "value"),
        (15, "dt", "int64", "value"),                      # ge::DataType (C++ numbering)
        (16, "list_list_float", "AttrDef.ListListFloat", "value"),
        (17, "expression", "bytes", "value"),
    ], nested=[
        # §2.5 AttrDef.ListValue
        _Msg("ListValue", [
            (2, "s", "repeated bytes"),
            (3, "i", "repeated int64"),
            (4, "f", "repeated float"),
            (5, "b", "repeated bool"),
            (7, "bt", "repeated bytes"),
            (8, "td", "repeated TensorDescriptor"),
            (9, "t", "repeated TensorDef"),
            (10, "g", "repeated GraphDef"),
            (11, "na", "repeated NamedAttrs"),
            (12, "dt", "repeated int64"),                  # ge::DataType (C++ numbering)
            (20, "val_type", "enum AttrDef.ListValue.ListValueType"),
        ], enums=[("ListValueType", [
            "VT_LIST_NONE", "VT_LIST_STRING", "VT_LIST_INT", "VT_LIST_FLOAT", "VT_LIST_BOOL",
            "VT_LIST_BYTES", "VT_LIST_TENSOR_DESC", "VT_LIST_TENSOR", "VT_LIST_GRAPH",
            "VT_LIST_NAMED_ATTRS", "VT_LIST_DATA_TYPE"])]),
        # §2.5 AttrDef.ListListInt
        _Msg("ListListInt", [(1, "list_list_i", "repeated AttrDef.ListListInt.ListInt")],
             nested=[_Msg("ListInt", [(1, "list_i", "repeated int64")])]),
        # §2.5 AttrDef.ListListFloat
        _Msg("ListListFloat", [(1, "list_list_f", "repeated AttrDef.ListListFloat.ListFloat")],
             nested=[_Msg("ListFloat", [(1, "list_f", "repeated float")])]),
    ]),
    # §2.5 "AttrGroups": symbolic-shape/autofuse extras; no fields listed -> placeholder.
    _Msg("AttrGroups", []),
    # §2.4 NamedAttrs
    _Msg("NamedAttrs", [(1, "name", "string"), (2, "attr", _ATTR_MAP)]),
    # §2.4 ShapeDef
    _Msg("ShapeDef", [(1, "dim", "repeated int64")]),
    # §2.4 TensorDescriptor
    _Msg("TensorDescriptor", [
        (1, "name", "string"),
        (2, "dtype", "enum DataType"),
        (3, "shape", "ShapeDef"),
        (4, "layout", "string"),
        (5, "attr", _ATTR_MAP),
        (6, "attr_groups", "AttrGroups"),
        (9, "has_out_attr", "bool"),
        (10, "size", "int64"),
        (11, "weight_size", "int64"),
        (12, "reuse_input", "bool"),
        (13, "output_tensor", "bool"),
        (14, "device_type", "string"),
        (15, "input_tensor", "bool"),
        (16, "real_dim_cnt", "int64"),
        (17, "reuse_input_index", "int64"),
        (18, "data_offset", "int64"),
        (19, "cmps_size", "int64"),
        (20, "cmps_tab", "string"),
        (21, "cmps_tab_offset", "int64"),
    ]),
    # §2.4 TensorDef
    _Msg("TensorDef", [(1, "desc", "TensorDescriptor"), (2, "data", "bytes")]),
    # §2.3 OpDef
    _Msg("OpDef", [
        (1, "name", "string"),
        (2, "type", "string"),
        (5, "input", "repeated string"),
        (10, "attr", _ATTR_MAP),
        (11, "attr_groups", "AttrGroups"),
        (20, "has_out_attr", "bool"),
        (21, "id", "int64"),
        (22, "stream_id", "int64"),
        (23, "input_name", "repeated string"),
        (24, "src_name", "repeated string"),
        (25, "src_index", "repeated int64"),
        (26, "dst_name", "repeated string"),
        (27, "dst_index", "repeated int64"),
        (28, "input_i", "repeated int64"),
        (29, "output_i", "repeated int64"),
        (30, "workspace", "repeated int64"),
        (31, "workspace_bytes", "repeated int64"),
        (32, "is_input_const", "repeated bool"),
        (33, "input_desc", "repeated TensorDescriptor"),
        (34, "output_desc", "repeated TensorDescriptor"),
        (35, "subgraph_name", "repeated string"),
    ]),
    # §2.2 GraphDef
    _Msg("GraphDef", [
        (1, "name", "string"),
        (4, "input", "repeated string"),
        (5, "output", "repeated string"),
        (6, "op", "repeated OpDef"),
        (11, "attr", _ATTR_MAP),
        (12, "attr_groups", "AttrGroups"),
    ]),
    # §2.1 ModelDef (MODEL_DEF partition root)
    _Msg("ModelDef", [
        (1, "name", "string"),
        (2, "version", "uint32"),
        (3, "custom_version", "string"),
        (7, "graph", "repeated GraphDef"),
        (11, "attr", _ATTR_MAP),
        (12, "attr_groups", "AttrGroups"),
    ]),
]

# ============================================================================================
# task.proto, package domi (GE_FACTS §3)

# TaskDef bodies GE_FACTS §3.2 names but does not describe: placeholders (unknown fields kept).
_OPAQUE_TASK_BODIES = [
    "FftsTaskDef", "FftsPlusTaskDef", "DSATaskDef", "CmoTaskDef", "CmoBarrierTaskDef",
    "NpuGetFloatStatusDef", "NpuClearFloatStatusDef", "DvppTaskDef", "NpuGetFloatDebugStatusDef",
    "NpuClearFloatDebugStatusDef", "CmoAddrTaskDef", "UpdatePcTaskDef",
    "FusionSubTaskInfo",  # element of FusionTaskDef.fusion_sub_task_info (§3.2)
]

_TASK_MESSAGES = [
    # §3.1 ModelTaskDef (TASK_INFO partition root)
    _Msg("ModelTaskDef", [
        (1, "version", "string"),
        (9, "attr", "map<string, string>"),
        (10, "task", "repeated TaskDef"),
        (11, "memory_size", "uint64"),
        (12, "stream_num", "uint32"),
        (13, "event_num", "uint32"),
        (14, "weight_size", "uint64"),
        (15, "op", "repeated bytes"),
        (16, "base_addr", "uint64"),
        (17, "weight_addr", "uint64"),
        (18, "batch_num", "uint32"),
    ]),
    # §3.2 TaskDef; `type` is a ModelTaskType value (§3.7)
    _Msg("TaskDef", [
        (1, "id", "uint32"),
        (2, "type", "uint32"),
        (10, "stream_id", "uint32"),
        (11, "event_id", "uint32"),
        (12, "notify_id", "uint32"),
        (13, "sqe_num", "uint32"),
        (20, "kernel", "KernelDef"),
        (21, "kernel_ex", "KernelExDef"),
        (25, "kernel_hccl", "KernelHcclDef"),
        (26, "event_ex", "EventExDef"),
        (28, "log_timestamp", "LogTimeStampDef"),
        (30, "label_id", "uint32"),
        (31, "memcpy_async", "MemcpyAsyncDef"),
        (32, "stream_switch", "StreamSwitchDef"),
        (33, "stream_active", "StreamActiveDef"),
        (34, "private_def", "bytes"),
        (35, "ops_kernel_store_ptr", "uint64"),
        (36, "stream_switch_n", "StreamSwitchNDef"),
        (37, "label_set", "LabelSetDef"),
        (38, "label_goto_ex", "LabelGotoExDef"),
        (39, "label_switch_by_index", "LabelSwitchByIndexDef"),
        (40, "kernel_with_handle", "KernelDefWithHandle"),
        (41, "ffts_task", "FftsTaskDef"),
        (42, "ffts_plus_task", "FftsPlusTaskDef"),
        (43, "dsa_task", "DSATaskDef"),
        (44, "cmo_task", "CmoTaskDef"),
        (45, "cmo_barrier_task", "CmoBarrierTaskDef"),
        (46, "npu_get_float_status", "NpuGetFloatStatusDef"),
        (47, "npu_clear_float_status", "NpuClearFloatStatusDef"),
        (48, "dvpp_task", "DvppTaskDef"),
        (49, "npu_get_float_debug_status", "NpuGetFloatDebugStatusDef"),
        (50, "npu_clear_float_debug_status", "NpuClearFloatDebugStatusDef"),
        (51, "cmo_addr_task", "CmoAddrTaskDef"),
        (52, "update_pc_task", "UpdatePcTaskDef"),
        (53, "fusion_task", "FusionTaskDef"),
    ]),
    # §3.3 KernelDef
    _Msg("KernelDef", [
        (1, "context", "KernelContext"),
        (2, "is_block_task_prefetch", "bool"),
        (10, "stub_func", "string"),
        (11, "block_dim", "uint32"),
        (12, "args_size", "uint32"),
        (13, "args", "bytes"),
        (14, "sm_desc", "bytes"),
        (15, "flowtable", "bytes"),
        (16, "so_name", "string"),
        (17, "kernel_name", "string"),
        (18, "kernel_ext_info", "bytes"),
        (19, "kernel_ext_info_size", "uint32"),
        (20, "args_info", "repeated ArgsInfo"),
        (21, "schedule_mode", "uint32"),
        (22, "block_dim_offset", "uint32"),
    ]),
    # §3.4 KernelDefWithHandle
    _Msg("KernelDefWithHandle", [
        (1, "context", "KernelContext"),
        (2, "is_block_task_prefetch", "bool"),
        (10, "handle", "uint64"),
        (11, "dev_func", "string"),
        (12, "block_dim", "uint32"),
        (13, "args_size", "uint32"),
        (14, "args", "bytes"),
        (15, "sm_desc", "bytes"),
        (16, "original_kernel_key", "string"),
        (17, "node_info", "string"),
        (18, "args_info", "repeated ArgsInfo"),
        (19, "schedule_mode", "uint32"),
        (20, "block_dim_offset", "uint32"),
    ]),
    # §3.5 KernelContext; kernel_type is a ccKernelType (§3.8), op_index an OpDef.id
    _Msg("KernelContext", [
        (1, "kernel_type", "uint32"),
        (2, "op_id", "uint32"),
        (3, "kernel_func_id", "uint32"),
        (4, "op_index", "uint32"),
        (5, "is_flowtable", "bool"),
        (6, "args_offset", "bytes"),
        (7, "args_count", "uint32"),
        (8, "origin_op_index", "repeated uint32"),
        (10, "args_format", "string"),                # §3.9 mini-language
    ]),
    # §3.5 ArgsInfo
    _Msg("ArgsInfo", [
        (1, "arg_type", "enum ArgsInfo.ArgsType"),
        (2, "arg_format", "enum ArgsInfo.ArgsFormat"),
        (3, "start_index", "int32"),                  # -1 = not connected
        (4, "size", "uint32"),
    ], enums=[("ArgsType", ["INPUT", "OUTPUT"]),
              ("ArgsFormat", ["DIRECT_ADDR", "SECONDARY_ADDR"])]),
    # §3.6 KernelExDef
    _Msg("KernelExDef", [
        (1, "flags", "uint32"),
        (4, "op_index", "uint32"),
        (12, "args_size", "uint32"),
        (13, "args", "bytes"),
        (14, "task_info", "bytes"),
        (15, "task_info_size", "uint32"),
        (16, "kernel_ext_info", "bytes"),
        (17, "kernel_ext_info_size", "uint32"),
    ]),
    # §3.6 KernelHcclDef
    _Msg("KernelHcclDef", [
        (8, "op_index", "uint32"),
        (9, "hccl_type", "string"),
        (10, "input_zero_copy_flag", "repeated int32"),
        (11, "output_zero_copy_flag", "repeated int32"),
        (12, "aiv_block_dim", "uint32"),
    ]),
    # §3.6 EventExDef
    _Msg("EventExDef", [(1, "op_index", "uint32"), (2, "event_type", "uint32")]),
    # §3.6 LogTimeStampDef
    _Msg("LogTimeStampDef", [(1, "logid", "uint64"), (2, "notify", "bool"), (3, "flat", "uint32")]),
    # §3.6 MemcpyAsyncDef
    _Msg("MemcpyAsyncDef", [
        (1, "dst", "uint64"),
        (2, "dst_max", "uint64"),
        (3, "src", "uint64"),
        (4, "count", "uint64"),
        (5, "kind", "uint32"),
        (6, "op_index", "uint32"),
        (7, "args_format", "string"),
    ]),
    # §3.6 StreamSwitchDef
    _Msg("StreamSwitchDef", [
        (1, "op_index", "uint32"),
        (2, "true_stream_id", "uint32"),
        (3, "value", "int64"),
        (4, "value_ptr", "uint64"),
        (5, "data_type", "uint32"),
    ]),
    # §3.6 StreamActiveDef
    _Msg("StreamActiveDef", [(1, "op_index", "uint32"), (2, "active_stream_id", "uint32")]),
    # §3.6 StreamSwitchNDef
    _Msg("StreamSwitchNDef", [
        (1, "op_index", "uint32"),
        (2, "size", "uint32"),
        (3, "target_value", "repeated int64"),
        (4, "true_stream_id", "repeated uint32"),
        (5, "element_size", "uint32"),
        (6, "data_type", "uint32"),
    ]),
    # §3.6 LabelSetDef / LabelGotoExDef (same fields)
    _Msg("LabelSetDef", [(1, "op_index", "uint32"), (2, "label_id", "uint32"),
                         (3, "model_id", "uint32")]),
    _Msg("LabelGotoExDef", [(1, "op_index", "uint32"), (2, "label_id", "uint32"),
                            (3, "model_id", "uint32")]),
    # §3.6 LabelSwitchByIndexDef
    _Msg("LabelSwitchByIndexDef", [(1, "op_index", "uint32"), (2, "label_max", "uint32")]),
    # §3.2 FusionTaskDef (fields given inline in the TaskDef table)
    _Msg("FusionTaskDef", [
        (1, "op_index", "uint32"),
        (2, "args_format", "string"),
        (3, "kfc_args_format_offset", "uint32"),
        (4, "fusion_sub_task_info", "repeated FusionSubTaskInfo"),
    ]),
] + [_Msg(name, []) for name in _OPAQUE_TASK_BODIES]

# ============================================================================================
# Build the pool and the classes.

GE_IR_FILE = _file("om2gen/ge_ir.proto", "ge.proto", _GE_IR_MESSAGES, enums=[_DATA_TYPE])
TASK_FILE = _file("om2gen/task.proto", "domi", _TASK_MESSAGES)

POOL = descriptor_pool.DescriptorPool()
POOL.Add(GE_IR_FILE)
POOL.Add(TASK_FILE)


def _class_of(desc):
    get = getattr(message_factory, "GetMessageClass", None)
    if get is not None:
        return get(desc)
    return message_factory.MessageFactory(POOL).GetPrototype(desc)  # protobuf < 4.22


def _message_class(full_name: str):
    """The class of a top-level message, with its nested message classes reachable as
    attributes (``AttrDef.ListValue``) whichever protobuf backend (upb, python) is in use."""
    def attach(cls, desc):
        for nested in desc.nested_types:
            if nested.GetOptions().map_entry:
                continue
            sub = _class_of(nested)
            if not hasattr(cls, nested.name):
                setattr(cls, nested.name, sub)
            attach(sub, nested)
        return cls

    desc = POOL.FindMessageTypeByName(full_name)
    return attach(_class_of(desc), desc)


_EXPORTED = []
for _pkg, _msgs in (("ge.proto", _GE_IR_MESSAGES), ("domi", _TASK_MESSAGES)):
    for _m in _msgs:
        globals()[_m.name] = _message_class(f"{_pkg}.{_m.name}")
        _EXPORTED.append(_m.name)

DataType = enum_type_wrapper.EnumTypeWrapper(POOL.FindEnumTypeByName("ge.proto.DataType"))

__all__ = ["POOL", "GE_IR_FILE", "TASK_FILE", "DataType", *_EXPORTED]

del _pkg, _msgs, _m
