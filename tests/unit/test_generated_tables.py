"""The generated tables name what they hold: kOpDefs fields, tiling words, fused ops (issue 13)."""
import re

from om2gen.codegen import model_cpp
from om2gen.ir import model_tables
from om2gen.resources import include_dir


def _struct_fields(header: str, name: str) -> list[str]:
    body = re.search(r"struct %s \{(.*?)\n\};" % name, header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [re.search(r"(\w+)\s*;", d).group(1) for d in body.split(";")[:-1] for d in [d + ";"]]


def test_op_def_field_names_are_the_headers():
    header = (include_dir() / "om2" / "om2_model_tables.h").read_text()
    assert tuple(_struct_fields(header, "Om2OpDef")) == model_tables.OP_DEF_FIELDS == model_cpp.OP_DEF_FIELDS


def test_tiling_rows_name_every_word():
    rows = model_cpp._tiling_rows(list(range(8)), [f"f{i}" for i in range(8)])
    assert [r["names"] for r in rows] == ["f0=0 f1=1 f2=2 f3=3 f4=4 f5=5", "f6=6 f7=7"]
    assert len({len(r["words"]) for r in rows}) == 1      # the names line up


def test_tiling_fields_are_read_from_the_kernel_source():
    from om2gen.codegen.kernels import tiling_fields
    assert tiling_fields("typedef struct {\n    int64_t N;\n    int64_t tile_m;\n} TilingData;") == ["N", "tile_m"]
    assert tiling_fields("/* no tiling */") == []


def _graph_with(*nodes):
    from om2gen.ir.graph import Graph
    g = Graph("g", {}, list(nodes), [], [], {"": 17})
    g.note_source_ops()
    return g


def test_task_names_list_every_fused_op():
    from om2gen.ir.graph import Node
    from om2gen.lower.tasks import task_name
    conv, bn, add, relu = (Node("c", "Conv", [], []), Node("bn", "BatchNormalization", [], []),
                           Node("a", "Add", [], []), Node("r", "Relu", [], []))
    g = _graph_with(conv, bn, add, relu)
    assert task_name(Node("c", "Conv", [], []), "Conv", g) == "Conv"      # nothing fused
    conv.fused_from = ["c", "bn", "a", "r"]                                # what passes/rewrite.py records
    assert task_name(conv, "Conv", g) == "Conv_BatchNormalization_Add_Relu"
    group = Node("r::fused2", "FusedElementwise", [], [], {}, "om2gen", fused_from=["a", "r"])
    assert task_name(group, "Fused_Add_Relu", g) == "Fused_Add_Relu"
    ln = Node("r::layernorm", "LayerNormalization", [], [], fused_from=["a", "bn", "r"])
    assert task_name(ln, "LayerNormalization", g) == "LayerNormalization_Add_BatchNormalization_Relu"


def _lowered(nodes, inits):
    """The program of a small float32[1,8,16] -> [1,8,16] model, lowered (no compiler needed)."""
    from onnx import TensorProto, helper

    from om2gen.codegen import kernels
    from om2gen.frontend.onnx_import import import_onnx
    from om2gen.ir.program import LowerContext
    from om2gen.lower.lowering import lower_graph
    from om2gen.passes import optimize
    from om2gen.toolchain import targets
    from om2gen.version import GENERATOR
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8, 16]) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    graph = import_onnx(model)
    target = targets.default_target()
    ctx = LowerContext(target, GENERATOR, kernels.render)
    optimize.run(graph, ctx)
    return lower_graph(graph, ctx)


def test_fused_groups_and_patterns_are_labelled_with_every_op():
    import numpy as np
    from onnx import TensorProto, helper
    mk = helper.make_node
    nodes = [mk("Mul", ["x", "c"], ["a"], name="mul"), mk("Add", ["a", "x"], ["b"], name="add"),
             mk("Relu", ["b"], ["r"], name="relu"),
             # a LayerNormalization written out, x - mean computed once and read twice
             mk("ReduceMean", ["r"], ["m"], axes=[-1], name="rm"), mk("Sub", ["r", "m"], ["d"], name="sub"),
             mk("Mul", ["d", "d"], ["d2"], name="sq"), mk("ReduceMean", ["d2"], ["v"], axes=[-1], name="rm2"),
             mk("Add", ["v", "eps"], ["ve"], name="add_eps"), mk("Sqrt", ["ve"], ["s"], name="sqrt"),
             mk("Div", ["d", "s"], ["y"], name="div")]
    inits = [helper.make_tensor("c", TensorProto.FLOAT, [16], np.ones(16, np.float32)),
             helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])]
    labels = [t.label for t in _lowered(nodes, inits).tasks]
    assert labels == ["k000_Fused_Mul_Add_Relu",
                      "k001_LayerNormalization_ReduceMean_Sub_Mul_ReduceMean_Add_Sqrt_Div"]


def test_memory_plan_of_a_lowered_program():
    import numpy as np
    from onnx import TensorProto, helper
    mk = helper.make_node
    nodes = [mk("Relu", ["x"], ["a"], name="relu"), mk("Reshape", ["a", "shape"], ["v"], name="reshape"),
             mk("Softmax", ["v"], ["s"], axis=-1, name="softmax"), mk("Reshape", ["s", "back"], ["w"], name="back"),
             mk("Sigmoid", ["w"], ["y"], name="sigmoid")]
    inits = [helper.make_tensor("shape", TensorProto.INT64, [2], np.array([8, 16])),
             helper.make_tensor("back", TensorProto.INT64, [3], np.array([1, 8, 16]))]
    p = _lowered(nodes, inits)
    assert [(v.name, v.source, v.root, v.node) for v in p.views] == [("v", "a", "a", "reshape"), ("w", "s", "s", "back")]
    by_name = {b.name: b for b in p.buffers}
    assert {v.place.offset for v in p.views} == {by_name["a"].offset, by_name["s"].offset}
    for i, a in enumerate(p.buffers):
        assert 0 <= a.offset and a.offset + a.size <= p.work_size and a.first_task <= a.last_task < len(p.tasks)
        for b in p.buffers[i + 1:]:
            live = a.first_task <= b.last_task and b.first_task <= a.last_task
            assert not (live and a.offset < b.offset + b.size and b.offset < a.offset + a.size), (a, b)
    assert "1 value is a view" not in model_cpp._memory_summary(p)[0] and "2 values are views" in model_cpp._memory_summary(p)[0]
