"""pyACL's error convention: every call returns an aclError (or a value and one) and never raises
for a run-time failure; acl.get_recent_err_msg() then says what happened.

An API function is wrapped by @entry(name, on_fail): inside, a failure is an AclFail (or an
Om2Error from the executor, mapped to its aclError) and the wrapper turns it into on_fail(code)
after recording "<api>: <what> (error <code>)" for this thread. Messages the CPU runtime recorded
during the call are moved below it, so the list reads newest first, as ACL's does.
TypeError for an argument of the wrong type is a programming error that pyACL rejects the same
way, and is not caught.
"""
from __future__ import annotations

import functools
import operator
import threading

from ..errors import AbiError, ArchiveError, InputError, Om2Error, RuntimeFailure
from . import constants as C
from ._native import take_runtime_messages

_local = threading.local()

# Om2Error class -> aclError, most specific first (the first isinstance match wins)
CODES = (
    (AbiError, C.ACL_ERROR_DESERIALIZE_MODEL),
    (ArchiveError, C.ACL_ERROR_PARSE_MODEL),
    (InputError, C.ACL_ERROR_INVALID_PARAM),
    (RuntimeFailure, C.ACL_ERROR_RT_FAILURE),
    (Om2Error, C.ACL_ERROR_FAILURE),
)


class AclFail(Exception):
    """A failure inside an API function: its aclError and what went wrong."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _stack() -> list[str]:
    s = getattr(_local, "messages", None)
    if s is None:
        s = _local.messages = []
    return s


def _push(text: str) -> None:
    _stack().insert(0, text)


def take_messages() -> str | None:
    """This thread's unread messages, newest first, and clears them; None when there are none."""
    stack = _stack()
    for line in reversed(take_runtime_messages()):   # runtime failures outside an API call
        stack.insert(0, line)
    if not stack:
        return None
    text = "\n".join(stack)
    stack.clear()
    return text


def check(rc: int, what: str) -> None:
    """Raises AclFail for a failed runtime call; its message is the runtime's own."""
    if rc != C.ACL_SUCCESS:
        lines = take_runtime_messages()
        raise AclFail(rc, "; ".join(lines) if lines else f"{what} failed")


def entry(api: str, on_fail):
    """Decorator: pyACL's calling convention for one API function (see the module comment)."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except AclFail as exc:
                code, message = exc.code, str(exc)
            except Om2Error as exc:
                code = next(c for cls, c in CODES if isinstance(exc, cls))
                message = str(exc)
            for line in reversed(take_runtime_messages()):
                _push(line)
            suffix = f"(error {code})"
            _push(f"{api}: {message}" + ("" if message.endswith(suffix) else f" {suffix}"))
            return on_fail(code)
        call.acl_api = api
        return call
    return wrap


def integer(value, name: str) -> int:
    """An int argument, as pyACL's argument parser takes it (anything with __index__)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None


def address_arg(value, name: str) -> int:
    """A pointer argument (an int address); a negative one is an invalid parameter."""
    v = integer(value, name)
    if v < 0 or v >= 1 << 64:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{name} {v:#x} is not an address")
    return v


def size_arg(value, name: str) -> int:
    v = integer(value, name)
    if v < 0 or v >= 1 << 63:
        raise AclFail(C.ACL_ERROR_INVALID_PARAM, f"{name} {v} is not a valid size")
    return v
