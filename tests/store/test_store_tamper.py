"""A store changed behind kernelproof's back: refused, or its changed rows never served (issue 15).

Each attack is what a solution could do with ``sqlite3`` once it knows the ``--db`` path (it is
in ``/proc/<ppid>/cmdline``): plant a trigger that rewrites verdicts to pass, rewrite a row,
plant a malformed one. The store must refuse the file or pass over the row, and say so.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from cli_support import run_child

from kernelproof import store_key
from kernelproof.errors import StoreError
from kernelproof.store import Store, served
from kernelproof.verdict import FileRef, Outcome, Reason, ReasonCode, Verdict

FORGE = """
CREATE TRIGGER forge AFTER INSERT ON verdicts BEGIN
    UPDATE verdicts SET outcome = 'pass', codes = '',
        doc = replace(doc, '"verdict":"fail"', '"verdict":"pass"') WHERE id = NEW.id;
END;
"""
# The table as the first release made it: no signature, no digests, no limits.
OLD_SCHEMA = """
CREATE TABLE verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, created_at TEXT NOT NULL,
    task_path TEXT NOT NULL, task_sha256 TEXT NOT NULL, solution_path TEXT NOT NULL,
    solution_sha256 TEXT NOT NULL, backend TEXT NOT NULL, outcome TEXT NOT NULL, codes TEXT NOT NULL,
    device TEXT NOT NULL, speedup_best REAL, elapsed_s REAL NOT NULL, doc TEXT NOT NULL
);
"""


def failing(path: str = "sol.py") -> Verdict:
    return Verdict(
        verdict=Outcome.FAIL,
        reasons=(Reason(ReasonCode.MISMATCH, "values differ"),),
        task=FileRef("task.py", "a" * 64),
        solution=FileRef(path, "b" * 64, "triton"),
        correctness=None,
        timing=None,
        speedup={},
        roofline=None,
        coverage=None,
        environment={"device": "cpu"},
        reward=0.0,
        created_at="2026-12-01T00:00:00+00:00",
    )


def sql(path, script: str) -> None:
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()


def test_a_planted_trigger_that_forges_passes_gets_the_store_refused_with_a_way_out(tmp_path):
    db = tmp_path / "r.sqlite"
    Store(db).put("k0", failing())
    sql(db, FORGE)
    with pytest.raises(StoreError) as err:
        Store(db)
    text = str(err.value)
    assert "trigger 'forge'" in text and "never creates triggers" in text
    assert f"mv '{db}'" in text and 'DROP TRIGGER "forge";' in text


def test_a_trigger_planted_while_the_store_is_open_stops_the_next_write(tmp_path):
    db = tmp_path / "r.sqlite"
    store = Store(db)
    sql(db, FORGE)
    with pytest.raises(StoreError, match="trigger 'forge'"):
        store.put("k1", failing())
    sql(db, "DROP TRIGGER forge;")
    store.put("k1", failing())  # the way out the message gives works
    assert store.get("k1").verdict is Outcome.FAIL


def test_a_planted_view_gets_the_store_refused(tmp_path):
    db = tmp_path / "r.sqlite"
    Store(db)
    sql(db, "CREATE VIEW passes AS SELECT * FROM verdicts WHERE outcome = 'pass';")
    with pytest.raises(StoreError, match="view 'passes'"):
        Store(db)


def test_every_connection_distrusts_the_schema(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    with store.connect() as con:
        assert con.execute("PRAGMA trusted_schema").fetchone()[0] == 0


def test_a_row_rewritten_with_sqlite3_is_not_served_and_is_listed_as_unverified(tmp_path):
    db = tmp_path / "r.sqlite"
    store = Store(db)
    store.put("k", failing())
    doc = json.dumps({**failing().to_json(), "verdict": "pass", "reasons": []})
    sql(db, f"UPDATE verdicts SET outcome = 'pass', codes = '', doc = '{doc}';")
    assert store.get("k") is None and served(store, "k", {"timeout_s": 600.0}) is None
    assert store.query() == []
    (row,) = store.rows()
    assert not row.verified and "signature does not match" in row.problem and row.outcome == "pass"
    (marked,) = store.query(unverified=True)
    assert marked["unverified"] == row.problem and marked["row"] == row.id
    note = store.listing_note(0)
    assert "1 stored row does not verify and is never served" in note and "claims 'pass'" in note


def test_a_row_moved_to_another_key_is_not_served(tmp_path):
    db = tmp_path / "r.sqlite"
    store = Store(db)
    store.put("key-of-a-wrong-solution", failing())
    sql(db, "UPDATE verdicts SET key = 'key-of-another';")
    assert store.get("key-of-another") is None


def test_rows_signed_with_another_key_do_not_verify(tmp_path):
    db = tmp_path / "r.sqlite"
    Store(db, key=b"k" * 32).put("k", failing())
    assert Store(db, key=b"j" * 32).get("k") is None


@pytest.mark.parametrize(
    "doc",
    ["{not json", json.dumps({"schema": "kernelproof.verdict/2", "verdict": "pass"}), json.dumps([1, 2])],
    ids=["not-json", "missing-fields", "not-an-object"],
)
def test_a_malformed_signed_document_is_not_served_and_nothing_crashes(tmp_path, doc):
    """Even a row that verifies (so written with the key) is served only if it reads as a verdict."""
    db = tmp_path / "r.sqlite"
    store = Store(db)
    store.put("k", failing())
    sql(db, f"UPDATE verdicts SET doc = '{doc}';")
    with sqlite3.connect(db) as con:
        values = con.execute("SELECT * FROM verdicts").fetchone()[1:-1]
        mac = store_key.sign(store._key, "verdicts", values)
        con.execute("UPDATE verdicts SET hmac = ?", (mac,))
    assert served(store, "k", {"timeout_s": 600.0}) is None
    (row,) = store.rows()
    assert not row.verified and "does not read as a verdict" in row.problem


def test_a_malformed_planted_row_does_not_crash_eval(tmp_path):
    """Planted under the very key the next evaluation looks up: it is evaluated afresh."""
    from kernelproof.api import evaluate, evaluation_key
    from kernelproof.options import EvalOptions

    task, sol = "tests/data/tasks/scale_relu.py", "tests/data/solutions/wrong_dtype.py"
    db = tmp_path / "r.sqlite"
    opts = EvalOptions(device="cpu", correctness_only=True, db=str(db))
    Store(db)
    key = evaluation_key(task, sol, opts, "cpu")
    with sqlite3.connect(db) as con:
        con.execute(
            "INSERT INTO verdicts (key, created_at, task_path, task_sha256, solution_path, solution_sha256, "
            "backend, outcome, codes, device, speedup_best, elapsed_s, doc, hmac) "
            "VALUES (?, 'x', ?, '', ?, '', '', 'pass', '', 'cpu', NULL, 1, '{\"schema\": 3', 'ff')",
            (key, task, sol),
        )
    v = evaluate(task, sol, opts)
    assert v.stored is None and "wrong_dtype" in v.codes
    assert [r.verified for r in Store(db).rows()] == [True, False]


def test_an_older_store_is_migrated_and_its_unsigned_rows_are_never_served(tmp_path):
    db = tmp_path / "old.sqlite"
    sql(db, OLD_SCHEMA)
    with sqlite3.connect(db) as con:
        doc = json.dumps({**failing().to_json(), "schema": "kernelproof.verdict/1"})
        con.execute(
            "INSERT INTO verdicts (key, created_at, task_path, task_sha256, solution_path, solution_sha256, "
            "backend, outcome, codes, device, speedup_best, elapsed_s, doc) "
            "VALUES ('k', 'then', 'task.py', '', 'sol.py', '', '', 'fail', 'mismatch', 'cpu', NULL, 1, ?)",
            (doc,),
        )
    store = Store(db)
    assert store.get("k") is None
    (row,) = store.rows()
    assert not row.verified and row.problem.startswith("unsigned")
    store.put("k", failing())  # the migrated table takes signed rows
    assert store.get("k").verdict is Outcome.FAIL and store.count() == 2


def test_results_lists_unverified_rows_without_crashing(tmp_path):
    db = tmp_path / "r.sqlite"
    store = Store(db)
    store.put("k", failing("honest.py"))
    store.put("k2", failing("other.py"))
    sql(db, "UPDATE verdicts SET doc = '{broken' WHERE solution_path = 'other.py';")
    r = run_child("results", "--db", str(db), timeout=120)
    assert r.code == 0, r.output
    assert "1 shown of 2 stored" in r.out and "unverified row 2: task.py / other.py" in r.out


def test_a_crafted_trigger_name_is_not_echoed_into_a_command_to_run(tmp_path):
    db = tmp_path / "r.sqlite"
    Store(db)
    sql(db, "CREATE TRIGGER \"x'; rm -rf ~; '\" AFTER INSERT ON verdicts BEGIN SELECT 1; END;")
    with pytest.raises(StoreError) as err:
        Store(db)
    assert "DROP" not in str(err.value) and f"mv '{db}'" in str(err.value)
