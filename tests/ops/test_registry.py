"""Meta-tests of the op registry: every registered op has a test; unknown ops are named."""
import importlib
import pkgutil
from pathlib import Path

import pytest

import om2gen
from om2gen.ir.graph import Node
from om2gen.ops import registry


def covered_ops() -> set[str]:
    ops = set()
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        mod = importlib.import_module(info.name)
        ops |= getattr(mod, "COVERS", set())
    return ops


def test_every_registered_op_has_a_test():
    registered = {t for (_, t) in registry.registered()}
    missing = registered - covered_ops()
    assert not missing, f"ops without a test in tests/ops: {sorted(missing)}"


def test_unknown_op_error_names_node_type_and_opset():
    with pytest.raises(om2gen.UnsupportedOpError) as e:
        registry.lookup(Node("my_node", "FancyOp", [], [], opset=17))
    msg = str(e.value)
    assert "my_node" in msg and "FancyOp" in msg and "opset 17" in msg and "Conv" in msg


def test_versioned_lookup_picks_the_newest_applicable():
    old = registry.lookup(Node("s", "Softmax", [], [], opset=11))
    new = registry.lookup(Node("s", "Softmax", [], [], opset=13))
    assert old.since == 1 and new.since == 13
