"""What codegen/kernels.py gives a kernel template besides its parameters, and the rule that
templates only place values (STYLE 3: no arithmetic in templates; issue 13)."""
import jinja2
from jinja2 import nodes

from om2gen.codegen import kernels
from om2gen.codegen import render as jinja
from om2gen.ir.program import KernelCall
from om2gen.resources import templates_dir

# Arithmetic still in a template, with why: (template, operator) -> reason. Add none: compute the
# value in Python and pass it in.
KNOWN = {("kernels/dwconv.c.j2", "Add"): "k.unroll + 1 vectors: DEPTHWISE_UNROLL + 1 belongs to ops/conv.py"}


def test_addresses_follow_the_args_layout():
    call = KernelCall("kernels/x.c.j2", "X", {}, ["a", "", "b"], ["y", "z"], workspace=64)
    assert kernels.addresses(call) == {"outputs": [2, 3], "workspace": 4, "tiling": 5}
    bare = KernelCall("kernels/x.c.j2", "X", {}, ["a"], ["y"])
    assert kernels.addresses(bare) == {"outputs": [1], "tiling": 2}   # no workspace: asking for one fails


def test_the_name_digest_covers_imported_templates():
    assert jinja.imported_templates("kernels/matmul.c.j2") == ("kernels/_common.j2", "kernels/_gemm.j2")
    assert jinja.imported_templates("kernels/elementwise.c.j2") == ("kernels/_common.j2",)


def test_templates_do_no_arithmetic():
    env = jinja2.Environment()
    found = set()
    for path in sorted(templates_dir().rglob("*.j2")):
        name = path.relative_to(templates_dir()).as_posix()
        ast = env.parse(path.read_text())
        for op in (nodes.Add, nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod, nodes.Pow, nodes.Neg):
            if any(True for _ in ast.find_all(op)):
                found.add((name, op.__name__))
    assert not found - set(KNOWN), f"compute these in Python and pass them in: {sorted(found - set(KNOWN))}"
