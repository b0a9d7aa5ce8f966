"""`om2gen sign` and `om2gen keygen`: Ed25519 signatures on .om2 archives and .om files."""
from __future__ import annotations


def add_parser(sub) -> None:
    g = sub.add_parser("sign", help="sign an .om2 archive or .om file with an Ed25519 key (om2gen.load(..., "
                       "trusted_keys=...))")
    g.add_argument("model", help="the .om2 archive or .om file (the format is read from its content)")
    g.add_argument("--key", required=True, help="the private key (PEM), e.g. from `om2gen keygen`")
    g.add_argument("-o", "--output", help="write the signed file here (default: in place)")
    g.set_defaults(func=cmd_sign)

    k = sub.add_parser("keygen", help="make an Ed25519 key pair for `om2gen sign`")
    k.add_argument("key", help="the private key file to write; the public key goes to KEY.pub")
    k.set_defaults(func=cmd_keygen)


def cmd_sign(args) -> int:
    from ..formats.sign import sign
    out = sign(args.model, args.key, args.output)
    print(f"signed {out}")
    return 0


def cmd_keygen(args) -> int:
    from ..formats.om2.signing import key_id, keygen, public_key_bytes
    private, public = keygen(args.key)
    print(f"wrote {private} (private, keep it secret) and {public} (public, key id "
          f"{key_id(public_key_bytes(public))}: give it to those who load your archives)")
    return 0
