"""om2gen: compile ONNX models into OM2 archives (the model as native code) and run them.

    om2gen.compile("model.onnx", "model.om2", input_shapes={"x": (1, 3, 224, 224)})
    with om2gen.load("model.om2") as m:
        outputs = m.run({"x": array})
"""
from .errors import (AbiError, ArchiveError, CompileError, InputError, ModelClosedError, ModelError, Om2Error,
                     RuntimeFailure, ShapeError, UnsupportedOpError)
from .runtime.model import load as _load
from .version import __version__


def __getattr__(name):
    """om2gen.compile, imported on first use: the compiler side (onnx, jinja2, the passes and
    lowering) takes hundreds of milliseconds to import, and a process that only loads and runs models
    (a server replica, a serverless worker) never needs it."""
    if name == "compile":
        from .pipeline import compile
        globals()["compile"] = compile
        return compile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(source, threads=None, *, allow_platform_mismatch=False, trusted_keys=None, pad_to_gear=False, isa=None):
    """Loads an .om2 archive or a classic .om file (a path, or the file's bytes; the format is read
    from the content). Returns a Model with .inputs, .outputs, .format, .run(feeds),
    .execute_raw(input_addresses, output_addresses), .load_phases and .close().

    allow_platform_mismatch: load even if the platform recorded at compile time (SoInOmInfo: CPU,
    OS, runtime and compiler versions) differs from this one.
    trusted_keys: Ed25519 public keys (PEM file paths, PEM text, 32 raw bytes); the archive must
    carry a valid signature by one of them (`om2gen sign`), checked before any of its code is
    mapped. None: the keys $OM2GEN_TRUSTED_KEYS names (os.pathsep-separated PEM files), or no
    signature needed when it is unset.
    pad_to_gear: a model compiled with gears of the batch (dynamic_batch_size) runs a batch that
    is no gear zero-padded on the next gear up, and cuts its results back (docs/gears.md).
    isa: the kernel set to run, of an archive compiled for several targets (target="x86_64-avx2,
    x86_64-avx512"); None: $OM2GEN_ISA, else the best this CPU supports. `Model.isa` says which
    runs, `Model.kernel_sets` what the model carries."""
    return _load(source, threads, allow_platform_mismatch=allow_platform_mismatch, trusted_keys=trusted_keys,
                 pad_to_gear=pad_to_gear, isa=isa)


__all__ = ["compile", "load", "__version__", "Om2Error", "ModelError", "UnsupportedOpError", "ShapeError",
           "CompileError", "ArchiveError", "AbiError", "InputError", "RuntimeFailure", "ModelClosedError"]
