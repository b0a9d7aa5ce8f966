"""The native module (om2gen._native), opened so that its ACL symbols are global.

Model libraries leave aclrt*/aclmdlRI* undefined; the dynamic linker resolves them against
the runtime in this module, which therefore must be loaded with RTLD_GLOBAL.
"""
from __future__ import annotations

import os
import sys

from .errors import RuntimeFailure

_saved = sys.getdlopenflags()
sys.setdlopenflags(_saved | os.RTLD_GLOBAL)
try:
    from . import _native  # type: ignore[attr-defined]
except ImportError as exc:  # pragma: no cover - only on a broken installation
    raise RuntimeFailure(f"om2gen's native runtime is not built ({exc}); reinstall with `pip install .`") from None
finally:
    sys.setdlopenflags(_saved)

ffi = _native.ffi
lib = _native.lib


def string(ptr) -> str:
    return ffi.string(ptr).decode("utf-8", "replace") if ptr != ffi.NULL else ""


def recent_runtime_error() -> str:
    return string(lib.aclGetRecentErrMsg())
