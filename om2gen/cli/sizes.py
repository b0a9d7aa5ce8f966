"""An archive's size next to its ONNX file's (issue 16: an archive should stay within 1.1x of the
model it was compiled from). `om2gen inspect --onnx` prints it and benchmarks/archive_size.py
tabulates it over the benchmark suite; both read the files only, nothing is loaded."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelError
from ..formats import OM_MAGIC
from ..formats.om2 import layout

MB = 1e6


def archive_sizes(path) -> dict:
    """{"bytes": the file, "constants_bytes": its weights}: an .om2's constants blobs
    (data/constants/constants_N), an .om's WEIGHTS_DATA partitions."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(4)
    if head == OM_MAGIC:
        from ..formats.om.container import read_om
        from ..formats.om.layout import ModelPartitionType as PT
        om = read_om(path)
        weights = sum(len(p.data) for parts in om.models for p in parts if p.type == PT.WEIGHTS_DATA)
    else:
        from ..formats.om2.reader import Archive
        with Archive(path) as a:
            weights = sum(a.info(n).file_size for n in a.names()
                          if n.startswith(layout.CONSTANTS_DIR) and not n.endswith(".json"))
    return {"bytes": path.stat().st_size, "constants_bytes": weights}


def onnx_bytes(path) -> int:
    """The ONNX model's size on disk: the .onnx and the external data files its initializers
    name (a model over 2 GB keeps its weights beside it)."""
    import onnx
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such ONNX file; --onnx takes the .onnx the archive was compiled from")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise ModelError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc}); --onnx takes the .onnx "
                         "the archive was compiled from") from None
    external = {e.value for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
                for e in t.external_data if e.key == "location"}
    return path.stat().st_size + sum(os.path.getsize(path.parent / name) for name in sorted(external)
                                     if (path.parent / name).is_file())


def size_line(sizes: dict, onnx_size: int | None) -> str:
    """One line: the archive's size, its weights, and the ratio to the ONNX file where known."""
    line = (f"size {sizes['bytes'] / MB:.2f} MB ({sizes['constants_bytes'] / MB:.2f} MB constants, "
            f"{(sizes['bytes'] - sizes['constants_bytes']) / MB:.2f} MB code, kernels and metadata)")
    if onnx_size:
        line += f"; the ONNX file {onnx_size / MB:.2f} MB: {sizes['bytes'] / onnx_size:.2f}x"
    return line
