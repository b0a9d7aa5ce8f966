"""GE ge_ir.proto / task.proto messages built from GE_FACTS §2 / §3 field numbers."""
from __future__ import annotations

import pytest
from google.protobuf import descriptor as _d

from om2gen.formats.om import proto

FD = _d.FieldDescriptor


def repeated(field) -> bool:
    """FieldDescriptor.label is gone in newer protobuf; is_repeated is absent in older ones."""
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == FD.LABEL_REPEATED


def numbers(cls) -> dict[str, int]:
    return {f.name: f.number for f in cls.DESCRIPTOR.fields}


def test_packages_and_exports():
    assert proto.ModelDef.DESCRIPTOR.full_name == "ge.proto.ModelDef"
    assert proto.AttrDef.ListValue.DESCRIPTOR.full_name == "ge.proto.AttrDef.ListValue"
    assert proto.TaskDef.DESCRIPTOR.full_name == "domi.TaskDef"
    assert proto.GE_IR_FILE.syntax == proto.TASK_FILE.syntax == "proto3"
    for name in ["ModelDef", "GraphDef", "OpDef", "TensorDescriptor", "TensorDef", "AttrDef",
                 "ShapeDef", "NamedAttrs", "ModelTaskDef", "TaskDef", "KernelDef",
                 "KernelContext", "KernelDefWithHandle", "ArgsInfo", "KernelExDef",
                 "KernelHcclDef", "EventExDef", "LogTimeStampDef", "MemcpyAsyncDef",
                 "StreamSwitchDef", "StreamActiveDef", "StreamSwitchNDef", "LabelSetDef",
                 "LabelGotoExDef", "LabelSwitchByIndexDef", "FusionTaskDef"]:
        assert name in proto.__all__ and hasattr(getattr(proto, name), "DESCRIPTOR"), name


def test_model_def_fields():                                   # §2.1
    assert numbers(proto.ModelDef) == {"name": 1, "version": 2, "custom_version": 3, "graph": 7,
                                       "attr": 11, "attr_groups": 12}
    f = proto.ModelDef.DESCRIPTOR.fields_by_name
    assert f["version"].type == FD.TYPE_UINT32
    assert repeated(f["graph"]) and f["graph"].message_type.name == "GraphDef"
    assert repeated(f["attr"]) and f["attr"].message_type.GetOptions().map_entry
    assert not repeated(f["name"])
    value = f["attr"].message_type.fields_by_name["value"]
    assert value.message_type.full_name == "ge.proto.AttrDef"


def test_graph_op_tensor_fields():                             # §2.2–2.4
    assert numbers(proto.GraphDef) == {"name": 1, "input": 4, "output": 5, "op": 6, "attr": 11,
                                       "attr_groups": 12}
    op = numbers(proto.OpDef)
    assert (op["id"], op["stream_id"], op["input_i"], op["output_i"], op["workspace_bytes"],
            op["input_desc"], op["output_desc"], op["subgraph_name"]) == \
        (21, 22, 28, 29, 31, 33, 34, 35)
    assert len(op) == 21
    td = proto.TensorDescriptor.DESCRIPTOR.fields_by_name
    assert td["dtype"].number == 2 and td["dtype"].enum_type.full_name == "ge.proto.DataType"
    assert (td["layout"].number, td["size"].number, td["cmps_tab_offset"].number) == (4, 10, 21)
    assert numbers(proto.ShapeDef) == {"dim": 1}
    assert numbers(proto.TensorDef) == {"desc": 1, "data": 2}
    assert numbers(proto.NamedAttrs) == {"name": 1, "attr": 2}


def test_attr_def_oneof_and_list_value():                     # §2.5
    d = proto.AttrDef.DESCRIPTOR
    assert [f.name for f in d.oneofs_by_name["value"].fields] == [f.name for f in d.fields]
    assert numbers(proto.AttrDef) == {"list": 1, "s": 2, "i": 3, "f": 4, "b": 5, "bt": 7,
                                      "func": 10, "td": 11, "t": 12, "g": 13, "list_list_int": 14,
                                      "dt": 15, "list_list_float": 16, "expression": 17}
    assert d.fields_by_name["f"].type == FD.TYPE_FLOAT
    assert d.fields_by_name["s"].type == FD.TYPE_BYTES
    assert numbers(proto.AttrDef.ListValue) == {"s": 2, "i": 3, "f": 4, "b": 5, "bt": 7, "td": 8,
                                                "t": 9, "g": 10, "na": 11, "dt": 12, "val_type": 20}
    lv = proto.AttrDef.ListValue
    assert (lv.VT_LIST_NONE, lv.VT_LIST_INT, lv.VT_LIST_DATA_TYPE) == (0, 2, 10)
    assert numbers(proto.AttrDef.ListListInt) == {"list_list_i": 1}
    assert numbers(proto.AttrDef.ListListInt.ListInt) == {"list_i": 1}
    assert numbers(proto.AttrDef.ListListFloat.ListFloat) == {"list_f": 1}
    a = proto.AttrDef(i=3)
    a.f = 1.5                                                  # oneof: setting f clears i
    assert a.WhichOneof("value") == "f" and a.i == 0


@pytest.mark.parametrize("name, value", [("DT_UNDEFINED", 0), ("DT_FLOAT", 1), ("DT_INT32", 7),
                                         ("DT_INT64", 8), ("DT_BOOL", 11), ("DT_BF16", 27),
                                         ("DT_HIFLOAT4", 41)])
def test_proto_data_type_numbering(name, value):              # §2.6 (protobuf numbering)
    assert proto.DataType.Value(name) == value


def test_task_def_fields():                                    # §3.1, §3.2
    assert numbers(proto.ModelTaskDef) == {"version": 1, "attr": 9, "task": 10, "memory_size": 11,
                                           "stream_num": 12, "event_num": 13, "weight_size": 14,
                                           "op": 15, "base_addr": 16, "weight_addr": 17,
                                           "batch_num": 18}
    t = numbers(proto.TaskDef)
    assert t["kernel"] == 20 and t["type"] == 2 and t["stream_id"] == 10
    assert (t["kernel_ex"], t["kernel_hccl"], t["memcpy_async"], t["private_def"],
            t["kernel_with_handle"], t["fusion_task"]) == (21, 25, 31, 34, 40, 53)
    assert len(t) == 35
    assert proto.TaskDef.DESCRIPTOR.fields_by_name["ops_kernel_store_ptr"].type == FD.TYPE_UINT64


def test_kernel_fields():                                      # §3.3–3.5
    k = numbers(proto.KernelDef)
    assert k["block_dim"] == 11 and k["context"] == 1 and k["so_name"] == 16
    assert (k["stub_func"], k["args"], k["kernel_name"], k["args_info"], k["block_dim_offset"]) == \
        (10, 13, 17, 20, 22)
    assert len(k) == 15
    h = numbers(proto.KernelDefWithHandle)
    assert (h["handle"], h["dev_func"], h["block_dim"], h["node_info"], h["block_dim_offset"]) == \
        (10, 11, 12, 17, 20)
    c = numbers(proto.KernelContext)
    assert c == {"kernel_type": 1, "op_id": 2, "kernel_func_id": 3, "op_index": 4,
                 "is_flowtable": 5, "args_offset": 6, "args_count": 7, "origin_op_index": 8,
                 "args_format": 10}
    a = proto.ArgsInfo.DESCRIPTOR.fields_by_name
    assert a["start_index"].type == FD.TYPE_INT32
    assert (proto.ArgsInfo.OUTPUT, proto.ArgsInfo.SECONDARY_ADDR) == (1, 1)


def test_other_task_messages():                                # §3.6
    assert numbers(proto.KernelExDef) == {"flags": 1, "op_index": 4, "args_size": 12, "args": 13,
                                          "task_info": 14, "task_info_size": 15,
                                          "kernel_ext_info": 16, "kernel_ext_info_size": 17}
    assert numbers(proto.KernelHcclDef)["aiv_block_dim"] == 12
    assert numbers(proto.MemcpyAsyncDef)["args_format"] == 7
    assert numbers(proto.StreamSwitchNDef)["true_stream_id"] == 4
    assert proto.StreamSwitchDef.DESCRIPTOR.fields_by_name["value"].type == FD.TYPE_INT64
    assert numbers(proto.LabelGotoExDef) == numbers(proto.LabelSetDef) == \
        {"op_index": 1, "label_id": 2, "model_id": 3}
    assert numbers(proto.LabelSwitchByIndexDef) == {"op_index": 1, "label_max": 2}


def test_wire_bytes_by_hand():
    assert proto.KernelDef(block_dim=4).SerializeToString() == b"\x58\x04"      # tag 11<<3|0
    t = proto.TaskDef(type=0, kernel=proto.KernelDef(block_dim=1))
    assert t.SerializeToString() == b"\xa2\x01\x02\x58\x01"                     # tag 20<<3|2
    assert proto.ShapeDef(dim=[1, 2]).SerializeToString() == b"\x0a\x02\x01\x02"   # packed


def test_model_task_def_round_trip():
    m = proto.ModelTaskDef(version="1.0", memory_size=4096, stream_num=1, weight_size=64)
    m.attr["kernel_cache"] = "on"
    t = m.task.add(id=0, type=0, stream_id=0)
    k = t.kernel
    k.context.kernel_type = 2
    k.context.op_index = 7
    k.context.args_format = "{i0}{o0}"
    k.context.origin_op_index.extend([7, 8])
    k.stub_func, k.kernel_name, k.block_dim = "add_stub", "add_kernel", 8
    k.args = bytes(range(24))
    k.args_size = 24
    k.args_info.add(arg_type=proto.ArgsInfo.OUTPUT, start_index=-1, size=1)
    m.task.add(id=1, type=19)                                    # END_GRAPH
    data = m.SerializeToString()
    back = proto.ModelTaskDef.FromString(data)
    assert back == m and back.SerializeToString() == data
    assert back.task[0].HasField("kernel") and not back.task[1].HasField("kernel")
    assert back.task[0].kernel.args_info[0].start_index == -1
    assert dict(back.attr) == {"kernel_cache": "on"}


def test_model_def_round_trip():
    md = proto.ModelDef(name="m", version=1)
    g = md.graph.add(name="main", input=["x:0"], output=["add:0"])
    op = g.op.add(name="add", type="Add", input=["x:0", "x:0"], id=1, input_i=[0, 0], output_i=[64])
    desc = op.input_desc.add(dtype=proto.DataType.Value("DT_FLOAT"), layout="ND", size=64)
    desc.shape.dim.extend([4, 4])
    desc.attr["origin_format"].s = b"ND"
    op.attr["_kernelname"].s = b"add_kernel"
    op.attr["axes"].list.i.extend([0, 1])
    op.attr["axes"].list.val_type = proto.AttrDef.ListValue.VT_LIST_INT
    op.attr["nested"].list_list_int.list_list_i.add(list_i=[1, 2])
    op.attr["fn"].func.name = "f"
    op.attr["fn"].func.attr["k"].b = True
    md.attr["soc_version"].s = b"cpu"
    data = md.SerializeToString()
    back = proto.ModelDef.FromString(data)
    assert back == md
    assert back.graph[0].op[0].attr["axes"].WhichOneof("value") == "list"
    assert back.graph[0].op[0].input_desc[0].shape.dim == [4, 4]


def test_opaque_task_bodies_survive_round_trip():
    # TaskDef.ffts_task (41) holding {1: 7}: a placeholder message keeps it as an unknown field.
    raw = b"\x10\x1d" + b"\xca\x02\x02\x08\x07"        # type=29, field 41 len 2 {08 07}
    t = proto.TaskDef.FromString(raw)
    assert t.type == 29 and t.HasField("ffts_task")
    assert t.SerializeToString() == raw
