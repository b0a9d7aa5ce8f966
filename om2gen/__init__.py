"""om2gen: compile ONNX models into OM2 archives (the model as native code) and run them.

    om2gen.compile("model.onnx", "model.om2", input_shapes={"x": (1, 3, 224, 224)})
    with om2gen.load("model.om2") as m:
        outputs = m.run({"x": array})
"""
from .build import compile
from .errors import (AbiError, ArchiveError, CompileError, InputError, ModelError, Om2Error, RuntimeFailure,
                     ShapeError, UnsupportedOpError)
from .version import __version__


def load(path, threads=None):
    """Loads an .om2 archive; returns a Model with .inputs, .outputs, .run(feeds) and .close()."""
    from .executor.model import load as _load
    return _load(path, threads)


__all__ = ["compile", "load", "__version__", "Om2Error", "ModelError", "UnsupportedOpError", "ShapeError",
           "CompileError", "ArchiveError", "AbiError", "InputError", "RuntimeFailure"]
