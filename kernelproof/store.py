"""The results store: every verdict in SQLite, so nothing measured is ever lost.

One row per evaluation with the hashes it was keyed on and its whole verdict document. WAL mode
and a busy timeout let several processes (a bench on two GPUs, an agent, a report) write and read
at once; each call opens its own connection, so threads never share one. Other modules (agent
memory) keep their own tables in the same file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelproof.errors import StoreError
from kernelproof.verdict import Verdict, from_json

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    created_at TEXT NOT NULL,
    task_path TEXT NOT NULL,
    task_sha256 TEXT NOT NULL,
    solution_path TEXT NOT NULL,
    solution_sha256 TEXT NOT NULL,
    backend TEXT NOT NULL,
    outcome TEXT NOT NULL,
    codes TEXT NOT NULL,
    device TEXT NOT NULL,
    speedup_best REAL,
    elapsed_s REAL NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS verdicts_key ON verdicts(key);
CREATE INDEX IF NOT EXISTS verdicts_task ON verdicts(task_sha256);
"""
BUSY_TIMEOUT_MS = 60_000  # concurrent writers wait up to a minute rather than fail


def served(store: Any, key: str) -> Verdict | None:
    """The stored verdict an evaluation with this key is answered with: any but a harness error.

    An ``internal_error`` says kernelproof failed, not the solution; it is stored (nothing is lost)
    but evaluated again on the next request. One rule for every executor.
    """
    stored = store.get(key)
    return stored if stored is not None and "internal_error" not in stored.codes else None


def default_db_path() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "kernelproof", "results.sqlite")


def db_path(db: str | os.PathLike | None) -> str | None:
    """Which results store, the one rule every verb and executor follows: ``""`` none, a path
    that file, ``None`` ``$KERNELPROOF_DB`` when set, else :func:`default_db_path`."""
    if db is not None:
        return str(db) or None
    return os.environ.get("KERNELPROOF_DB") or default_db_path()


class Store:
    _init_lock = threading.Lock()

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            with self._init_lock, self.connect() as con:
                con.executescript(SCHEMA_SQL)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the results database {self.path}: {exc}") from None

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            con.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            con.execute("PRAGMA journal_mode=WAL")
            yield con
            con.commit()
        finally:
            con.close()

    def put(self, key: str, verdict: Verdict) -> int:
        doc = verdict.to_json()
        best = verdict.speedup.get("best") or verdict.speedup.get("eager")
        row = (
            key,
            verdict.created_at,
            verdict.task.path,
            verdict.task.sha256,
            verdict.solution.path,
            verdict.solution.sha256,
            verdict.solution.backend,
            verdict.verdict.value,
            ",".join(verdict.codes),
            str(verdict.environment.get("device", "")),
            best.median if best and best.median is not None else None,
            verdict.elapsed_s,
            json.dumps(doc, allow_nan=False),
        )
        try:
            with self.connect() as con:
                cur = con.execute(
                    "INSERT INTO verdicts (key, created_at, task_path, task_sha256, solution_path, solution_sha256, "
                    "backend, outcome, codes, device, speedup_best, elapsed_s, doc) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    row,
                )
                return int(cur.lastrowid or 0)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write to {self.path}: {exc}") from None

    def get(self, key: str) -> Verdict | None:
        with self.connect() as con:
            row = con.execute(
                "SELECT doc FROM verdicts WHERE key = ? ORDER BY id DESC LIMIT 1", (key,)
            ).fetchone()
        return from_json(json.loads(row[0])) if row else None

    def query(
        self,
        task: str | None = None,
        solution: str | None = None,
        outcome: str | None = None,
        code: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Verdict documents, newest first, filtered by substrings of paths, outcome or reason code."""
        sql = "SELECT doc FROM verdicts WHERE 1=1"
        params: list[Any] = []
        if task:
            sql += " AND task_path LIKE ?"
            params.append(f"%{task}%")
        if solution:
            sql += " AND solution_path LIKE ?"
            params.append(f"%{solution}%")
        if outcome:
            sql += " AND outcome = ?"
            params.append(outcome)
        if code:
            sql += " AND (',' || codes || ',') LIKE ?"
            params.append(f"%,{code},%")
        sql += " ORDER BY id DESC"
        if limit:
            sql += " LIMIT ?"
            params.append(int(limit))
        with self.connect() as con:
            return [json.loads(r[0]) for r in con.execute(sql, params)]

    def count(self) -> int:
        with self.connect() as con:
            return int(con.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])


def open_store(db: str | os.PathLike | None) -> Store | None:
    """The results store :func:`db_path` names, opened; ``None`` for ``db=""`` (no store)."""
    path = db_path(db)
    return None if path is None else Store(path)
