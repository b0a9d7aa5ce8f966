"""Signed OM2 archives: an Ed25519 signature over manifest.json, checked before anything runs.

The manifest lists every entry with its size and digests, and loading checks every entry it uses
against them (reader.py), so a signature over the manifest's bytes covers the whole model. It
lives in its own entry, signature.json, outside the manifest (it cannot list itself):

    {"format": "om2-signature", "signatures": [{"algorithm": "ed25519", "key_id": "<16 hex>",
     "public_key": "<64 hex>", "signature": "<128 hex>"}]}

`om2gen sign model.om2 --key KEY.pem` adds one (an archive may carry several: one per signer);
`om2gen.load(..., trusted_keys=[...])`, or $OM2GEN_TRUSTED_KEYS for every load in the process,
refuses an archive that carries no valid signature by a trusted key before any of its code is
mapped. Keys are PEM files (PKCS#8 private, SubjectPublicKeyInfo public, as OpenSSL and
`om2gen keygen` write them) or raw 32-byte public keys. The `cryptography` package does the
Ed25519 arithmetic; it is imported only when signing or checking signatures.

Classic .om files are signed with the same keys, documents and checks (`_verify`,
`_signed_doc`); formats/om/signature.py says where the document lives in an OM and what it signs.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ...errors import ArchiveError, InputError
from . import layout

FORMAT = "om2-signature"
ALGORITHM = "ed25519"
MAX_SIGNATURE_ENTRY = 64 << 10
TRUSTED_KEYS_ENV = "OM2GEN_TRUSTED_KEYS"   # os.pathsep-separated public key files


def key_id(raw_public: bytes) -> str:
    """The short name of a public key: the start of its sha256."""
    return hashlib.sha256(raw_public).hexdigest()[:16]


def _ed25519():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    return serialization, ed25519


def _raw_public(key) -> bytes:
    serialization, _ = _ed25519()
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_bytes(key) -> bytes:
    """A trusted key as its 32 raw bytes: raw bytes, PEM bytes or text, a path to a PEM file (or
    a raw 32-byte file), or a cryptography Ed25519PublicKey."""
    serialization, ed25519 = _ed25519()
    if isinstance(key, ed25519.Ed25519PublicKey):
        return _raw_public(key)
    where = "a trusted key"
    if isinstance(key, (str, os.PathLike)) and not str(key).lstrip().startswith("-----BEGIN"):
        where = str(key)
        try:
            key = Path(key).read_bytes()
        except OSError as exc:
            raise InputError(f"trusted key {where}: cannot read it ({exc.strerror})") from None
    if isinstance(key, str):
        key = key.encode()
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise InputError(f"a trusted key must be a PEM file path, PEM text, 32 raw bytes or an Ed25519PublicKey, not "
                         f"{type(key).__name__}")
    key = bytes(key)
    if len(key) == 32:
        return key
    try:
        loaded = serialization.load_pem_public_key(key)
    except ValueError:
        raise InputError(f"{where}: not an Ed25519 public key (PEM 'PUBLIC KEY' or 32 raw bytes); make one with "
                         "`om2gen keygen KEY.pem` (it writes KEY.pem.pub)") from None
    if not isinstance(loaded, ed25519.Ed25519PublicKey):
        raise InputError(f"{where}: a {type(loaded).__name__}, om2gen signs with Ed25519 keys only")
    return _raw_public(loaded)


def trusted_from_environment() -> list[bytes] | None:
    """The keys $OM2GEN_TRUSTED_KEYS names, or None when it is unset or empty."""
    text = os.environ.get(TRUSTED_KEYS_ENV, "").strip()
    if not text:
        return None
    return [public_key_bytes(Path(p)) for p in text.split(os.pathsep) if p.strip()]


def trusted_keys(given) -> list[bytes] | None:
    """The keys a load must find a signature by: `given` (load's trusted_keys=), else the
    environment's; None when neither asks for signatures."""
    if given is None:
        return trusted_from_environment()
    if isinstance(given, (str, bytes, os.PathLike)) or not hasattr(given, "__iter__"):
        given = [given]
    keys = [public_key_bytes(k) for k in given]
    if not keys:
        raise InputError("trusted_keys=[] trusts no key, so no archive could load; pass the signers' public keys, "
                         "or None to load unsigned archives")
    return keys


def _not_signed(where, name: str) -> ArchiveError:
    return ArchiveError(f"{where}: not signed, and this load trusts only signed archives (trusted_keys= or "
                        f"${TRUSTED_KEYS_ENV}); sign it with `om2gen sign {name} --key KEY.pem`")


def _verify(doc, fmt: str, message: bytes, keys: list[bytes], where, what: str, kind: str) -> str:
    """The key id of a signature in `doc` (a signature document of format `fmt`) by one of
    `keys` over `message`; ArchiveError (naming `what` was signed, and the `kind` of file)
    unless there is one and it holds."""
    sigs = doc.get("signatures") if isinstance(doc, dict) and doc.get("format") == fmt else None
    if not isinstance(sigs, list):
        raise ArchiveError(f"{where}: its signature is not an om2gen signature document; the {kind} is corrupt")
    _, ed25519 = _ed25519()
    from cryptography.exceptions import InvalidSignature
    trusted = {key_id(k): k for k in keys}
    seen = []
    for s in sigs:
        if not isinstance(s, dict) or s.get("algorithm") != ALGORITHM:
            continue
        try:
            public, signature = bytes.fromhex(s.get("public_key", "")), bytes.fromhex(s.get("signature", ""))
        except (TypeError, ValueError):
            continue
        seen.append(key_id(public))
        if key_id(public) not in trusted or trusted[key_id(public)] != public:
            continue
        try:
            ed25519.Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
        except (InvalidSignature, ValueError):
            raise ArchiveError(f"{where}: the signature by trusted key {key_id(public)} does not match {what}; "
                               f"the {kind} was modified after it was signed: do not use it") from None
        return key_id(public)
    raise ArchiveError(f"{where}: signed by {', '.join(seen) or 'no Ed25519 key'}, none of them trusted (trusted: "
                       f"{', '.join(sorted(trusted))}); add the signer's public key to trusted_keys, or get the "
                       f"{kind} from its signer")


def _signed_doc(old, key, message: bytes, fmt: str) -> dict:
    """The signature document `old` (None: none yet) with the signature of `key` over `message`
    in place of any earlier one by the same key."""
    public = _raw_public(key.public_key())
    sigs = old.get("signatures", []) if isinstance(old, dict) else []
    others = [s for s in sigs if isinstance(s, dict) and s.get("public_key") != public.hex()]
    mine = {"algorithm": ALGORITHM, "key_id": key_id(public), "public_key": public.hex(),
            "signature": key.sign(message).hex()}
    return {"format": fmt, "signatures": others + [mine]}


def check(archive, keys: list[bytes]) -> str:
    """Raises ArchiveError unless `archive` (reader.Archive) carries a valid signature of its
    manifest by one of `keys`; returns the signer's key id."""
    where = archive.path
    if layout.SIGNATURE not in archive.names():
        raise _not_signed(where, Path(str(where)).name)
    info = archive.info(layout.SIGNATURE)
    if info.file_size > MAX_SIGNATURE_ENTRY:
        raise ArchiveError(f"{where}: {layout.SIGNATURE} has {info.file_size} bytes; the archive is corrupt")
    doc = archive.read_json(layout.SIGNATURE)
    return _verify(doc, FORMAT, bytes(archive.view(layout.MANIFEST)), keys, where, "the manifest", "archive")


def private_key(path):
    serialization, ed25519 = _ed25519()
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"--key {path}: cannot read it ({exc.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise InputError(f"--key {path}: not an unencrypted PEM private key; make one with `om2gen keygen "
                         f"{path}`") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise InputError(f"--key {path}: a {type(key).__name__}, om2gen signs with Ed25519 keys only")
    return key


def sign_archive(path: Path, key, output: Path) -> Path:
    """Adds a signature by `key` (private_key()) to the .om2 archive at `path`, written to
    `output` atomically. Signing twice with one key keeps one signature."""
    from . import writer
    from .reader import Archive
    with Archive(path) as a:
        manifest = bytes(a.view(layout.MANIFEST))
        old = a.read_json(layout.SIGNATURE) if layout.SIGNATURE in a.names() else None
        entries = [writer.Entry(n, a.read(n)) for n in a.names() if n != layout.SIGNATURE]
    entries.append(writer.Entry(layout.SIGNATURE, writer.json_bytes(_signed_doc(old, key, manifest, FORMAT))))
    writer.write(output, entries)
    return output


def keygen(path) -> tuple[Path, Path]:
    """A new Ed25519 key pair: the private key at `path` (PKCS#8 PEM, mode 0600) and the public
    key at `path`.pub (SubjectPublicKeyInfo PEM). Refuses to overwrite."""
    serialization, ed25519 = _ed25519()
    path = Path(path)
    pub = path.with_name(path.name + ".pub")
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    for p in (path, pub):
        if p.exists():
            raise InputError(f"{p} exists; om2gen keygen never overwrites a key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    pub.write_bytes(public)
    return path, pub
