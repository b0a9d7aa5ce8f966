"""One OM2 archive carrying several kernel sets (`--target x86_64-avx2,x86_64-avx512`,
docs/archive-format.md §2, *Several kernel sets*).

Each target is compiled alone, exactly as for a single `--target`: lowering decides the register
tiles, Winograd and the packing of constant weights per target, so a set is a whole model (model
library, tasks with their tiling, kernels, constants). Merging makes set i's model_0 the archive's
model_<i>, moves its kernels to data/kernels_<target>/, and places the entries a model has at the
archive level by content: bytes equal to an earlier set's are stored once, under that set's name
(the constants blob that two sets' configs both name, one OpSoStore); a set whose bytes differ gets
its own constants_<i> or model_<i>_op_so_store.bin. The manifest lists every model with its target;
the executor runs the best one the CPU supports (runtime/isa.py).
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

from ...errors import CompileError
from . import layout, writer
from .writer import Entry, json_bytes

# manifest keys that differ between the single-target archives; every other key must agree
_PER_SET = ("target", "models", "entries", "options", "compatibility", "model_num")


def merge(out: Path, parts: list, names: str) -> None:
    """Writes `out` from [(target, path of its single-target .om2)], in the order the sets are
    preferred least first (model 0: the baseline); `names`: the --target value recorded."""
    entries: dict[str, bytes] = {}
    manifests, models, configs = [], [], []
    union = _Union()
    for i, (tgt, path) in enumerate(parts):
        with zipfile.ZipFile(path) as z:
            files = {n: z.read(n) for n in z.namelist()}
        manifest = json.loads(files.pop(layout.MANIFEST))
        manifests.append(manifest)
        config, blob = json.loads(files.pop(layout.constants_config(0))), files.pop(layout.constants_blob(0))
        if config.get("consts"):
            union.add(i, config, blob)
        else:   # no constants: its own (empty) constants_<i>, which the loader reads then
            entries[layout.constants_blob(i)] = blob
        configs.append(config)
        moved = _place(files, i, tgt, entries)
        moved[layout.constants_config(0)] = layout.constants_config(i)
        models.append({"index": i, "name": manifest["models"][0]["name"], "meta": layout.model_meta(i),
                       "target": manifest["target"]})
        entries[layout.model_meta(i)] = json_bytes(_renamed(json.loads(entries[layout.model_meta(i)]), moved))
    if union.name is not None:
        entries[union.name] = bytes(union.data)
    for i, config in enumerate(configs):
        if config.get("consts"):   # every set with constants reads the union
            config["internal_weight_size"] = len(union.data)
            for c in config["consts"].values():
                c["file_name"] = union.name[len(layout.CONSTANTS_DIR):]
        entries[layout.constants_config(i)] = json_bytes(config)
    listed = [Entry(n, d) for n, d in sorted(entries.items())]
    writer.write(out, [_manifest(manifests, models, listed, names)] + listed)


class _Union:
    """The one constants blob of every set: set 0's, then what each later set appends (its
    constants that no earlier set has, placed after theirs: lower/constant_pool.py)."""

    def __init__(self):
        self.data = bytearray()
        self.name: str | None = None

    def add(self, index: int, config: dict, blob: bytes) -> None:
        if self.name is None:
            self.name = layout.constants_blob(index)
        if len(blob) > len(self.data):
            self.data += blob[len(self.data):]
        for key, c in config["consts"].items():
            if self.data[c["offset"]:c["offset"] + c["size"]] != blob[c["offset"]:c["offset"] + c["size"]]:
                raise CompileError(f"kernel set {index}'s constant {key!r} is not where the earlier sets keep the "
                                   "same bytes; please report this as an om2gen bug (compile one target per archive "
                                   "meanwhile)")


def _place(files: dict, index: int, tgt, entries: dict) -> dict:
    """Adds one set's entries (but its constants) under their names in the merged archive;
    returns {old name: new} for those that moved."""
    moved = {}
    for name, data in sorted(files.items()):
        if name.startswith(layout.model_dir(0)):
            new = layout.model_dir(index) + name[len(layout.model_dir(0)):]
        elif name.startswith(layout.kernels_dir(tgt.arch)):
            new = layout.kernels_dir(tgt.name) + name[len(layout.kernels_dir(tgt.arch)):]
        elif name == layout.SO_STORE:
            new = _shared(name, data, entries, layout.so_store)
        elif entries.get(name, data) == data:   # custom-op libraries and instances: named by their content
            new = name
        else:
            raise CompileError(f"the kernel sets' {name} differ, and om2gen does not know where to put a set's own "
                               "copy; please report this as an om2gen bug (compile one target per archive meanwhile)")
        if new in entries and entries[new] != data:
            raise CompileError(f"two kernel sets write {new} with different bytes; please report this as an om2gen bug")
        entries[new] = data
        if new != name:
            moved[name] = new
    return moved


def _shared(name: str, data: bytes, entries: dict, own) -> str:
    """`name` if it is free or holds the same bytes, else the first own name (own(1), own(2), ...)
    that is free or holds them: equal bytes are stored once."""
    if entries.get(name, data) == data:
        return name
    index = 1
    while own(index) in entries and entries[own(index)] != data:
        index += 1
    return own(index)


def _renamed(doc, moved: dict):
    """`doc` (JSON) with every string that names a moved entry naming it where it is now."""
    if isinstance(doc, dict):
        return {k: _renamed(v, moved) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_renamed(v, moved) for v in doc]
    return moved.get(doc, doc) if isinstance(doc, str) else doc


def _manifest(manifests: list, models: list, entries: list, names: str) -> Entry:
    base = manifests[0]
    for key in sorted(set().union(*manifests) - set(_PER_SET)):
        if any(m.get(key) != base.get(key) for m in manifests):
            raise CompileError(f"the kernel sets' manifests differ in {key!r}; please report this as an om2gen bug")
    features = dict(base["compatibility"]["used_features"])
    features[layout.MULTI_ISA_FEATURE] = layout.MULTI_ISA_EXECUTOR_VERSION
    manifest = dict(base, model_num=len(models), models=models,
                    options=dict(base["options"], target=names),
                    compatibility=dict(base["compatibility"], used_features=features,
                                       required_executor_version=max(features.values(), key=_version)),
                    entries=[{"name": e.name, "size": len(e.data), "sha256": e.sha256, "blake3": e.blake3,
                              "compression": "stored" if e.stored else "deflate"} for e in entries])
    return Entry(layout.MANIFEST, json_bytes(manifest))


def _version(text: str) -> tuple[int, ...]:
    return tuple(map(int, text.split(".")))
