"""Signed archives (issue 12): om2gen keygen / sign, load(..., trusted_keys=...), $OM2GEN_TRUSTED_KEYS."""
import json
import subprocess
import sys
import zipfile

import numpy as np
import onnx
import pytest
from helpers import make_model, rand, refresh_digests
from onnx import helper

import om2gen
from om2gen.cli.entry import main
from om2gen.formats.om2 import layout, signing
from om2gen.formats.sign import sign

FEEDS = {"x": rand(2, 8, seed=4)}


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    d = tmp_path_factory.mktemp("signing")
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], FEEDS, ["y"])
    onnx.save(model, d / "relu.onnx")
    plain = om2gen.compile(d / "relu.onnx", d / "relu.om2")
    assert main(["keygen", str(d / "alice.pem")]) == 0
    assert main(["keygen", str(d / "mallory.pem")]) == 0
    assert main(["sign", str(plain), "--key", str(d / "alice.pem"), "-o", str(d / "signed.om2")]) == 0
    return {"dir": d, "plain": plain, "signed": d / "signed.om2", "alice": d / "alice.pem.pub",
            "mallory": d / "mallory.pem.pub", "alice_private": d / "alice.pem", "mallory_private": d / "mallory.pem"}


def test_a_signed_archive_loads_with_its_signers_key(signed):
    with om2gen.load(signed["signed"], trusted_keys=[signed["alice"]]) as m:
        assert m.signed_by == signing.key_id(signing.public_key_bytes(signed["alice"]))
        np.testing.assert_array_equal(m.run(FEEDS)["y"], np.maximum(FEEDS["x"], 0))
    # the public key as PEM text, as raw bytes, and a signed archive loaded without asking
    pem = signed["alice"].read_text()
    with om2gen.load(signed["signed"], trusted_keys=pem):
        pass
    with om2gen.load(signed["signed"], trusted_keys=[signing.public_key_bytes(pem)]):
        pass
    with om2gen.load(signed["signed"]) as m:
        assert m.signed_by is None


def test_signing_changes_no_entry_and_is_deterministic(signed, tmp_path):
    with zipfile.ZipFile(signed["plain"]) as a, zipfile.ZipFile(signed["signed"]) as b:
        assert [i.filename for i in b.infolist()] == [i.filename for i in a.infolist()] + [layout.SIGNATURE]
        assert all(a.read(n) == b.read(n) for n in a.namelist())
    again = tmp_path / "again.om2"
    assert main(["sign", str(signed["plain"]), "--key", str(signed["alice_private"]), "-o", str(again)]) == 0
    assert again.read_bytes() == signed["signed"].read_bytes()


def test_an_unsigned_archive_is_refused_when_keys_are_trusted(signed):
    with pytest.raises(om2gen.ArchiveError, match="not signed, and this load trusts only signed archives"):
        om2gen.load(signed["plain"], trusted_keys=[signed["alice"]])


def test_a_signature_by_an_untrusted_key_is_refused(signed):
    with pytest.raises(om2gen.ArchiveError, match="none of them trusted"):
        om2gen.load(signed["signed"], trusted_keys=[signed["mallory"]])


def _entries(path):
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _write(path, entries):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path


def test_a_change_after_signing_is_refused_before_any_code_is_mapped(signed, tmp_path, monkeypatch):
    """A tamperer who edits the library and recomputes every digest still cannot make the
    manifest match the signature; the refusal comes before dlopen."""
    e = _entries(signed["signed"])
    lib_name = next(n for n in e if n.endswith("_om2.so"))
    e[lib_name] = e[lib_name][:-1] + bytes([e[lib_name][-1] ^ 1])
    manifest = refresh_digests(json.loads(e[layout.MANIFEST]), e)
    e[layout.MANIFEST] = json.dumps(manifest).encode()
    bad = _write(tmp_path / "tampered.om2", e)
    from om2gen.formats.om2.reader import Archive
    verified = []   # the library is dlopen'ed only after verify() has checked it
    real = Archive.verify
    monkeypatch.setattr(Archive, "verify", lambda self, name: verified.append(name) or real(self, name))
    with pytest.raises(om2gen.ArchiveError, match="does not match the manifest; the archive was modified after it"):
        om2gen.load(bad, trusted_keys=[signed["alice"]])
    assert verified == []
    # the tamperer's own signature added: the trusted signer's still does not match
    resigned = tmp_path / "resigned.om2"
    sign(bad, signed["mallory_private"], resigned)
    with pytest.raises(om2gen.ArchiveError, match="by trusted key .* does not match the manifest"):
        om2gen.load(resigned, trusted_keys=[signed["alice"]])
    # ... or in place of it: signed by an untrusted key only
    del e[layout.SIGNATURE]
    sign(_write(tmp_path / "stripped.om2", e), signed["mallory_private"], resigned)
    with pytest.raises(om2gen.ArchiveError, match="none of them trusted"):
        om2gen.load(resigned, trusted_keys=[signed["alice"]])


def test_two_signers(signed, tmp_path):
    both = tmp_path / "both.om2"
    sign(signed["signed"], signed["mallory_private"], both)
    for key in ("alice", "mallory"):
        with om2gen.load(both, trusted_keys=[signed[key]]) as m:
            assert m.signed_by == signing.key_id(signing.public_key_bytes(signed[key]))


def test_the_environment_names_the_trusted_keys_for_every_load(signed, monkeypatch):
    monkeypatch.setenv(signing.TRUSTED_KEYS_ENV, str(signed["alice"]))
    with om2gen.load(signed["signed"]) as m:
        assert m.signed_by
    with pytest.raises(om2gen.ArchiveError, match="not signed"):
        om2gen.load(signed["plain"])


@pytest.mark.parametrize("key, needle", [
    ([], r"trusted_keys=\[\] trusts no key"),
    (["/no/such/key.pub"], "cannot read it"),
    ([b"not a key"], "not an Ed25519 public key"),
    ([3], "must be a PEM file path"),
])
def test_bad_trusted_keys_are_input_errors(signed, key, needle):
    with pytest.raises(om2gen.InputError, match=needle):
        om2gen.load(signed["signed"], trusted_keys=key)


def test_the_cli_signs_and_runs_with_a_trusted_key(signed, tmp_path):
    np.save(tmp_path / "x.npy", FEEDS["x"])
    run = [sys.executable, "-m", "om2gen", "run", str(signed["signed"]), "--input", f"x={tmp_path / 'x.npy'}",
           "--output-dir", str(tmp_path)]
    ok = subprocess.run(run + ["--trusted-key", str(signed["alice"])], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(run + ["--trusted-key", str(signed["mallory"])], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and bad.stderr.startswith("om2gen: error: ") and "none of them trusted" in bad.stderr
    again = subprocess.run([sys.executable, "-m", "om2gen", "keygen", str(signed["alice_private"])],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode != 0 and "never overwrites a key" in again.stderr


# --- classic .om files (formats/om/signature.py) ---------------------------------------------------------

W = rand(8, seed=5)


@pytest.fixture(scope="module")
def om(tmp_path_factory, signed):
    """Two models as classic .om files, one of them signed by alice: relu(x + w), with weights,
    and abs(x)."""
    d = tmp_path_factory.mktemp("om_signing")
    model = make_model([helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                       FEEDS, ["y"], {"w": W})
    onnx.save(model, d / "addrelu.onnx")
    onnx.save(make_model([helper.make_node("Abs", ["x"], ["y"])], FEEDS, ["y"]), d / "abs.onnx")
    plain = om2gen.compile(d / "addrelu.onnx", d / "addrelu.om", format="om")
    other = om2gen.compile(d / "abs.onnx", d / "abs.om", format="om")
    assert main(["sign", str(plain), "--key", str(signed["alice_private"]), "-o", str(d / "signed.om")]) == 0
    return {"dir": d, "plain": plain, "other": other, "signed": d / "signed.om", "ref": np.maximum(FEEDS["x"] + W, 0)}


def _alice(signed):
    return signing.key_id(signing.public_key_bytes(signed["alice"]))


def test_a_signed_om_loads_with_its_signers_key(signed, om):
    with om2gen.load(om["signed"], trusted_keys=[signed["alice"]]) as m:
        assert m.signed_by == _alice(signed)
        np.testing.assert_array_equal(m.run(FEEDS)["y"], om["ref"])
    with om2gen.load(om["signed"]) as m:   # a signed OM loads as any other without trusted keys
        assert m.signed_by is None
        np.testing.assert_array_equal(m.run(FEEDS)["y"], om["ref"])


def test_signing_an_om_appends_to_model_def_only_and_is_deterministic(signed, om, tmp_path):
    from om2gen.formats.om.container import read_om
    from om2gen.formats.om.layout import ModelPartitionType as PT
    a, b = read_om(om["plain"]), read_om(om["signed"])
    assert [p.type for p in a.partitions] == [p.type for p in b.partitions]
    for p, q in zip(a.partitions, b.partitions):
        if p.type == PT.MODEL_DEF:   # the signature attr is appended: no byte of the rest changes
            assert q.data.startswith(p.data) and len(q.data) > len(p.data)
        else:
            assert p.data == q.data
    assert a.header.pack()[:76] == b.header.pack()[:76] and a.header.pack()[80:184] == b.header.pack()[80:184]
    again = tmp_path / "again.om"
    assert main(["sign", str(om["plain"]), "--key", str(signed["alice_private"]), "-o", str(again)]) == 0
    assert again.read_bytes() == om["signed"].read_bytes()
    # alice signing again replaces her signature: the same bytes
    sign(om["signed"], signed["alice_private"], again)
    assert again.read_bytes() == om["signed"].read_bytes()


def test_an_om_unsigned_or_signed_by_an_untrusted_key_is_refused(signed, om):
    with pytest.raises(om2gen.ArchiveError, match=r"addrelu.om: not signed, .*`om2gen sign addrelu.om --key"):
        om2gen.load(om["plain"], trusted_keys=[signed["alice"]])
    with pytest.raises(om2gen.ArchiveError, match="none of them trusted"):
        om2gen.load(om["signed"], trusted_keys=[signed["mallory"]])


def test_two_signers_of_an_om(signed, om, tmp_path):
    both = sign(om["signed"], signed["mallory_private"], tmp_path / "both.om")
    for key in ("alice", "mallory"):
        with om2gen.load(both, trusted_keys=[signed[key]]) as m:
            assert m.signed_by == signing.key_id(signing.public_key_bytes(signed[key]))


def _resealed(source, out, changes=None, header=None, reserialize=False):
    """The OM at `source` with partitions replaced ({type: bytes}) and every digest MODEL_DEF records
    recomputed, its signature attr kept as MODEL_DEF's last field: what a tamperer who knows the
    format writes. reserialize: MODEL_DEF re-serialized with the attr inside (a tool rewrote it)."""
    from helpers import refresh_om_digests

    from om2gen.formats.om import proto, signature
    from om2gen.formats.om.container import Partition, read_om, write_om
    from om2gen.formats.om.layout import ModelPartitionType as PT
    o = read_om(source)
    full = bytes(o.partition(PT.MODEL_DEF))
    body, _ = signature.split(full)
    trailer = full[len(body):]
    parts = [Partition(p.type, (changes or {}).get(p.type, bytes(body) if p.type == PT.MODEL_DEF else p.data))
             for p in o.partitions]
    parts += [Partition(t, d) for t, d in (changes or {}).items() if t not in {p.type for p in parts}]
    parts = [Partition(p.type, p.data + trailer) if p.type == PT.MODEL_DEF else p for p in refresh_om_digests(parts)]
    if reserialize:
        parts = [Partition(p.type, proto.ModelDef.FromString(p.data).SerializeToString(deterministic=True))
                 if p.type == PT.MODEL_DEF else p for p in parts]
    write_om(out, parts, header=header or o.header)
    return out


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]


def test_an_om_changed_after_signing_is_refused_before_model_def_is_parsed(signed, om, tmp_path, monkeypatch):
    """Every byte is covered: a weight, a kernel, a task, the header, an added partition, each with
    MODEL_DEF's digests recomputed; the refusal comes before the OM is decoded, so before anything
    is placed or any code is mapped."""
    import dataclasses

    from om2gen.formats.om import reader
    from om2gen.formats.om.container import read_om
    from om2gen.formats.om.layout import ModelPartitionType as PT
    o = read_om(om["signed"])
    weights, kernels, tasks = (bytes(o.partition(t)) for t in (PT.WEIGHTS_DATA, PT.TBE_KERNELS, PT.TASK_INFO))
    cases = {
        "weights": _resealed(om["signed"], tmp_path / "w.om", {PT.WEIGHTS_DATA: _flip(weights, 5)}),
        "kernel": _resealed(om["signed"], tmp_path / "k.om", {PT.TBE_KERNELS: _flip(kernels, len(kernels) // 2)}),
        "tasks": _resealed(om["signed"], tmp_path / "t.om", {PT.TASK_INFO: _flip(tasks, len(tasks) - 1)}),
        "header": _resealed(om["signed"], tmp_path / "h.om", header=dataclasses.replace(o.header, ops=7)),
        "partition added": _resealed(om["signed"], tmp_path / "p.om", {PT.TILING_DATA: b"\0" * 16}),
    }
    parsed = []
    real = reader.read
    monkeypatch.setattr(reader, "read", lambda *a, **k: parsed.append(a) or real(*a, **k))
    for what, path in cases.items():
        with pytest.raises(om2gen.ArchiveError, match="by trusted key .* does not match the OM's header and "
                                                      "partitions; the OM file was modified after it was signed"):
            om2gen.load(path, trusted_keys=[signed["alice"]])
        assert parsed == [], what
    rewritten = _resealed(om["signed"], tmp_path / "r.om", reserialize=True)
    with pytest.raises(om2gen.ArchiveError, match="attr that is not its last field: MODEL_DEF was rewritten"):
        om2gen.load(rewritten, trusted_keys=[signed["alice"]])
    # without recomputed digests, the signature holds (its message names the partitions' sizes)
    # and the partition digests refuse the change, still before any kernel is registered
    from om2gen.formats.om.container import Partition, write_om
    plain_edit = tmp_path / "plain_edit.om"
    write_om(plain_edit, [Partition(p.type, _flip(weights, 5) if p.type == PT.WEIGHTS_DATA else p.data)
                          for p in o.partitions], header=o.header)
    with pytest.raises(om2gen.ArchiveError, match="partition WEIGHTS_DATA does not match the blake3 digest"):
        om2gen.load(plain_edit, trusted_keys=[signed["alice"]])


def test_model_inout_info_changed_after_signing_is_refused(signed, om, tmp_path):
    """MODEL_INOUT_INFO is not among the partitions MODEL_DEF digests (it holds nothing MODEL_DEF
    does not), but the signature covers it as every partition; a load without trusted keys
    refuses the edit as disagreeing with MODEL_DEF."""
    from dataclasses import replace

    from om2gen.formats.om import inout_info
    from om2gen.formats.om.container import Partition, read_om, write_om
    from om2gen.formats.om.layout import ModelPartitionType as PT
    o = read_om(om["signed"])
    info = inout_info.parse(o.partition(PT.MODEL_INOUT_INFO))
    renamed = inout_info.build(replace(info, outputs=(replace(info.outputs[0], name="z"),)))
    assert len(renamed) == len(o.partition(PT.MODEL_INOUT_INFO)) and info.outputs[0].name == "y"
    edited = tmp_path / "inout.om"
    write_om(edited, [Partition(p.type, renamed if p.type == PT.MODEL_INOUT_INFO else p.data) for p in o.partitions],
             header=o.header)
    with pytest.raises(om2gen.ArchiveError, match="does not match the OM's header and partitions; the OM file was "
                                                  "modified after it was signed"):
        om2gen.load(edited, trusted_keys=[signed["alice"]])
    with pytest.raises(om2gen.ArchiveError, match=r"MODEL_INOUT_INFO output 0 \('y'\): name is 'z', MODEL_DEF says "
                                                  r"'y'"):
        om2gen.load(edited)


def test_the_signature_of_another_om_is_refused(signed, om, tmp_path):
    """alice's signature attr taken from the file she signed and appended to another model."""
    from om2gen.formats.om import signature
    from om2gen.formats.om.container import Partition, read_om, write_om
    from om2gen.formats.om.layout import ModelPartitionType as PT
    full = bytes(read_om(om["signed"]).partition(PT.MODEL_DEF))
    trailer = full[len(signature.split(full)[0]):]
    other = read_om(om["other"])
    grafted = tmp_path / "grafted.om"
    write_om(grafted, [Partition(p.type, p.data + trailer if p.type == PT.MODEL_DEF else p.data)
                       for p in other.partitions], header=other.header)
    with om2gen.load(grafted) as m:   # the attr is one GE and om2gen ignore when no key is trusted
        np.testing.assert_array_equal(m.run(FEEDS)["y"], np.abs(FEEDS["x"]))
    with pytest.raises(om2gen.ArchiveError, match="by trusted key .* does not match the OM's header and partitions"):
        om2gen.load(grafted, trusted_keys=[signed["alice"]])


def test_converting_a_signed_om_says_the_archive_is_unsigned(signed, om, tmp_path, capsys):
    out = tmp_path / "converted.om2"
    assert main(["convert", str(om["signed"]), "-o", str(out), "-q", "--trusted-key", str(signed["alice"])]) == 0
    said = capsys.readouterr().out
    assert f"signed (by {_alice(signed)}); the signature covers that file only" in said
    assert f"is unsigned: sign it with `om2gen sign {out} --key KEY.pem`" in said
    with pytest.raises(om2gen.ArchiveError, match="not signed"):
        om2gen.load(out, trusted_keys=[signed["alice"]])
    with om2gen.load(out) as m:
        np.testing.assert_array_equal(m.run(FEEDS)["y"], om["ref"])
    from om2gen.cli.convert import convert
    with pytest.raises(om2gen.ArchiveError, match="none of them trusted"):
        convert(om["signed"], tmp_path / "no.om2", trusted_keys=[signed["mallory"]])
    assert not (tmp_path / "no.om2").exists()


def test_the_cli_runs_a_signed_om_with_its_key(signed, om, tmp_path):
    np.save(tmp_path / "x.npy", FEEDS["x"])
    run = [sys.executable, "-m", "om2gen", "run", str(om["signed"]), "--input", f"x={tmp_path / 'x.npy'}",
           "--output-dir", str(tmp_path), "--trusted-key"]
    ok = subprocess.run(run + [str(signed["alice"])], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), om["ref"])
    bad = subprocess.run(run + [str(signed["mallory"])], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "none of them trusted" in bad.stderr


def test_a_dt_fini_moved_inside_the_code_is_refused_only_by_a_signature(signed, tmp_path):
    """Fuzz case om2-610 (seed 2): the library's DT_FINI moved 7 bytes into its code, every digest
    recomputed. The ELF is well formed and the finalizer still lies in the code, so no structural
    check can tell it from a real build (it crashes at dlclose); a signed load refuses it."""
    import io
    import struct

    from elftools.elf.elffile import ELFFile
    from helpers import refresh_digests
    e = _entries(signed["signed"])
    lib_name = next(n for n in e if n.endswith("_om2.so"))
    data = bytearray(e[lib_name])
    dyn = ELFFile(io.BytesIO(bytes(data))).get_section_by_name(".dynamic")
    at = next(dyn["sh_offset"] + i * 16 + 8 for i, t in enumerate(dyn.iter_tags()) if t.entry.d_tag == "DT_FINI")
    struct.pack_into("<Q", data, at, struct.unpack_from("<Q", data, at)[0] + 7)
    e[lib_name] = bytes(data)
    e[layout.MANIFEST] = json.dumps(refresh_digests(json.loads(e[layout.MANIFEST]), e)).encode()
    with pytest.raises(om2gen.ArchiveError, match="does not match the manifest; the archive was modified after it"):
        om2gen.load(_write(tmp_path / "fini.om2", e), trusted_keys=[signed["alice"]])
