"""One operator's description as `om2gen compile-op` takes it: operands (NAME:DTYPE:SHAPE run-time
inputs, NAME:DTYPE:SHAPE=FILE.npy / =V0,V1,... constants) and attributes ('K=V' / 'K:TYPE=V'
texts or Python values), typed by the operator's ONNX schema where it has one. Every malformed
text is a ModelError naming the argument and the form it should have."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import defs, helper, numpy_helper

from ..errors import ModelError
from ..ir import dtypes

INPUT_FORM = "NAME:DTYPE:SHAPE (e.g. x:float32:1,3,224,224; an empty SHAPE is a scalar)"
CONST_FORM = "NAME:DTYPE:SHAPE=FILE.npy, NAME:DTYPE:SHAPE=V0,V1,... or NAME=FILE.npy"
ATTR_FORM = "K=V or K:TYPE=V (TYPE: int, float, string, ints, floats, strings, bool, tensor)"

A = defs.OpSchema.AttrType
_KINDS = {"int": A.INT, "float": A.FLOAT, "string": A.STRING, "str": A.STRING, "ints": A.INTS,
          "floats": A.FLOATS, "strings": A.STRINGS, "tensor": A.TENSOR, "bool": "bool"}


@dataclass(frozen=True)
class Operand:
    """One input of the operator: a run-time model input, or a constant when `value` is set."""
    name: str
    dtype: dtypes.DType
    shape: tuple[int, ...]
    value: np.ndarray | None = None

    @property
    def is_const(self) -> bool:
        return self.value is not None


# --------------------------------------------------------------------------------------------
# operand and attribute texts (the CLI's --input / --const / --attr)

def parse_input(text: str, what: str = "--input") -> Operand:
    if "=" in text:
        raise ModelError(f"{what} {text!r}: expected {INPUT_FORM}; a constant operand is given with "
                         f"--const {CONST_FORM}")
    name, dt, shape = _spec(text, what, INPUT_FORM)
    return Operand(name, dt, shape)


def parse_const(text: str, what: str = "--const") -> Operand:
    spec, sep, source = text.partition("=")
    if not sep or not spec or not source:
        raise ModelError(f"{what} {text!r}: expected {CONST_FORM}")
    if ":" not in spec:   # NAME=FILE.npy: dtype and shape come from the file
        arr = _load_npy(source, what, text)
        return Operand(spec, _np_dtype(arr.dtype, what, text), tuple(arr.shape), arr)
    name, dt, shape = _spec(spec, what, CONST_FORM, text)
    if source.endswith(".npy") or Path(source).is_file():
        arr = _load_npy(source, what, text)
        if tuple(arr.shape) != shape:
            raise ModelError(f"{what} {text!r}: {source} holds shape {list(arr.shape)}, not {list(shape)}")
        if not np.can_cast(arr.dtype, dt.np, "same_kind"):
            raise ModelError(f"{what} {text!r}: {source} holds {arr.dtype.name}, which does not convert to {dt.name}")
    else:
        arr = _numbers(source, dt, shape, what, text)
    return Operand(name, dt, shape, np.ascontiguousarray(arr, dtype=dt.np))


def parse_operands(items) -> list[Operand | None]:
    """compile_op's `inputs` (texts, tuples, Operands, None for an absent input) → Operands."""
    out = []
    for i, item in enumerate(items or []):
        if item is None or isinstance(item, Operand):
            out.append(item)
        elif isinstance(item, str):
            out.append(parse_const(item, "const") if "=" in item else parse_input(item, "input"))
        elif isinstance(item, tuple) and len(item) == 2:
            arr = np.asarray(item[1])
            out.append(Operand(str(item[0]), _np_dtype(arr.dtype, "const", str(item[0])), tuple(arr.shape),
                               np.ascontiguousarray(arr)))
        elif isinstance(item, tuple) and len(item) == 3:
            name, dtype, shape = item
            out.append(Operand(str(name), _np_dtype(dtype, "input", str(name)), tuple(int(d) for d in shape)))
        else:
            raise ModelError(f"input {i}: {item!r} is not an operand; give 'NAME:DTYPE:SHAPE', "
                             "'NAME:DTYPE:SHAPE=V0,V1,...', (name, array), (name, dtype, shape) or None (absent)")
    while out and out[-1] is None:
        out.pop()
    names = [o.name for o in out if o is not None]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ModelError(f"operand name(s) {', '.join(dup)} given twice; every input needs its own name")
    if not any(o is not None and not o.is_const for o in out):
        raise ModelError("every operand is a constant (or there is none), so the operator would be folded at "
                         "compile time; give at least one run-time input with --input NAME:DTYPE:SHAPE")
    return out


def parse_attr(text: str, what: str = "--attr") -> tuple[str, str | None, str]:
    """'K=V' / 'K:TYPE=V' → (K, TYPE or None, V); V stays text until the op's schema types it."""
    key, sep, raw = text.partition("=")
    name, colon, kind = key.partition(":")
    if not sep or not name.strip():
        raise ModelError(f"{what} {text!r}: expected {ATTR_FORM}")
    kind = kind.strip().lower() if colon else None
    if kind is not None and kind not in _KINDS:
        raise ModelError(f"{what} {text!r}: unknown attribute type {kind!r}; expected {ATTR_FORM}")
    return name.strip(), kind, raw


def _spec(text: str, what: str, form: str, whole: str | None = None) -> tuple[str, dtypes.DType, tuple[int, ...]]:
    whole = whole if whole is not None else text
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise ModelError(f"{what} {whole!r}: expected {form}")
    name, dtype_name, dims = parts
    dt = dtypes.BY_NAME.get(dtype_name.strip())
    if dt is None:
        raise ModelError(f"{what} {whole!r}: unknown dtype {dtype_name!r}{did_you_mean(dtype_name, dtypes.BY_NAME)}; "
                         f"om2gen's dtypes: {', '.join(dtypes.BY_NAME)}")
    try:
        shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
    except ValueError:
        raise ModelError(f"{what} {whole!r}: SHAPE must be integers separated by commas (e.g. 1,3,224,224), "
                         f"got {dims!r}") from None
    dynamic = form == INPUT_FORM   # a run-time input's dim may be -1: a gear option decides it
    if any(d < (-1 if dynamic else 0) for d in shape):
        allowed = ">= 0, or -1 where a gear option (--dynamic-batch-size, ...) decides" if dynamic else ">= 0"
        raise ModelError(f"{what} {whole!r}: dims must be {allowed}, got {list(shape)}")
    return name, dt, shape


def _load_npy(source: str, what: str, text: str) -> np.ndarray:
    try:
        return np.load(source, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{what} {text!r}: cannot read {source} as a .npy array ({exc})") from None


def _np_dtype(dtype, what: str, text: str) -> dtypes.DType:
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    dt = dtypes.BY_NAME.get(name)
    if dt is None:
        raise ModelError(f"{what} {text!r}: dtype {name} is not one of om2gen's ({', '.join(dtypes.BY_NAME)})")
    return dt


def _numbers(text: str, dt: dtypes.DType, shape, what: str, whole: str) -> np.ndarray:
    items = [t.strip() for t in text.split(",")]
    try:
        if dt.name == "bool":
            values = [{"true": True, "false": False, "1": True, "0": False}[t.lower()] for t in items]
        elif dt.np.kind in "iu":
            values = [int(t) for t in items]
        else:
            values = [float(t) for t in items]
        arr = np.array(values, dtype=dt.np)
    except (KeyError, ValueError, OverflowError):
        raise ModelError(f"{what} {whole!r}: the values must be {dt.name} numbers separated by commas "
                         "(or name a .npy file)") from None
    count = int(np.prod(shape, dtype=np.int64))
    if arr.size != count:
        raise ModelError(f"{what} {whole!r}: {arr.size} value(s) given, shape {list(shape)} needs {count}")
    return arr.reshape(shape)


def _text_value(raw: str, kind, where: str):
    """An attribute text as a value of `kind` (an AttrType, "bool", or None: guess from the text)."""
    if kind is None:
        return _guess(raw)
    parts = [t.strip() for t in raw.split(",")] if raw.strip() else []
    try:
        if kind == "bool":
            return {"true": True, "false": False, "1": True, "0": False}[raw.strip().lower()]
        if kind == A.INT:
            return int(raw)
        if kind == A.FLOAT:
            return float(raw)
        if kind == A.STRING:
            return raw
        if kind == A.INTS:
            return [int(t) for t in parts]
        if kind == A.FLOATS:
            return [float(t) for t in parts]
        if kind == A.STRINGS:
            return [t for t in raw.split(",")] if raw else []
        if kind == A.TENSOR:
            dtype_name, colon, values = raw.partition(":")
            dt = dtypes.BY_NAME.get(dtype_name.strip())
            if not colon or dt is None:
                raise ValueError
            return _numbers(values, dt, (len(values.split(",")),), where, raw)
    except (KeyError, ValueError, ModelError):
        pass
    example = {A.INT: "1", A.FLOAT: "0.5", A.INTS: "1,2", A.FLOATS: "0.5,1", A.TENSOR: "float32:0.5",
               "bool": "true"}.get(kind, "...")
    raise ModelError(f"{where}: {raw!r} is not {_kind_name(kind)} (e.g. {example})")


def _guess(raw: str):
    text = raw.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    if "," in text:
        parts = [t.strip() for t in text.split(",")]
        for parse in (int, float):
            try:
                return [parse(t) for t in parts]
            except ValueError:
                pass
        return parts
    return raw


def _kind_name(kind) -> str:
    return kind if isinstance(kind, str) else kind.name


# --------------------------------------------------------------------------------------------
# attributes against the op's schema

def typed_attributes(op_type: str, attrs, schema) -> tuple[dict, dict]:
    """attrs (a mapping of Python values, or 'K=V' texts) → ({name: value}, {name: AttrType})."""
    if isinstance(attrs, dict):
        items = [(k, None, v, False) for k, v in attrs.items()]
    else:
        items = [(*parse_attr(t), True) for t in attrs or []]
    known = schema.attributes if schema is not None else None
    values, kinds = {}, {}
    for name, kind, value, is_text in items:
        where = f"attribute {name!r} of {op_type}" + (f" (--attr {name}{':' + kind if kind else ''}={value})"
                                                      if is_text else "")
        if name in values:
            raise ModelError(f"{where}: given twice")
        expected = known[name].type if known is not None and name in known else None
        if known is not None and expected is None:
            raise ModelError(f"{op_type} has no attribute {name!r}{did_you_mean(name, known)}; its attributes: "
                             f"{', '.join(sorted(known)) or '(none)'}")
        wanted = _KINDS[kind] if kind else None
        if expected is not None and wanted is not None and wanted != expected and \
                not (wanted == "bool" and expected == A.INT):
            raise ModelError(f"{where}: the schema types it {expected.name}, not {_kind_name(wanted)}")
        kind = wanted if wanted == "bool" or expected is None else expected
        value = _text_value(value, kind, where) if is_text else _coerce(value, kind, where)
        if expected == A.INT and isinstance(value, bool):
            value = int(value)
        values[name], kinds[name] = value, expected if expected is not None else kind
    for name, attr in (known or {}).items():
        if attr.required and name not in values:
            raise ModelError(f"{op_type} requires attribute {name!r} ({attr.type.name}); add --attr {name}=...")
    return values, kinds


def _coerce(value, kind, where: str):
    """A Python attribute value in the form the schema's type asks for; None: keep as given."""
    if isinstance(value, np.generic):
        value = value.item()
    if kind is None:
        return list(value) if isinstance(value, tuple) else value
    scalar = not isinstance(value, (list, tuple, np.ndarray))
    seq = [value] if scalar else list(value)
    integral = all(isinstance(v, (int, np.integer)) for v in seq)
    numeric = all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in seq)
    if kind == A.INT and scalar and integral:
        return int(value)
    if kind == A.FLOAT and scalar and numeric:
        return float(value)
    if kind == A.STRING and isinstance(value, (str, bytes)):
        return value.decode("utf-8") if isinstance(value, bytes) else value
    if kind == A.INTS and integral:
        return [int(v) for v in seq]
    if kind == A.FLOATS and numeric:
        return [float(v) for v in seq]
    if kind == A.STRINGS and all(isinstance(v, str) for v in seq):
        return seq
    if kind == A.TENSOR and isinstance(value, (np.ndarray, list, int, float)):
        arr = np.asarray(value)
        dtypes.from_numpy(arr.dtype)
        return arr
    if kind == "bool" and isinstance(value, (bool, int)):
        return bool(value)
    raise ModelError(f"{where}: {value!r} is not {_kind_name(kind)}, the type the schema gives it")


def onnx_attribute(name: str, value, kind):
    if isinstance(value, np.ndarray):
        return helper.make_attribute(name, numpy_helper.from_array(value))
    if isinstance(kind, A) and kind in (A.INTS, A.FLOATS, A.STRINGS):
        return helper.make_attribute(name, value, attr_type={A.INTS: onnx.AttributeProto.INTS,
                                                            A.FLOATS: onnx.AttributeProto.FLOATS,
                                                            A.STRINGS: onnx.AttributeProto.STRINGS}[kind])
    return helper.make_attribute(name, int(value) if isinstance(value, bool) else value)


def did_you_mean(name: str, candidates) -> str:
    """' (did you mean A or B?)' for the candidates close to `name`, ignoring case; '' if none is."""
    by_lower = {}
    for c in sorted(candidates):
        by_lower.setdefault(c.lower(), c)
    close = difflib.get_close_matches(name.lower(), by_lower, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(by_lower[c] for c in close)}?)" if close else ""
