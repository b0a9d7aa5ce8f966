"""`om2gen sign`: a signature added to an .om2 archive (formats/om2/signing.py) or a classic .om
file (formats/om/signature.py), whichever the file is by content."""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .om import signature
from . import OM_MAGIC
from .om2 import signing


def sign(path, key_path, output=None) -> Path:
    """Adds a signature by the private key at `key_path` to the model file at `path` (written to
    `output`, default in place, atomically). Signing twice with one key keeps one signature."""
    path = Path(path)
    key = signing.private_key(key_path)
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror})") from None
    out = Path(output) if output else path
    if magic == OM_MAGIC:
        return signature.sign(path, key, out)
    return signing.sign_archive(path, key, out)
