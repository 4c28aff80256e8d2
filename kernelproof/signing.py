"""Who made a certificate, and whether it is unchanged: Ed25519 signatures with a key the user keeps.

A certificate's numbers are only worth what its author is worth: anyone can write a JSON file that
claims 50x. The signature binds every byte of the certificate (the runs, their verdicts, the
embedded task and solution, the claim) to one key, so ``verify`` can say who signed it and refuse
one that was changed afterwards; whether to believe that key stays the reader's decision (their
own key, or one they name with ``--trust``).

The signed bytes are :func:`canonical`: a domain prefix, then the certificate without its
``signature`` member as JSON with sorted keys, no whitespace and ASCII escapes. Python's JSON
round trip keeps every float exact, so the file as written and the file as read give the same
bytes. The ``signature`` member holds the algorithm, the raw public key (base64) and the
signature (base64); the fingerprint shown is recomputed from the key, never read.

Keys: a PKCS#8 PEM private key, mode 0600, under ``$XDG_CONFIG_HOME/kernelproof`` (default
``~/.config/kernelproof``), and the public key beside it as one OpenSSH line (``signing-key.pub``).
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kernelproof.errors import KeyFileError  # defined in the one tree, raised here

ALGORITHM = "ed25519"
KEY_FILE = "signing-key.pem"
# Domain separation: these bytes are a kernelproof certificate, not anything else the key signs.
_PREFIX = b"kernelproof.certificate signature v1\n"


@dataclass(frozen=True)
class SignatureCheck:
    state: str  # "valid" | "invalid" (changed after signing, or damaged) | "missing"
    fingerprint: str | None  # sha256 of the embedded public key, recomputed; None when missing
    public_key: str | None  # the embedded raw public key, base64
    trusted: bool  # valid, and by a key the reader trusts
    trusted_as: str = ""  # which: "your key" or the --trust file that names it


def default_key_path() -> Path:
    """``$XDG_CONFIG_HOME/kernelproof/signing-key.pem``, or under ``~/.config`` without it."""
    root = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(root) / "kernelproof" / KEY_FILE


def public_key_path(private_path: Path) -> Path:
    """Where the public half lives: ``signing-key.pem`` -> ``signing-key.pub``."""
    if private_path.suffix == ".pub":
        return private_path.with_name(private_path.name + ".pub")
    return private_path.with_suffix(".pub")


def create_key(path: Path) -> Ed25519PrivateKey:
    """A new key pair at ``path`` (0600, never over an existing file) and ``path.pub``."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        public_key_path(path).write_text(openssh_line(key.public_key()) + "\n", encoding="ascii")
    except OSError as err:
        raise KeyFileError(f"{path}: cannot create a signing key ({err})") from err
    return key


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The private key at ``path``; refused when others may read it (as ssh does)."""
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except OSError as err:
        raise KeyFileError(f"{path}: cannot read the signing key ({err})") from err
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(
            f"{path}: the signing key may be read by others (mode {stat.S_IMODE(mode):04o}); chmod 600 it"
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as err:
        raise KeyFileError(f"{path}: not an unencrypted PEM private key ({err})") from err
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 key")
    return key


def load_or_create_key(path: Path | None = None) -> tuple[Ed25519PrivateKey, Path, bool]:
    """(key, its path, whether it was created now): the user's key, made on first use."""
    path = path or default_key_path()
    if path.exists():
        return load_private_key(path), path, False
    return create_key(path), path, True


def load_public_key(path: Path) -> bytes:
    """The raw 32-byte public key in ``path``: an OpenSSH line, a PEM public key, or base64 raw bytes."""
    try:
        data = path.read_bytes().strip()
    except OSError as err:
        raise KeyFileError(f"{path}: cannot read the public key ({err})") from err
    try:
        if data.startswith(b"ssh-ed25519 "):
            key = serialization.load_ssh_public_key(data)
        elif data.startswith(b"-----BEGIN"):
            key = serialization.load_pem_public_key(data)
        else:
            raw = base64.b64decode(data, validate=True)
            key = Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, TypeError, binascii.Error, UnsupportedAlgorithm) as err:
        raise KeyFileError(f"{path}: not an Ed25519 public key ({err})") from err
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path}: not an Ed25519 public key")
    return raw_public(key)


def raw_public(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def openssh_line(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode() + (
        " kernelproof"
    )


def fingerprint(raw_public_key: bytes) -> str:
    """``sha256:`` and the hex digest of the raw public key: what a person compares."""
    return "sha256:" + hashlib.sha256(raw_public_key).hexdigest()


def canonical(doc: dict[str, Any]) -> bytes:
    """The bytes a signature covers: the document less ``signature``, in one canonical JSON form."""
    body = {k: v for k, v in doc.items() if k != "signature"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return _PREFIX + text.encode("ascii")


def sign(doc: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """A copy of ``doc`` (plain JSON data: finite numbers) with a ``signature`` member over the rest."""
    signed = copy.deepcopy({k: v for k, v in doc.items() if k != "signature"})
    signed["signature"] = {
        "algorithm": ALGORITHM,
        "public_key": base64.b64encode(raw_public(key)).decode("ascii"),
        "value": base64.b64encode(key.sign(canonical(signed))).decode("ascii"),
        "covers": "the certificate less this member: JSON, sorted keys, no whitespace, ASCII escapes",
    }
    return signed


def check(doc: dict[str, Any], trusted: dict[bytes, str]) -> SignatureCheck:
    """Whether ``doc``'s signature holds, by which key, and whether ``trusted`` (raw key -> what
    names it, e.g. "your key") holds that key."""
    block = doc.get("signature")
    if block is None:
        return SignatureCheck("missing", None, None, False)
    try:
        if block.get("algorithm") != ALGORITHM:
            raise ValueError(f"algorithm {block.get('algorithm')!r}")
        raw = base64.b64decode(block["public_key"], validate=True)
        value = base64.b64decode(block["value"], validate=True)
        Ed25519PublicKey.from_public_bytes(raw).verify(value, canonical(doc))
    except (AttributeError, KeyError, TypeError, ValueError, binascii.Error, InvalidSignature):
        raw = _embedded_key(block)
        key_text = base64.b64encode(raw).decode("ascii") if raw else None
        return SignatureCheck("invalid", fingerprint(raw) if raw else None, key_text, False)
    key_text = base64.b64encode(raw).decode("ascii")
    return SignatureCheck("valid", fingerprint(raw), key_text, raw in trusted, trusted.get(raw, ""))


def _embedded_key(block: Any) -> bytes | None:
    """The public key a damaged signature block names, when it names a well-formed one."""
    try:
        raw = base64.b64decode(block["public_key"], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error):
        return None
    return raw if len(raw) == 32 else None
