"""MODEL_DEF attrs (ge.proto.AttrDef): made from Python values, and read with their kind checked
(a value of another kind is a corrupt model, an ArchiveError naming the attr and what it holds)."""
from __future__ import annotations

from ...errors import ArchiveError
from . import proto

# ge.proto.AttrDef's value kinds (its oneof "value"), as error messages name them
_ATTR_KINDS = {"s": "a string", "i": "an int", "f": "a float", "b": "a bool", "bt": "bytes", "list": "a list",
               "func": "a function", "td": "a tensor description", "t": "a tensor", "g": "a graph",
               "list_list_int": "a list of int lists", "list_list_float": "a list of float lists",
               "dt": "a data type", "expression": "an expression"}


def attr_kind(attr) -> str:
    """What a ge.proto.AttrDef holds, for messages: "a string (s)", "empty (no value)"."""
    which = attr.WhichOneof("value")
    return f"{_ATTR_KINDS.get(which, 'a ' + str(which))} ({which})" if which else "empty (no value)"


def model_def_attr(model_def, key: str, kind: str, where: str):
    """The value of MODEL_DEF attr `key` (present), which must be of `kind` ("s", "i"): any other
    kind is a corrupt model, an ArchiveError naming the attr and what it holds."""
    a = model_def.attr[key]
    if a.WhichOneof("value") != kind:
        raise ArchiveError(f"{where}: MODEL_DEF attr {key} is {attr_kind(a)}, not {_ATTR_KINDS[kind]} ({kind}); "
                           f"the model is corrupt")
    return getattr(a, kind)


def flag_from_model_def(model_def, where: str) -> int:
    """MODEL_DEF's so_in_om_flag: 0 if absent, else it must be an int attr (types_of checks its bits)."""
    if "so_in_om_flag" not in model_def.attr:
        return 0
    return model_def_attr(model_def, "so_in_om_flag", "i", where)


def attr_s(text: str):
    return proto.AttrDef(s=text.encode("utf-8"))


def attr_i(v: int):
    return proto.AttrDef(i=int(v))


def attr_list_i(values):
    return proto.AttrDef(list=proto.AttrDef.ListValue(i=[int(v) for v in values], val_type=2))


def attr_list_s(values):
    return proto.AttrDef(list=proto.AttrDef.ListValue(s=[v.encode("utf-8") for v in values], val_type=1))


def attr_of(v):
    """A plain value (bool, int, float, str, or a list of ints, floats or strs: a graph_json
    attribute) as an AttrDef, or None if it has no plain GE form."""
    if isinstance(v, bool):
        return proto.AttrDef(b=v)
    if isinstance(v, int):
        return attr_i(v)
    if isinstance(v, float):
        return proto.AttrDef(f=v)
    if isinstance(v, str):
        return attr_s(v)
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return attr_list_i(v)
    if isinstance(v, list) and v and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return proto.AttrDef(list=proto.AttrDef.ListValue(f=[float(x) for x in v], val_type=3))
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return attr_list_s(v)
    return None
