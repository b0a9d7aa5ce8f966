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
from om2gen.archive import layout, signing
from om2gen.cli import main

FEEDS = {"x": rand(2, 8, seed=4)}


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    d = tmp_path_factory.mktemp("signing")
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], FEEDS, ["y"])
    onnx.save(model, d / "relu.onnx")
    plain = om2gen.compile(d / "relu.onnx", d / "relu.om2")
    om = om2gen.compile(d / "relu.onnx", d / "relu.om", format="om")
    assert main(["keygen", str(d / "alice.pem")]) == 0
    assert main(["keygen", str(d / "mallory.pem")]) == 0
    assert main(["sign", str(plain), "--key", str(d / "alice.pem"), "-o", str(d / "signed.om2")]) == 0
    return {"dir": d, "plain": plain, "om": om, "signed": d / "signed.om2", "alice": d / "alice.pem.pub",
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


def test_a_classic_om_is_refused_when_keys_are_trusted(signed):
    with pytest.raises(om2gen.ArchiveError, match="classic OM file carries no signature"):
        om2gen.load(signed["om"], trusted_keys=[signed["alice"]])


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
    from om2gen.archive.reader import Archive
    verified = []   # the library is dlopen'ed only after verify() has checked it
    real = Archive.verify
    monkeypatch.setattr(Archive, "verify", lambda self, name: verified.append(name) or real(self, name))
    with pytest.raises(om2gen.ArchiveError, match="does not match the manifest; the archive was modified after it"):
        om2gen.load(bad, trusted_keys=[signed["alice"]])
    assert verified == []
    # the tamperer's own signature added: the trusted signer's still does not match
    resigned = tmp_path / "resigned.om2"
    signing.sign(bad, signed["mallory_private"], resigned)
    with pytest.raises(om2gen.ArchiveError, match="by trusted key .* does not match the manifest"):
        om2gen.load(resigned, trusted_keys=[signed["alice"]])
    # ... or in place of it: signed by an untrusted key only
    del e[layout.SIGNATURE]
    signing.sign(_write(tmp_path / "stripped.om2", e), signed["mallory_private"], resigned)
    with pytest.raises(om2gen.ArchiveError, match="none of them trusted"):
        om2gen.load(resigned, trusted_keys=[signed["alice"]])


def test_two_signers(signed, tmp_path):
    both = tmp_path / "both.om2"
    signing.sign(signed["signed"], signed["mallory_private"], both)
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
