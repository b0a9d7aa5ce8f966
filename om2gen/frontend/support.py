"""Before anything is inferred: every operator type of an ONNX model that om2gen cannot compile
(no kernel, no custom-op library providing it), named in one error with a count of nodes and
one node name each, so one compile tells the whole story. (A single such node gets the
registry's message for it.)"""
from __future__ import annotations

import onnx

from ..advice import custom_lib_option
from ..errors import UnsupportedOpError
from ..ir.graph import Node
from ..ops import registry
from ..so_in_om import custom_libraries


def _walk(graph: onnx.GraphProto, known):
    """(domain, op type, node name) of each node, and of the nodes of the subgraphs (If
    branches) of supported nodes; unnamed nodes as the importer names them."""
    for i, n in enumerate(graph.node):
        domain = n.domain if n.domain != "ai.onnx" else ""
        yield domain, n.op_type, n.name or f"{n.op_type}_{i}"
        if known(domain, n.op_type):
            for a in n.attribute:
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    yield from _walk(g, known)


def check(graph: onnx.GraphProto, opsets: dict[str, int]) -> None:
    ops = registry.registered()

    def known(domain: str, op_type: str) -> bool:
        return (domain, op_type) in ops or custom_libraries.library_for(op_type) is not None

    missing: dict[tuple[str, str], list[str]] = {}
    for domain, op_type, name in _walk(graph, known):
        if domain in registry.INTERNAL_DOMAINS:
            # its attributes are whatever a pass decided (a FusedElementwise's plan is no ONNX
            # attribute at all): no model can state them, so none may hold such a node
            raise UnsupportedOpError(f"node {name!r}: {domain}.{op_type} is in the domain of om2gen's own fused "
                                     f"operators ({domain!r}), which only its passes make while compiling; a model "
                                     "cannot contain them: export the model with the operators they fuse (om2gen "
                                     "fuses Conv + Add + Relu and the like itself)")
        if not known(domain, op_type):
            missing.setdefault((domain, op_type), []).append(name)
    if not missing:
        return
    if sum(map(len, missing.values())) == 1:   # one node: the registry's own message for it
        (domain, op_type), (name,) = next(iter(missing.items()))
        registry.lookup(Node(name, op_type, [], [], {}, domain, opsets.get(domain, 1)))
    parts = []
    for (domain, op_type), names in missing.items():
        nodes = f"{len(names)} nodes, e.g. {names[0]!r}" if len(names) > 1 else f"node {names[0]!r}"
        parts.append(f"{domain + '.' if domain else ''}{op_type} (opset {opsets.get(domain, 1)}; {nodes})")
    kinds = f"{len(parts)} operator type{'s' if len(parts) > 1 else ''}"
    searched = custom_libraries.searched()
    libs = (f"none of the custom-op libraries given provides them (searched: {searched}); add the library that "
            f"registers them (REG_AUTO_MAPPING_OP) with {custom_lib_option()} or $OM2GEN_CUSTOM_OP_PATH"
            if searched else f"a custom-op library ({custom_lib_option()}) can provide them")
    raise UnsupportedOpError(f"the model uses {kinds} om2gen does not support: {', '.join(parts)}; {libs}; "
                             f"supported operators: {', '.join(registry.supported_ops())}")
