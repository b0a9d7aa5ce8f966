"""Property test: random DAGs of element-wise ops (broadcasting operands, constants, data
movement in between) compile fused to the same bits as unfused, and match ONNX Runtime."""
import numpy as np
import pytest
from fusion_check import check_fusion
from helpers import make_model
from onnx import helper

UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Erf", "Sqrt", "Floor", "Softsign", "HardSigmoid",
         "LeakyRelu", "Clip"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"]


def random_model(seed: int):
    """A random element-wise DAG over an output shape of rank 0-4: operands broadcast (inputs,
    constant tensors, scalars), some values go through a Transpose/Slice/Reshape, several are
    graph outputs. Returns (model, feeds)."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(0, 5))
    shape = tuple(int(d) for d in rng.integers(1, 6, rank))

    def sub_shape():
        keep = rng.integers(0, rank + 1)
        return tuple(d if rng.random() < 0.7 else 1 for d in shape[rank - keep:])

    feeds, consts, nodes = {}, {}, []
    pool = []   # (name, shape)
    for i in range(int(rng.integers(1, 4))):
        s = shape if i == 0 else sub_shape()
        feeds[f"in{i}"] = rng.uniform(-2, 2, s).astype(np.float32)
        pool.append((f"in{i}", s))

    def operand():
        r = rng.random()
        if r < 0.15:
            name = f"k{len(consts)}"
            consts[name] = np.array(rng.uniform(0.5, 2), np.float32)
            return name, ()
        if r < 0.25:
            name = f"k{len(consts)}"
            s = sub_shape()
            consts[name] = rng.uniform(-2, 2, s).astype(np.float32)
            return name, s
        if r < 0.7 and len(pool) > len(feeds):
            return pool[-1]   # mostly chains: the latest value
        return pool[int(rng.integers(len(pool)))]

    for j in range(int(rng.integers(3, 9))):
        out = f"v{j}"
        r = rng.random()
        if r < 0.35:
            op = UNARY[int(rng.integers(len(UNARY)))]
            x, s = operand()
            if op == "Sqrt":
                nodes.append(helper.make_node("Abs", [x], [f"{out}_abs"]))
                x = f"{out}_abs"
            attrs = {"min": -0.5, "max": 0.7} if op == "Clip" else {}
            nodes.append(helper.make_node(op, [x], [out], **attrs) if op != "Clip"
                         else helper.make_node("Clip", [x, "clip_lo", "clip_hi"], [out]))
            consts.update(clip_lo=np.array(-0.5, np.float32), clip_hi=np.array(0.7, np.float32))
        elif r < 0.8:
            op = BINARY[int(rng.integers(len(BINARY)))]
            (a, sa), (b, sb) = operand(), operand()
            if op == "Pow":
                nodes.append(helper.make_node("Pow", [a, "pow_e"], [out]))
                consts["pow_e"] = np.array(2.0, np.float32)
                s = sa
            else:
                nodes.append(helper.make_node(op, [a, b], [out]))
                s = tuple(np.broadcast_shapes(sa, sb))
        elif r < 0.9:
            (a, sa), (b, sb) = operand(), operand()
            nodes.append(helper.make_node("Greater", [a, b], [f"{out}_gt"]))
            nodes.append(helper.make_node("Where", [f"{out}_gt", a, b], [out]))
            s = tuple(np.broadcast_shapes(sa, sb))
        else:   # a copy that re-indexes, viewed back to the shape it had (so it still broadcasts)
            x, s = pool[int(rng.integers(len(pool)))]
            if len(s) >= 2:
                perm = [int(p) for p in rng.permutation(len(s))]
                nodes.append(helper.make_node("Transpose", [x], [f"{out}_t"], perm=perm))
            else:
                nodes.append(helper.make_node("Reshape", [x, "flat"], [f"{out}_t"]))
                consts["flat"] = np.array([-1], np.int64)
            consts[f"{out}_shape"] = np.array(s, np.int64)
            nodes.append(helper.make_node("Reshape", [f"{out}_t", f"{out}_shape"], [out]))
        pool.append((out, s))
    outputs = [pool[-1][0]] + [n for n, _ in pool[len(feeds):-1] if rng.random() < 0.25]
    return make_model(nodes, feeds, outputs, consts, opset=13), feeds


def _run(seed, tmp_path):
    model, feeds = random_model(seed)
    fused, plain = check_fusion(model, feeds, tmp_path)
    assert len(fused.tasks) <= len(plain.tasks)


@pytest.mark.parametrize("seed", range(6))
def test_random_elementwise_dags(seed, tmp_path):
    _run(seed, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6, 60))
def test_random_elementwise_dags_more(seed, tmp_path):
    _run(seed, tmp_path)


def test_generator_makes_fusable_models():
    """The generator is not vacuous: most of its models have element-wise chains."""
    chains = 0
    for seed in range(20):
        model, _ = random_model(seed)
        ops = [n.op_type for n in model.graph.node]
        chains += sum(op not in ("Transpose", "Reshape") for op in ops) >= 3
    assert chains >= 15

