"""`om2gen run`: an .om2 archive or .om file on .npy inputs, one .npy per output."""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from . import parsing


def add_parser(sub) -> None:
    r = sub.add_parser("run", help="run an .om2 archive or .om file on .npy inputs")
    r.add_argument("model", help="the .om2 or .om file (the format is read from its content)")
    r.add_argument("--input", action="append", type=parsing.input_file_arg, metavar="NAME=FILE.npy", help="one per input")
    r.add_argument("--output-dir", default=".", help="where to write one .npy per output (default: .)")
    r.add_argument("--threads", type=int, help="worker threads (default: all cores)")
    r.add_argument("--allow-platform-mismatch", action="store_true",
                   help="load even if the model was compiled for another platform (CPU, OS, runtime or compiler "
                        "version recorded at compile time); at your own risk")
    r.add_argument("--trusted-key", action="append", metavar="KEY.pub",
                   help="run only if an Ed25519 public key given here signed the archive (om2gen sign); "
                        "repeatable; default: the keys $OM2GEN_TRUSTED_KEYS names")
    r.add_argument("--pad-to-gear", action="store_true",
                   help="a model with gears of the batch: run a batch that is no gear on the next gear up "
                        "(zero-padded) and write the results of the given batch (docs/gears.md)")
    r.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    import numpy as np

    from .. import load
    from ..advice import cli_words
    with cli_words(), load(args.model, threads=args.threads, allow_platform_mismatch=args.allow_platform_mismatch,
                           trusted_keys=args.trusted_key, pad_to_gear=args.pad_to_gear) as model:
        feeds = {}
        for name, path in args.input or []:
            try:
                feeds[name] = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise InputError(f"--input {name}={path}: cannot read a .npy array ({exc})") from None
        outputs = model.run(feeds)
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, (name, arr) in enumerate(outputs.items()):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or f"output_{i}"
        path = out_dir / f"{safe}.npy"
        np.save(path, arr)
        print(f"{name}: {arr.dtype}{list(arr.shape)} -> {path}")
    return 0
