"""Signing keys and signatures: who made a certificate, and whether it was changed since."""

from __future__ import annotations

import base64
import json
import stat

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kernelproof import signing

DOC = {
    "schema": "kernelproof.certificate/1",
    "claim": {"verdict": "pass", "x": 2.0100000000000002},
    "n": [1, 2],
}


def test_a_new_key_is_private_to_its_owner_and_never_overwritten(tmp_path):
    path = tmp_path / "cfg" / "signing-key.pem"
    key, where, created = signing.load_or_create_key(path)
    assert created and where == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert signing.public_key_path(path) == tmp_path / "cfg" / "signing-key.pub"
    again, _, created = signing.load_or_create_key(path)
    assert not created and signing.raw_public(again) == signing.raw_public(key)
    with pytest.raises(signing.KeyFileError, match="cannot create"):
        signing.create_key(path)


def test_the_default_key_lives_under_the_users_config_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert signing.default_key_path() == tmp_path / "kernelproof" / "signing-key.pem"


def test_a_key_others_may_read_is_refused(tmp_path):
    path = tmp_path / "k.pem"
    signing.create_key(path)
    path.chmod(0o644)
    with pytest.raises(signing.KeyFileError, match="may be read by others.*chmod 600"):
        signing.load_private_key(path)


def test_public_keys_load_from_openssh_pem_or_base64(tmp_path):
    key = signing.create_key(tmp_path / "k.pem")
    raw = signing.raw_public(key)
    assert signing.load_public_key(tmp_path / "k.pub") == raw  # the OpenSSH line written beside it
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "p.pem").write_bytes(pem)
    (tmp_path / "p.b64").write_text(base64.b64encode(raw).decode())
    assert signing.load_public_key(tmp_path / "p.pem") == raw == signing.load_public_key(tmp_path / "p.b64")
    (tmp_path / "bad").write_text("not a key")
    with pytest.raises(signing.KeyFileError, match="not an Ed25519 public key"):
        signing.load_public_key(tmp_path / "bad")


def test_a_signature_survives_writing_and_reading_the_json():
    key = Ed25519PrivateKey.generate()
    doc = signing.sign(DOC, key)
    reread = json.loads(json.dumps(doc, indent=1))
    result = signing.check(reread, {signing.raw_public(key): "your key"})
    assert result.state == "valid" and result.trusted and result.trusted_as == "your key"
    assert result.fingerprint == signing.fingerprint(signing.raw_public(key))
    assert "signature" not in DOC  # signing copies


def test_any_change_breaks_the_signature():
    key = Ed25519PrivateKey.generate()
    trusted = {signing.raw_public(key): "your key"}
    doc = signing.sign(DOC, key)
    for edit in (
        lambda d: d["claim"].update(x=2.01),
        lambda d: d["n"].append(3),
        lambda d: d.update(extra=None),
        lambda d: d["signature"].update(value=base64.b64encode(b"\0" * 64).decode()),
    ):
        changed = json.loads(json.dumps(doc))
        edit(changed)
        assert signing.check(changed, trusted).state == "invalid"


def test_a_signature_naming_another_key_does_not_hold():
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    doc = signing.sign(DOC, key)
    doc["signature"]["public_key"] = base64.b64encode(signing.raw_public(other)).decode()
    result = signing.check(doc, {signing.raw_public(other): "your key"})
    assert result.state == "invalid" and not result.trusted
    assert result.fingerprint == signing.fingerprint(signing.raw_public(other))


def test_a_missing_or_malformed_signature_is_said_so():
    assert signing.check(dict(DOC), {}).state == "missing"
    for block in ("x", {"algorithm": "rsa"}, {"algorithm": "ed25519", "public_key": "!!", "value": ""}):
        assert signing.check(dict(DOC, signature=block), {}).state == "invalid"


def test_an_untrusted_key_is_valid_but_not_trusted():
    key = Ed25519PrivateKey.generate()
    result = signing.check(signing.sign(DOC, key), {})
    assert result.state == "valid" and not result.trusted
