"""The key that signs every row of the results store, and the signatures themselves.

Why (issue 15): ``sqlite3`` opens files in C, below any Python audit hook, so a solution that
finds the store's path (``/proc/<ppid>/cmdline`` holds ``--db``) could rewrite a stored verdict
or plant one, and the next request for the same evaluation was served the forgery. Each row now
carries an HMAC-SHA256 over its key and its whole content, under a secret only the parent reads:

- The key is 32 random bytes in a file created on first use with mode 0600, owned by the
  parent's uid, at :func:`key_path` (``$KERNELPROOF_STORE_KEY``, else
  ``$XDG_CONFIG_HOME/kernelproof/store.key``, else ``~/.config/kernelproof/store.key``).
- It is never the store file itself nor one of SQLite's sidecar files beside it (``-wal``,
  ``-journal``, ``-shm``): SQLite would overwrite it, or the key would travel with the store.
  The store may live anywhere its user can write, a home folder included (``--db ~/kp.sqlite``),
  with the key in ``~/.config`` under the same folder tree. The OS sandbox never grants a worker
  a rule over either (sandbox/plan.py).
- A row whose HMAC does not verify is never served (store.py, agent/memory.py).

The signed message is the table's name and the row's values in a fixed column order, encoded as
one JSON array (non-finite numbers as kernelproof/jsonsafe.py spells them), so a value cannot
move from one column to another without breaking the signature.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelproof import jsonsafe
from kernelproof.errors import StoreError

KEY_BYTES = 32  # HMAC-SHA256's block-sized key: the full strength of the hash (RFC 2104, section 3)
KEY_ENV = "KERNELPROOF_STORE_KEY"  # a path to the key file, overriding the default location


def key_path() -> Path:
    """Where the store's signing key lives (kept outside every rule the OS sandbox grants)."""
    override = os.environ.get(KEY_ENV)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "kernelproof" / "store.key"


SIDECARS = ("", "-wal", "-journal", "-shm")  # the store file and what SQLite writes beside it


def load_key(path: Path | None = None, *, store_file: str | os.PathLike | None = None) -> bytes:
    """The signing key, created (0600, this uid) on first use.

    Refused with a StoreError that says how to fix it: a key that is ``store_file`` or one of its
    sidecar files, a key file that others may read or write, one owned by another uid, or one of
    the wrong size.
    """
    path = path or key_path()
    if store_file is not None and _is_store_file(path, Path(store_file)):
        raise StoreError(
            f"the store's signing key {path} is the results store {store_file} or one of its "
            f"sidecar files; point {KEY_ENV} (or XDG_CONFIG_HOME) to another file"
        )
    if not path.exists():
        _create(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise StoreError(f"cannot read the store's signing key {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        _check(path, info)
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise StoreError(
            f"the store's signing key {path} holds {len(data)} bytes, not {KEY_BYTES}; remove it to make a "
            "new one (rows signed with the old key are then unverified, and evaluated again)"
        )
    return data


def sign(key: bytes, table: str, values: Sequence[Any]) -> str:
    """HMAC-SHA256 (hex) of a row: its table's name and its values in the table's column order."""
    message = jsonsafe.dumps([table, *values], ensure_ascii=False, separators=(",", ":"))
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).hexdigest()


def verifies(key: bytes, table: str, values: Sequence[Any], mac: Any) -> bool:
    """Whether ``mac`` is the row's signature (constant-time comparison; a non-string never is)."""
    if not isinstance(mac, str):
        return False
    try:
        expected = sign(key, table, values)
    except (TypeError, ValueError):  # a planted value that JSON cannot hold
        return False
    return hmac.compare_digest(expected, mac)


def _create(path: Path) -> None:
    """Write a fresh key atomically: a complete file appears under ``path``, or another process's."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails if another process made the key first: theirs is kept
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    except OSError as exc:
        raise StoreError(f"cannot create the store's signing key {path}: {exc.strerror}") from None


def _check(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"the store's signing key {path} is not a regular file")
    if info.st_uid != os.getuid():
        raise StoreError(
            f"the store's signing key {path} belongs to uid {info.st_uid}, not to this user ({os.getuid()})"
        )
    if info.st_mode & 0o077:
        raise StoreError(
            f"the store's signing key {path} may be read or written by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}); run: chmod 600 {path}"
        )


def _is_store_file(path: Path, store_file: Path) -> bool:
    """Whether ``path`` names the store file or a sidecar of it (links and ``..`` resolved)."""
    key = os.path.realpath(path)
    store = os.path.realpath(store_file)
    return any(key == store + suffix for suffix in SIDECARS)
