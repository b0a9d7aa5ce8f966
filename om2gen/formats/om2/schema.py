"""JSON Schemas of what the executor reads from an OM2 archive: manifest.json and model_meta.json.

Loading trusts nothing it has not checked: the two documents are validated against these schemas
(fastjsonschema's validators, generated into _schema_code.py, which needs no fastjsonschema) before any field is
used, so a wrong type, a missing key or an absurd number is an ArchiveError naming the field,
never an AttributeError or TypeError deep in the loader. The schemas describe what the loader
uses; other keys (options, stats, debug information) may be anything, as newer writers add keys.
"""
from __future__ import annotations

from ...errors import ArchiveError

_NAME = {"type": "string", "minLength": 1, "maxLength": 1024}
_COUNT = {"type": "integer", "minimum": 0, "maximum": 1 << 48}
_INDEX_OR_NONE = {"type": "integer", "minimum": -1, "maximum": 1 << 48}
_VERSION = {"type": "string", "maxLength": 32}

_TARGET = {
    "type": "object",
    "required": ["name", "arch", "isa_features"],
    "properties": {"name": _NAME, "arch": _NAME, "isa_features": {"type": "array", "maxItems": 256, "items": _NAME}},
}

MANIFEST = {
    "type": "object",
    "required": ["format", "format_version", "compatibility", "entries", "models", "abi_version",
                 "kernel_abi_version", "target"],
    "properties": {
        "format": {"const": "om2"},
        "format_version": _VERSION,
        "abi_version": _COUNT,
        "kernel_abi_version": _COUNT,
        "compatibility": {
            "type": "object",
            "properties": {"compiler_version": _VERSION, "required_executor_version": _VERSION},
        },
        # each entry's name, size and digests are checked where they are used (reader.py)
        "entries": {"type": "array", "maxItems": 100000},
        "models": {
            "type": "array",
            "maxItems": 4096,
            # target: the kernel set of a model, in an archive of several (--target a,b)
            "items": {"type": "object", "required": ["meta"],
                      "properties": {"meta": _NAME, "name": {"type": "string"}, "target": _TARGET}},
        },
        "target": _TARGET,
        "so_in_om_info": {
            "type": "object",
            "properties": {k: {"type": "string", "maxLength": 1024}
                           for k in ("compiler_version", "cpu_info", "opp_version", "os_info")},
        },
    },
}

_IO = {
    "type": "object",
    "required": ["name", "dtype", "shape", "size"],
    "properties": {
        "name": {"type": "string", "maxLength": 4096},
        "dtype": {"type": "string", "maxLength": 32},
        # -1: a dynamic model's dim the run decides (docs/dynamic-shapes.md); size: the largest shape's
        "shape": {"type": "array", "maxItems": 64, "items": {"type": "integer", "minimum": -1, "maximum": 1 << 48}},
        "size": _COUNT,
        # GE's shape_range: [lo, hi] per dim, hi -1 where unbounded
        "shape_range": {"type": "array", "maxItems": 64,
                        "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                  "items": {"type": "integer", "minimum": -1, "maximum": 1 << 48}}},
        # a gear model's dynamic input: its dims, -1 where a gear decides (shape: the largest gear's)
        "origin_input_dims": {"type": "array", "maxItems": 64, "items": {"type": "integer", "minimum": -1,
                                                                         "maximum": 1 << 48}},
    },
}


META = {
    "type": "object",
    "required": ["inputs", "outputs", "library", "kernels"],
    "properties": {
        "inputs": {"type": "array", "maxItems": 65536, "items": _IO},
        "outputs": {"type": "array", "maxItems": 65536, "items": _IO},
        "library": _NAME,
        "kernels": {"type": "array", "maxItems": 100000, "items": _NAME},
        "custom_ops": {
            "type": "object",
            "properties": {"shared_libs": {"type": "array", "items": _NAME},
                           "binaries": {"type": "array", "items": _NAME}},
        },
        # gears (GE's Om2ModelMeta keys, docs/gears.md)
        "dynamic_type": {"type": "integer", "minimum": 0, "maximum": 3},
        "dynamic_batch_info": {"type": "array", "maxItems": 256,
                               "items": {"type": "array", "minItems": 1, "maxItems": 4096, "items": _COUNT}},
        "dynamic_output_shape": {"type": "array", "maxItems": 1 << 20,
                                 "items": {"type": "string", "pattern": "^-?[0-9]+(,[0-9]+)+$", "maxLength": 4096}},
        "user_designate_shape_order": {"type": "array", "maxItems": 65536, "items": {"type": "string"}},
        # a dynamic model (docs/dynamic-shapes.md)
        "dynamic_shapes": {
            "type": "object",
            "required": ["symbols", "inputs", "outputs", "tiling_library"],
            "properties": {
                "symbols": {"type": "array", "maxItems": 4096, "items": {
                    "type": "object", "required": ["name", "range", "input", "axis"],
                    "properties": {"name": {"type": "string", "maxLength": 256},
                                   "range": {"type": "array", "minItems": 2, "maxItems": 2,
                                             "items": {"type": "integer", "minimum": -1, "maximum": 1 << 48}},
                                   # a data-dependent count (producer: the node writing it) has input and axis -1
                                   "input": _INDEX_OR_NONE, "axis": _INDEX_OR_NONE,
                                   # the input dim is multiple * the symbol (a lo~hi%m dim); absent: 1
                                   "multiple": {"type": "integer", "minimum": 1, "maximum": 1 << 31},
                                   "producer": {"type": "string", "maxLength": 4096}}}},
                "inputs": {"type": "array", "maxItems": 65536, "items": {"type": "array", "maxItems": 64,
                                                                         "items": {"type": "string", "maxLength": 4096}}},
                "outputs": {"type": "array", "maxItems": 65536, "items": {"type": "array", "maxItems": 64,
                                                                          "items": {"type": "string", "maxLength": 4096}}},
                "tiling_library": {"type": "string", "maxLength": 1024},    # "": no kernel's tiling is the run's
            },
        },
        "so_bins": {
            "type": "object",
            "required": ["store", "so_in_om_flag"],
            "properties": {"store": _NAME, "so_in_om_flag": {"type": "integer", "minimum": 0, "maximum": 0xFFFFFFFF}},
        },
    },
}

SCHEMAS = {"manifest": MANIFEST, "meta": META}


def generated_code() -> str:
    """The validators of SCHEMAS as one Python module (formats/om2/_schema_code.py, checked in and
    compared with this by a test): fastjsonschema compiles a schema in about 20 ms, too long to
    do at a process's first load, and is needed only to generate the module."""
    import fastjsonschema
    parts = ['"""Generated by om2gen.formats.om2.schema.generated_code() from the schemas in schema.py; do not edit. '
             'Regenerate: python -m om2gen.formats.om2.schema > om2gen/formats/om2/_schema_code.py"""\n' + _EXCEPTION]
    for name, sch in SCHEMAS.items():
        code = fastjsonschema.compile_to_code(sch)
        assert code.count("def validate(") == 1 and "validate(" not in code.replace("def validate(", "")
        assert _IMPORT in code
        parts.append(code.replace(_IMPORT, "").replace("def validate(", f"def validate_{name}(", 1))
    return "\n".join(parts)


# The generated code raises fastjsonschema's exception; it is defined in the generated module
# instead, so that loading a model imports nothing of fastjsonschema (~20 ms), a build-time tool.
_IMPORT = "from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException\n"
_EXCEPTION = '''

class JsonSchemaValueException(ValueError):
    """fastjsonschema's JsonSchemaValueException, with the attributes it has."""

    def __init__(self, message, value=None, name=None, definition=None, rule=None):
        super().__init__(message)
        self.message, self.value, self.name, self.definition, self.rule = message, value, name, definition, rule


JsonSchemaValuesException = JsonSchemaValueException
'''


def validate(document, schema_name: str, where, what: str) -> None:
    """Raises ArchiveError naming the first field of `document` that breaks the schema."""
    from . import _schema_code
    check = getattr(_schema_code, f"validate_{schema_name}")
    try:
        check(document)
    except _schema_code.JsonSchemaValueException as exc:
        field = (exc.name or "data").replace("data", "", 1).lstrip(".") or "the document"
        why = exc.message.replace(exc.name or "", "", 1).strip() or "has a bad value"
        raise ArchiveError(f"{where}: {what}: {field} {why}; om2gen never writes such a file, so the archive is "
                           "corrupt or was modified: recompile it or get it again") from None


if __name__ == "__main__":
    print(generated_code(), end="")
