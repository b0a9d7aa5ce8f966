"""The op registry: every ONNX operator om2gen compiles is one class in om2gen/ops/.

An op declares its ONNX name, domain, `since` opset and attribute defaults, and implements
infer() (output dtypes and static shapes) and lower() (a kernel call or an alias). Ops register
themselves with @register; nothing else needs editing to add one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .. import advice
from ..errors import CompileError, ModelError, UnsupportedOpError
from ..ir.graph import Node, Value

_REGISTRY: dict[tuple[str, str], list[type["Op"]]] = {}

# The int attributes the ONNX spec defines as flags (0 or 1). Other values are malformed: ONNX
# Runtime reads some as `!= 0` and others as `== 1`, so no reading of them is the right one.
FLAG_ATTRS = frozenset({
    "keepdims", "noop_with_empty_axes", "select_last_index", "largest", "sorted", "transA", "transB", "ceil_mode",
    "count_include_pad", "allowzero", "exclusive", "reverse", "detect_negative", "detect_positive", "fmod",
    "training_mode", "is_test", "spatial", "antialias", "exclude_outside", "input_forget", "layout",
    "storage_order", "upper", "broadcast"})


class Op:
    op_type: ClassVar[str]
    domain: ClassVar[str] = ""
    since: ClassVar[int] = 1
    attrs: ClassVar[dict[str, Any]] = {}   # name -> default (spec defaults); REQUIRED marks mandatory
    # infer() and lower() take a dynamic model's shapes (ir/symbolic.py Exprs, docs/dynamic-shapes.md):
    # set by an op once its code is written for them; a dynamic model with another op is refused
    dynamic_shapes: ClassVar[bool] = False

    def attr(self, node: Node, name: str):
        if name in node.attrs:
            value = node.attrs[name]
            if name in FLAG_ATTRS and not (isinstance(value, int) and value in (0, 1)):
                raise ModelError(f"node {node.name!r} ({node.op_type}): attribute {name} is {value!r}; ONNX defines "
                                 f"it as a flag, 0 or 1 (runtimes disagree on other values): fix the attribute or "
                                 "re-export the model")
            return value
        default = self.attrs[name]
        if default is REQUIRED:
            raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): required attribute {name!r} is missing")
        return default

    def infer(self, node: Node, ins: list[Value | None]) -> list[Value]:
        raise NotImplementedError

    def lower(self, node: Node, ins: list[Value | None], outs: list[Value], ctx):
        raise NotImplementedError


@dataclass
class Expansion:
    """What an op's infer_regions() may return instead of its outputs: nodes that take the node's
    place, inferred in its stead (as expand() gives them when it can decide before any inference).
    A Loop whose body turns out to need its iteration number at compile time is unrolled so."""
    nodes: list[Node]


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()


def _no_custom_ops(op_type: str) -> "Op":
    raise AssertionError("ops/custom.py registers the custom-op class when it is imported")


_custom_op = _no_custom_ops   # op type -> the Op for a custom-op library's operator (ops/custom.py)


def register_custom(factory) -> None:
    """ops/custom.py: how lookup() makes the Op of an op type a custom-op library registers."""
    global _custom_op
    _custom_op = factory


def register(*op_types: str, since: int = 1, domain: str = ""):
    """Class decorator: registers the class for each op type, valid from opset `since`."""
    def wrap(cls):
        for op_type in op_types:
            sub = type(f"{cls.__name__}_{op_type}", (cls,), {"op_type": op_type, "since": since, "domain": domain})
            versions = _REGISTRY.setdefault((domain, op_type), [])
            versions.append(sub)
            versions.sort(key=lambda c: c.since)
        return cls
    return wrap


# The domain of om2gen's own operators: the fused ones its passes make (om2gen.FusedElementwise,
# om2gen.FusedConv...). Internal domains are never listed to users as supported, and a model's
# node in one is refused (frontend/support.py): only a pass can make such a node.
OM2GEN_DOMAIN = "om2gen"
INTERNAL_DOMAINS = frozenset({OM2GEN_DOMAIN})


def supported_ops() -> list[str]:
    """The operators a user's model may use: every registered op outside INTERNAL_DOMAINS."""
    _load_all()
    return sorted(f"{t}" if not d else f"{d}.{t}" for d, t in _REGISTRY if d not in INTERNAL_DOMAINS)


def registered() -> dict[tuple[str, str], list[type[Op]]]:
    _load_all()
    return _REGISTRY


def lookup(node: Node) -> Op:
    _load_all()
    versions = _REGISTRY.get((node.domain, node.op_type))
    if not versions:
        from ..so_in_om import custom_libraries
        if custom_libraries.library_for(node.op_type) is not None:
            return _custom_op(node.op_type)
        where = f"{node.domain}." if node.domain else ""
        searched = custom_libraries.searched()
        if searched:   # libraries were given: say which, and what they do provide
            raise UnsupportedOpError(
                f"node {node.name!r}: operator {where}{node.op_type} is in none of the custom-op libraries given "
                f"(searched: {searched}) and is not an operator om2gen supports; add the library that registers "
                f"{node.op_type} (REG_AUTO_MAPPING_OP) with {advice.custom_lib_option()} or $OM2GEN_CUSTOM_OP_PATH, or check "
                f"the node's op type. om2gen's operators: {', '.join(supported_ops())}")
        raise UnsupportedOpError(
            f"node {node.name!r}: operator {where}{node.op_type} (opset {node.opset}) is not supported by om2gen; "
            f"supported operators: {', '.join(supported_ops())}; a custom-op library "
            f"({advice.custom_lib_option()}) can provide it")
    usable = [v for v in versions if v.since <= node.opset]
    if not usable:
        raise UnsupportedOpError(
            f"node {node.name!r}: {node.op_type} at opset {node.opset} is older than om2gen supports "
            f"(from opset {versions[0].since}); re-export the model with a newer opset")
    op = usable[-1]()
    if node.domain in INTERNAL_DOMAINS:
        # a pass made the node (frontend/support.py refuses them in a model): it holds what its op
        # declares and nothing else, so that no attribute travels on an op that ignores it
        unknown = sorted(node.attrs.keys() - op.attrs.keys())
        if unknown:
            raise CompileError(f"node {node.name!r} ({node.domain}.{node.op_type}) has attributes {unknown} that "
                               f"{node.op_type} does not declare; an om2gen bug: report it (--fusion off compiles "
                               "the model without fusion meanwhile)")
    for name in FLAG_ATTRS & node.attrs.keys() & op.attrs.keys():   # checked even where the op ignores the flag
        op.attr(node, name)
    return op


_loaded = False


def _load_all() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import importlib
        import pkgutil

        from .. import ops
        for info in pkgutil.iter_modules(ops.__path__):
            if info.name not in ("registry", "common"):
                importlib.import_module(f"{ops.__name__}.{info.name}")
