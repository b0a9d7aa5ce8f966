"""The one exception family of om2gen. Every message names what is wrong and what to do."""


class Om2Error(Exception):
    """Base class of every error om2gen raises on purpose."""

    exit_code = 1


class ModelError(Om2Error):
    """The input model is not a readable, valid ONNX model."""

    exit_code = 2


class UnsupportedOpError(Om2Error):
    """A node uses an operator (or an attribute/dtype of it) that om2gen does not compile."""

    exit_code = 3


class ShapeError(Om2Error):
    """A shape could not be made static (for example a missing --input-shape)."""

    exit_code = 4


class NeedsConstantError(ShapeError):
    """A value that must be known at compile time (a shape, axes, a bound) is computed at run
    time. `value_name` names it; freezing that input (--input-value) resolves it."""

    def __init__(self, message: str, value_name: str):
        super().__init__(message)
        self.value_name = value_name


class CompileError(Om2Error):
    """The C/C++ toolchain failed; the message carries the command and its output."""

    exit_code = 5


class ArchiveError(Om2Error):
    """An .om2 archive is corrupt, truncated, foreign or inconsistent."""

    exit_code = 6


class AbiError(Om2Error):
    """An archive or library was built for another ABI version, CPU or ISA."""

    exit_code = 7


class InputError(Om2Error):
    """Run-time inputs do not match the model (name, dtype, shape or count)."""

    exit_code = 8


class RuntimeFailure(Om2Error):
    """The native runtime or the model library reported a failure."""

    exit_code = 9


class ModelClosedError(RuntimeFailure):
    """run() or execute_raw() on a model that close() has unloaded (also while it closes)."""
