"""How large a tensor om2gen compiles. Every value the frontend makes (a model input, an
initializer, a node's output, folded or not) is checked here in exact integers before anything
else computes with its size: numpy's int64 products wrap (dims of 2^62 gave a byte size of 0, and
such a model compiled and "ran"), and a tensor too big to compile right must be refused at
compile time, naming the node, not fail in the C compiler or when the archive is loaded.

The limit is MAX_TENSOR_ELEMENTS per tensor ($OM2GEN_MAX_TENSOR_ELEMENTS changes it): the kernel
templates multiply a tensor's dims as C int literals in places (a MaxPool over [1,8,16,2^27]
does not build: "integer overflow in expression of type 'int'"), so 2^31 - 1 elements is what
every kernel indexes correctly. That is 8 GiB of float32, above the largest tensors of the models
om2gen compiles (an LLM's embedding table: 128256 x 4096, about 2^29 elements).
"""
from __future__ import annotations

import math
import os

from ..advice import shape_option
from ..errors import ShapeError
from ..ir import symbolic

MAX_TENSOR_ELEMENTS = (1 << 31) - 1
ENV = "OM2GEN_MAX_TENSOR_ELEMENTS"
_HIGHEST = 1 << 48   # a setting above this would let element and byte counts near int64's range


def max_tensor_elements() -> int:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return MAX_TENSOR_ELEMENTS
    try:
        value = int(text, 0)
    except ValueError:
        value = 0
    if not 0 < value <= _HIGHEST:
        raise ShapeError(f"{ENV}={text!r} is not a tensor size om2gen takes: give the most elements a tensor may "
                         f"have, from 1 to 2^48 (the default is {MAX_TENSOR_ELEMENTS}, 2^31 - 1)")
    return value


def size_text(nbytes: int) -> str:
    """1.5 GiB, 4 TiB, 2^68 bytes: what a reader takes in at a glance."""
    if nbytes >= 1 << 70:
        return f"about 2^{nbytes.bit_length() - 1} bytes"
    for unit, shift in (("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):.3g} {unit}"
    return f"{nbytes} bytes"


def _shown(v) -> str:
    """An input of the node as dtype[shape], with its values when it is a small constant (a shape)."""
    if v is None:
        return "(absent)"
    if v.is_const and v.size <= 8:
        return f"{v.describe()} = {v.const.reshape(-1).tolist()}"
    return v.describe()


def _problem(shape, itemsize: int) -> str | None:
    """What is wrong with a tensor of this shape, or None. A dynamic dim (an Expr) is checked at
    the largest value its range gives; an unbounded one is checked at run time."""
    bounded = []
    for i, d in enumerate(shape):
        if isinstance(d, symbolic.Expr):
            lo, _ = symbolic.bounds(d)
            if lo < 0:
                return (f"dim {i} is {d}, which is negative for the smallest sizes of its range: give the "
                        f"dynamic dims a range that keeps it >= 0 ({shape_option()} with lo~hi)")
            bounded.append(symbolic.upper_bound(d))
        elif not isinstance(d, int) or d < 0:
            return f"dim {i} is {d}, and a dim must be an integer >= 0"
        else:
            bounded.append(d)
    if None in bounded:
        return None
    shape = bounded
    count, limit = math.prod(shape), max_tensor_elements()
    if count > limit:
        return (f"{_count_text(count)} elements ({size_text(count * itemsize)}), more than the {_count_text(limit)} "
                f"per tensor om2gen compiles (its kernels index with 32-bit arithmetic in places; ${ENV} raises "
                "the limit, at the risk of kernels that do not build)")
    longest = max(shape, default=0)
    if longest > limit:   # a tensor that a dim of 0 makes empty still has its other dims in the code
        return (f"dim {list(shape).index(longest)} is {_count_text(longest)}, longer than the {_count_text(limit)} "
                "elements per tensor om2gen compiles")
    return None


def _count_text(n: int) -> str:
    """2^40 for powers of two and huge counts (about 2^73), else the number."""
    if n & (n - 1) == 0 and n >= 1 << 20:
        return f"2^{n.bit_length() - 1}"
    if (n + 1) & n == 0 and n >= 1 << 20:
        return f"2^{n.bit_length()} - 1"
    return f"about 2^{n.bit_length() - 1}" if n >= 1 << 63 else str(n)


def _text(dtype, shape) -> str:
    return f"{dtype.name}[{','.join(map(str, shape))}]"


def check_input(name: str, shape: tuple, dtype, pinned: bool) -> None:
    """A run-time model input, with the dims the model declares or the user pinned."""
    problem = _problem(shape, dtype.itemsize)
    if problem is None:
        return
    if pinned:
        raise ShapeError(f"{shape_option(name, shape)} makes input {name!r} {_text(dtype, shape)}: {problem}; "
                         f"pin a shape that fits")
    raise ShapeError(f"the model declares input {name!r} as {_text(dtype, shape)}: {problem}; the model file is "
                     "damaged or was written wrongly: re-export it")


def check_initializer(name: str, shape: tuple, dtype) -> None:
    problem = _problem(tuple(int(d) for d in shape), dtype.itemsize)
    if problem is not None:
        raise ShapeError(f"initializer {name!r} is {_text(dtype, shape)}: {problem}; the model file is damaged or "
                         "was written wrongly: re-export it")


def check_outputs(node, ins, outs) -> None:
    """The values a node produces (inferred or folded)."""
    for name, v in zip(node.outputs, outs):
        if not name:
            continue
        problem = _problem(tuple(v.shape), v.dtype.itemsize)
        if problem is not None:
            given = ", ".join(map(_shown, ins)) or "none"
            raise ShapeError(f"node {node.name!r} ({node.op_type}): output {name!r} would be "
                             f"{_text(v.dtype, v.shape)}: {problem}; its inputs: {given}. Check the node's "
                             f"attributes and shape inputs, and the shapes pinned with {shape_option()}")
