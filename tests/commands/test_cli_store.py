"""The results store as the command line meets it: anywhere the user can write, one exit code (2)
and one line for every problem with it, read-only stores still read, missing folders named, the
default store for ``report`` too, and tampered rows named in one line by ``results`` and ``report``."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess

import pytest
from cli_support import DATA, Ran, make_verdict, run_child, run_here, run_piped

from kernelproof import store_key
from kernelproof.store import Store

TASK = str(DATA / "tasks" / "scale_relu.py")
GOOD = str(DATA / "solutions" / "scale_relu_triton.py")


def _filled(path) -> str:
    Store(path).put("k1", make_verdict("pass", task="suite/a.py", solution="sols/a.py"))
    return str(path)


def test_a_store_in_the_home_folder_is_used_with_the_key_in_its_config_folder(capsys, monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    for name in (store_key.KEY_ENV, "XDG_CONFIG_HOME", "XDG_DATA_HOME", "KERNELPROOF_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    db = os.path.expanduser("~/kp.sqlite")
    _filled(db)
    ran = run_here(capsys, "results", "--db", db)
    assert ran.code == 0, ran.err
    assert "1 shown of 1 stored" in ran.out and (home / ".config" / "kernelproof" / "store.key").is_file()


def _corrupt(tmp_path) -> str:
    db = tmp_path / "bad.sqlite"
    db.write_bytes(b"this is not a database, whatever its name says " * 200)
    return str(db)


@pytest.mark.parametrize(
    "verb",
    [
        ("results",),
        ("report", "--md", "r.md"),
        ("eval", TASK, GOOD, "--device", "cpu", "--correctness-only"),
        ("bench", "suite", "--solutions", "sols", "--device", "cpu"),
    ],
)
def test_every_verb_exits_2_with_one_line_for_a_corrupt_store(tmp_path, verb):
    db = _corrupt(tmp_path)
    for folder, source in (("suite", TASK), ("sols", GOOD)):
        (tmp_path / folder).mkdir()
        shutil.copy(source, tmp_path / folder / "a.py")
    ran = run_piped(*verb, "--db", db, cwd=tmp_path)
    assert ran.code == 2, (verb, ran)
    assert ran.err.count("\n") == 1 and ran.err.startswith("error: "), ran.err
    assert db in ran.err and "Traceback" not in ran.err


def test_a_missing_folder_in_db_is_an_error_naming_it_and_nothing_is_made(tmp_path):
    folder = tmp_path / "no" / "such"
    for verb in (("results",), ("eval", TASK, GOOD, "--device", "cpu", "--correctness-only")):
        ran = run_piped(*verb, "--db", str(folder / "x.sqlite"))
        assert ran.code == 2, ran
        assert f"the folder {folder} of the results database" in ran.err and "does not exist" in ran.err
        assert ran.err.count("\n") == 1
    assert not (tmp_path / "no").exists()


def test_the_default_stores_folder_is_made_on_first_use(monkeypatch, tmp_path):
    from kernelproof.store import open_store

    monkeypatch.delenv("KERNELPROOF_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    store = open_store(None)
    assert store is not None and store.path == str(tmp_path / "data" / "kernelproof" / "results.sqlite")
    assert os.path.isfile(store.path)


def test_report_without_db_or_inputs_reads_the_default_store(monkeypatch, tmp_path):
    db = _filled(tmp_path / "default.sqlite")
    ran = run_piped("report", "--md", str(tmp_path / "r.md"), env={"KERNELPROOF_DB": db})
    assert ran.code == 0, ran.err
    assert "1 verdict on 1 task" in ran.out and (tmp_path / "r.md").is_file()


def test_results_and_report_name_a_tampered_row_in_one_whole_line(tmp_path):
    db = _filled(tmp_path / "r.sqlite")
    Store(db).put("k2", make_verdict("fail", ("mismatch",), task="suite/b.py", solution="sols/b.py"))
    _tamper_one(db)
    listed = run_piped("results", "--db", db, columns=80)
    reported = run_piped("report", "--db", db, "--md", str(tmp_path / "r.md"), columns=80)
    assert listed.code == 0 and reported.code == 0, (listed, reported)
    ends = ("its signature does not match (changed outside kernelproof)", "; left out of the report")
    for text, end in zip((listed.out, reported.err), ends):
        found = [ln for ln in text.splitlines() if "unverified row" in ln]
        assert len(found) == 1, text
        row = found[0]
        assert "\\n" not in row and "\x1b" not in row and "suite/ forged\\x1b[2K" in row
        assert row.rstrip().endswith(end), row
        assert "x" * 260 in row  # the claim whole, not cut
    assert "1 verdict on 1 task" in reported.out


def _tamper_one(db: str) -> None:
    con = sqlite3.connect(db)
    con.execute(
        "UPDATE verdicts SET task_path = ? WHERE key = 'k1'", ("suite/\nforged\x1b[2K" + "x" * 260 + ".py",)
    )
    con.commit()
    con.close()


def _read_only(tmp_path, db: str, *args: str) -> Ran:
    """``kernelproof ARGS`` with the store's folder read-only: a read-only bind mount for root (whom
    file modes do not stop), the folder's and file's write bits removed otherwise."""
    folder = os.path.dirname(db)
    if os.geteuid() != 0:
        os.chmod(db, 0o444)
        os.chmod(folder, 0o555)
        try:
            return run_child(*args)
        finally:
            os.chmod(folder, 0o755)
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("root without a mount namespace: no way to make a read-only folder here")
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return run_child(*args, wrap=(unshare, "-m", "sh", "-c", script, folder))


def test_a_read_only_store_is_still_listed_and_reported(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = _filled(folder / "r.sqlite")
    with sqlite3.connect(db) as con:  # a WAL store left with no -wal or -shm file beside it
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    listed = _read_only(tmp_path, db, "results", "--db", db)
    assert listed.code == 0, listed.err
    assert "1 shown of 1 stored" in listed.out
    md = tmp_path / "r.md"
    reported = _read_only(tmp_path, db, "report", "--db", db, "--md", str(md))
    assert reported.code == 0, reported.err
    assert md.is_file()
    evaluated = _read_only(tmp_path, db, "eval", TASK, GOOD, "--device", "cpu", "--db", db)
    assert evaluated.code == 2 and evaluated.err.count("\n") == 1, evaluated.err
    assert "readonly database" in evaluated.err and db in evaluated.err and "worker" not in evaluated.err


def test_results_before_anything_was_stored_in_the_default_store_says_so(tmp_path):
    db = tmp_path / "never" / "results.sqlite"
    ran = run_piped("results", env={"KERNELPROOF_DB": str(db)})
    assert ran.code == 0, ran
    assert "0 shown: nothing stored yet in" in ran.out and not db.parent.exists()
