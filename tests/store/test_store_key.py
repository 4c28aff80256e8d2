"""The store's signing key: made once, private to its user, never the store file or a sidecar of it."""

from __future__ import annotations

import os
import stat

import pytest

from kernelproof import store_key
from kernelproof.errors import StoreError
from kernelproof.store import Store


def test_the_key_is_made_on_first_use_with_mode_0600_and_then_reused(tmp_path):
    path = tmp_path / "conf" / "store.key"
    key = store_key.load_key(path)
    info = path.stat()
    assert len(key) == store_key.KEY_BYTES and stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.getuid() and store_key.load_key(path) == key
    assert store_key.load_key(tmp_path / "other.key") != key


def test_the_key_lives_where_the_environment_says(monkeypatch, tmp_path):
    monkeypatch.delenv(store_key.KEY_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert store_key.key_path() == tmp_path / "xdg" / "kernelproof" / "store.key"
    monkeypatch.setenv(store_key.KEY_ENV, str(tmp_path / "k"))
    assert store_key.key_path() == tmp_path / "k"


def test_a_store_opened_without_a_key_makes_one_at_key_path(monkeypatch, tmp_path):
    monkeypatch.setenv(store_key.KEY_ENV, str(tmp_path / "keys" / "store.key"))
    Store(tmp_path / "db" / "r.sqlite")
    assert (tmp_path / "keys" / "store.key").is_file()


@pytest.mark.parametrize("suffix", ["", "-wal", "-journal", "-shm"])
def test_a_key_that_is_the_store_file_or_a_sidecar_of_it_is_refused(monkeypatch, tmp_path, suffix):
    monkeypatch.setenv(store_key.KEY_ENV, str(tmp_path / f"r.sqlite{suffix}"))
    with pytest.raises(StoreError, match="is the results store .* or one of its sidecar files"):
        Store(tmp_path / "r.sqlite")


def test_a_store_in_the_folder_tree_above_the_key_is_accepted(monkeypatch, tmp_path):
    """``--db ~/kp.sqlite`` with the key in ~/.config/kernelproof: the same tree, another file."""
    monkeypatch.setenv(store_key.KEY_ENV, str(tmp_path / ".config" / "kernelproof" / "store.key"))
    Store(tmp_path / "kp.sqlite")
    monkeypatch.setenv(store_key.KEY_ENV, str(tmp_path / "store.key"))  # beside it, in the same folder
    assert Store(tmp_path / "kp.sqlite").count() == 0


def test_a_key_others_can_read_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "store.key"
    store_key.load_key(path)
    path.chmod(0o644)
    with pytest.raises(StoreError, match="chmod 600"):
        store_key.load_key(path)


def test_a_key_of_the_wrong_size_is_refused(tmp_path):
    path = tmp_path / "store.key"
    path.write_bytes(b"short")
    path.chmod(0o600)
    with pytest.raises(StoreError, match="holds 5 bytes"):
        store_key.load_key(path)


def test_a_signature_covers_the_table_every_value_and_their_order():
    key = b"k" * 32
    mac = store_key.sign(key, "verdicts", ["a", 1.5, None, float("inf")])
    assert store_key.verifies(key, "verdicts", ["a", 1.5, None, float("inf")], mac)
    for table, values in [
        ("agent_runs", ["a", 1.5, None, float("inf")]),
        ("verdicts", ["a", 1.5, None, 1e308]),
        ("verdicts", [1.5, "a", None, float("inf")]),
        ("verdicts", ["a", 1.5, "", float("inf")]),
    ]:
        assert not store_key.verifies(key, table, values, mac)
    assert not store_key.verifies(b"j" * 32, "verdicts", ["a", 1.5, None, float("inf")], mac)
    assert not store_key.verifies(key, "verdicts", [b"blob"], mac) and not store_key.verifies(
        key, "t", [], None
    )
