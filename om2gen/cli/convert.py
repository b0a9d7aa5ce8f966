"""om2gen convert: a classic OM file → an OM2 archive of the same model.

Nothing is recompiled from a graph: the OM's tasks (TASK_INFO, decoded by formats/om/reader.py into the
Program the OM was written from), its kernel binaries (TBE_KERNELS), weights (WEIGHTS_DATA) and
packed shared objects (SO_BINS, CUSTOM_OPS) go into the archive as they are; only the model
library — the tables as C++ plus the load-and-run code — is generated and built. So the OM2
runs exactly the kernels the OM runs, with the load work moved to compile time.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import Om2Error
from ..formats.om import integrity, model_def_attrs, reader
from ..formats.om.container import read_om
from ..pipeline import Options, _Progress, write_archive
from ..so_in_om import info


def convert(source, output, *, progress: bool = False, trusted_keys=None) -> Path:
    """Converts the OM file `source` (path) into the OM2 archive `output`; returns its path.
    trusted_keys (formats/om2/signing.py): the OM must be signed by one of them, as for a load. A
    signature of the OM is not carried over: the archive is new bytes (a model library built
    here), unsigned until someone signs it."""
    from ..so_in_om.providers import SoPack
    out = Path(output)
    if out.is_dir():
        raise Om2Error(f"output {out} is a directory; give a file name such as {out / 'model.om2'}")
    if not out.parent.is_dir():
        raise Om2Error(f"output directory {out.parent} does not exist")
    if out.suffix.lower() == ".om":
        raise Om2Error(f"output {out}: convert writes an OM2 archive, not a classic OM file; name it "
                       f"{out.with_suffix('.om2').name}")
    report = _Progress(progress)
    om = read_om(source)
    where = str(source)
    if trusted_keys is not None:
        from ..formats.om import signature
        from ..formats.om2 import signing
        signature.check(om, signing.trusted_keys(trusted_keys), where)
    parsed = reader.read(om, where)
    md = parsed.model_def
    tgt = reader.target_of(md, where)
    program = parsed.program
    if any(-1 in d.shape for d in (*program.inputs, *program.outputs)):
        raise Om2Error(f"{where} is a dynamic-shape OM (it runs the RT2 way, with its host op library); convert "
                       "takes static and gear OMs: compile the model to an .om2 from its ONNX file instead "
                       "(docs/dynamic-shapes.md)")
    report.stage(f"read {len(program.tasks)} tasks, {len(program.kernels)} kernels")
    flag = model_def_attrs.flag_from_model_def(md, where)
    info.check_flag(parsed.so_bins, flag, where)
    integrity.check_so_bins(md, parsed.so_bins, where)   # the archive would give altered SOs fresh digests
    so_pack = SoPack(tuple(parsed.so_bins), flag, {})
    commands = {k.entry: f"taken from the TBE_KERNELS partition of {Path(where).name}" for k in program.kernels}
    return write_archive(out, program, tgt, Options(target=tgt.name), commands, so_pack,
                         f"om2gen convert {Path(where).name}", report)


def add_parser(sub) -> None:
    v = sub.add_parser("convert", help="turn a classic .om file into an .om2 archive (same kernels and weights)")
    v.add_argument("model", help="the .om file")
    v.add_argument("-o", "--output", required=True, help="the .om2 file to write")
    v.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    v.add_argument("--trusted-key", action="append", metavar="KEY.pub",
                   help="convert only if an Ed25519 public key given here signed the .om (om2gen sign); repeatable. "
                        "The .om2 written is unsigned either way")
    v.set_defaults(func=cmd_convert)


def cmd_convert(args) -> int:
    from ..formats.om.container import read_om
    from ..formats.om.signature import signers
    out = convert(args.model, args.output, progress=not args.quiet, trusted_keys=args.trusted_key)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    signed_by = signers(read_om(args.model))
    if signed_by:
        print(f"note: {args.model} is signed (by {', '.join(signed_by)}); the signature covers that file only, and "
              f"{out} (new bytes, its model library built here) is unsigned: sign it with `om2gen sign {out} --key "
              "KEY.pem`")
    return 0
