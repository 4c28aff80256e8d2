"""The agent's memory: every run, prompt, answer, candidate and verdict, in SQLite.

The tables live in the same database file as the verdict store, beside its tables and prefixed
``agent_``. The calls table is the replay log, keyed by (run, turn, sample) with the prompt's hash
beside each answer. WAL mode lets readers (``kernelproof report``) look at a run while it is
written; sqlite3 connections are not shareable across threads, so each thread opens its own.

The store's rules hold here too (kernelproof/store.py, issue 15): every row is signed with the
store's key over all its columns, a database with triggers or views is refused, and a row that
does not verify (changed outside kernelproof, written before rows were signed, or unreadable) is
never used: a resumed run asks or evaluates again instead, and the row is reported
(:class:`UnverifiedRowWarning`, and :attr:`Memory.unverified`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelproof import jsonsafe, store_key
from kernelproof.agent.agent_errors import ReplayError
from kernelproof.agent.call_records import Candidate, Completion, LoggedCall, Prompt, Rejection
from kernelproof.agent.ranking import score
from kernelproof.store import open_connection, refuse_foreign_objects
from kernelproof.verdict import from_json as verdict_from_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_runs (
    run_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    task_path TEXT NOT NULL,
    task_sha256 TEXT NOT NULL,
    model TEXT NOT NULL,
    base_url TEXT NOT NULL DEFAULT '',            -- the server, for an OpenAI-compatible one
    strategy TEXT NOT NULL,
    out_dir TEXT NOT NULL,
    options_json TEXT NOT NULL,
    replay_of TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running',      -- running | finished | failed
    stop_reason TEXT NOT NULL DEFAULT '',
    best_id TEXT NOT NULL DEFAULT '',
    finished_at TEXT NOT NULL DEFAULT '',
    summary_json TEXT NOT NULL DEFAULT '{}',
    hmac TEXT                                     -- signature over every other column
);
CREATE TABLE IF NOT EXISTS agent_calls (
    run_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    sample INTEGER NOT NULL,
    kind TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    prompt_json TEXT NOT NULL,
    response TEXT,                                -- NULL when the call failed
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,                                -- NULL: the model's price is unknown
    finish_reason TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 0,          -- HTTP attempts; 0: served from a log
    latency_s REAL NOT NULL DEFAULT 0,
    usage_estimated INTEGER NOT NULL DEFAULT 0,
    origin TEXT NOT NULL DEFAULT 'live',          -- live | resumed | replayed
    error TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    hmac TEXT,
    PRIMARY KEY (run_id, turn, sample)
);
CREATE TABLE IF NOT EXISTS agent_candidates (
    run_id TEXT NOT NULL,
    candidate_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    sample INTEGER NOT NULL,
    kind TEXT NOT NULL,
    parents_json TEXT NOT NULL,
    idea TEXT NOT NULL,
    path TEXT NOT NULL,
    source TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    rejection_json TEXT,
    verdict_json TEXT,
    duplicate_of TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL,                        -- pass | fail | error | rejected
    score_low REAL,                               -- lower 95% CI bound of the best speedup (pass only)
    gpu_seconds REAL NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    hmac TEXT,
    PRIMARY KEY (run_id, candidate_id)
);
"""


# Signed columns of each table, in the order the signature covers them (all but hmac).
COLUMNS = {
    "agent_runs": (
        "run_id", "created_at", "task_path", "task_sha256", "model", "base_url", "strategy", "out_dir",
        "options_json", "replay_of", "status", "stop_reason", "best_id", "finished_at", "summary_json",
    ),
    "agent_calls": (
        "run_id", "turn", "sample", "kind", "prompt_hash", "prompt_json", "response", "input_tokens",
        "output_tokens", "cost_usd", "finish_reason", "model", "attempts", "latency_s", "usage_estimated",
        "origin", "error", "created_at",
    ),
    "agent_candidates": (
        "run_id", "candidate_id", "turn", "sample", "kind", "parents_json", "idea", "path", "source",
        "source_sha256", "rejection_json", "verdict_json", "duplicate_of", "outcome", "score_low",
        "gpu_seconds", "created_at",
    ),
}  # fmt: skip
KEYS = {
    "agent_runs": ("run_id",),
    "agent_calls": ("run_id", "turn", "sample"),
    "agent_candidates": ("run_id", "candidate_id"),
}
# REAL columns: SQLite stores NaN as NULL, so non-finite values go in as jsonsafe's strings.
REAL = {"cost_usd", "latency_s", "score_low", "gpu_seconds"}
BUSY_TIMEOUT_MS = 30_000


class UnverifiedRowWarning(UserWarning):
    """A row of the agent's tables that does not verify was left unused."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Memory:
    """One database file; a connection per thread, opened on first use. Rows signed with ``key``
    (default: the store's key, kernelproof/store_key.py)."""

    def __init__(self, path: str | Path, *, key: bytes | None = None):
        self.path = str(Path(path).resolve())  # recorded in run.json: must hold from any directory
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._key = key or store_key.load_key(store_file=self.path)
        self._local = threading.local()
        self.unverified: list[str] = []  # rows left unused because they do not verify, described
        self.conn.executescript(SCHEMA)
        with self._write():
            for table in COLUMNS:
                if "hmac" not in {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}:
                    self.conn.execute(f"ALTER TABLE {table} ADD COLUMN hmac TEXT")  # old rows: unverified

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = open_connection(self.path, BUSY_TIMEOUT_MS)  # refuses triggers and views
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, its lock taken before the schema is checked again."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            refuse_foreign_objects(conn, self.path)
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _sign(self, table: str, key: tuple[Any, ...]) -> None:
        """Sign a row as it now stands (inside the write transaction that wrote it)."""
        where = " AND ".join(f"{k} = ?" for k in KEYS[table])
        cols = COLUMNS[table]
        row = self.conn.execute(f"SELECT {', '.join(cols)} FROM {table} WHERE {where}", key).fetchone()
        mac = store_key.sign(self._key, table, tuple(row))
        self.conn.execute(f"UPDATE {table} SET hmac = ? WHERE {where}", (mac, *key))

    def _insert(self, table: str, fields: dict[str, Any], *, replace: bool = False) -> None:
        values = [_cell(k, v) for k, v in fields.items()]
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        with self._write():
            self.conn.execute(
                f"{verb} INTO {table} ({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))})", values
            )
            self._sign(table, tuple(fields[k] for k in KEYS[table]))

    def _verified(self, table: str, rows: list[sqlite3.Row]) -> Iterator[dict[str, Any]]:
        """The rows that verify, as dicts with their numbers decoded; the others reported."""
        for r in rows:
            what = f"{table} row {', '.join(f'{k}={_shown(r[k])}' for k in KEYS[table] if k in r.keys())}"
            try:
                values = tuple(r[c] for c in COLUMNS[table])
                ok = store_key.verifies(self._key, table, values, r["hmac"])
                row = {c: jsonsafe.number(v) if c in REAL else v for c, v in zip(COLUMNS[table], values)}
            except (IndexError, ValueError) as exc:
                ok, why = False, f"unreadable ({exc})"
            else:
                why = (
                    "unsigned (written before rows were signed)"
                    if r["hmac"] is None
                    else "its signature does not match"
                )
            if ok:
                yield row
            else:
                self._report(f"{what}: {why}")

    def _report(self, text: str) -> None:
        self.unverified.append(text)
        warnings.warn(f"{self.path}: {text}; it is not used", UnverifiedRowWarning, stacklevel=4)

    # --- runs ------------------------------------------------------------------------------
    def create_run(self, **fields: Any) -> None:
        fields.setdefault("created_at", now())
        self._insert("agent_runs", fields)

    def update_run(self, run_id: str, **fields: Any) -> None:
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self._write():
            self.conn.execute(
                f"UPDATE agent_runs SET {sets} WHERE run_id = ?",
                (*(_cell(k, v) for k, v in fields.items()), run_id),
            )
            self._sign("agent_runs", (run_id,))

    def run(self, run_id: str) -> dict[str, Any] | None:
        """A run's record; ReplayError if it is stored but does not verify (it cannot be resumed)."""
        rows = self.conn.execute("SELECT * FROM agent_runs WHERE run_id = ?", (run_id,)).fetchall()
        if not rows:
            return None
        found = list(self._verified("agent_runs", rows))
        if not found:
            raise ReplayError(
                f"the record of run {run_id!r} in {self.path} does not verify ({self.unverified[-1]}): "
                "it was changed outside kernelproof or written before rows were signed, so it is not "
                "resumed or replayed from the store; start a new run (a replay.jsonl file can still be "
                "given to --replay)"
            )
        return found[0]

    # --- calls (the replay log) ------------------------------------------------------------
    def record_call(
        self,
        run_id: str,
        turn: int,
        sample: int,
        kind: str,
        prompt: Prompt,
        completion: Completion | None,
        *,
        cost_usd: float | None,
        origin: str = "live",
        error: str = "",
    ) -> None:
        c = completion
        fields = {
            "run_id": run_id,
            "turn": turn,
            "sample": sample,
            "kind": kind,
            "prompt_hash": prompt.digest(),
            "prompt_json": json.dumps(prompt.to_json()),
            "response": c.text if c else None,
            "input_tokens": c.input_tokens if c else 0,
            "output_tokens": c.output_tokens if c else 0,
            "cost_usd": cost_usd,
            "finish_reason": c.finish_reason if c else "",
            "model": c.model if c else "",
            "attempts": c.attempts if c else 0,
            "latency_s": c.latency_s if c else 0.0,
            "usage_estimated": int(c.usage_estimated) if c else 0,
            "origin": origin,
            "error": error,
            "created_at": now(),
        }
        self._insert("agent_calls", fields, replace=True)

    def calls(self, run_id: str) -> list[dict[str, Any]]:
        """A run's calls that verify, in order (numbers decoded: a non-finite cost comes back a float)."""
        rows = self.conn.execute(
            "SELECT * FROM agent_calls WHERE run_id = ? ORDER BY turn, sample", (run_id,)
        ).fetchall()
        return list(self._verified("agent_calls", rows))

    def logged_calls(self, run_id: str) -> dict[tuple[int, int], LoggedCall]:
        """The answered calls of a run: its replay log (a call whose row does not verify is asked again)."""
        return {
            (r["turn"], r["sample"]): LoggedCall(
                r["turn"],
                r["sample"],
                r["kind"],
                r["prompt_hash"],
                r["response"],
                r["input_tokens"],
                r["output_tokens"],
                r["cost_usd"],
                r["finish_reason"],
                r["model"],
            )
            for r in self.calls(run_id)
            if r["response"] is not None
        }

    def failed_calls(self, run_id: str) -> dict[tuple[int, int], str]:
        """Calls of a run that got no answer, with their errors."""
        return {(r["turn"], r["sample"]): r["error"] for r in self.calls(run_id) if r["response"] is None}

    # --- candidates ------------------------------------------------------------------------
    def record_candidate(self, run_id: str, c: Candidate) -> None:
        v = c.verdict
        s = score(v) if c.rejection is None else None
        outcome = "rejected" if c.rejection is not None else (v.verdict.value if v is not None else "pending")
        fields = {
            "run_id": run_id,
            "candidate_id": c.id,
            "turn": c.turn,
            "sample": c.sample,
            "kind": c.kind,
            "parents_json": json.dumps(list(c.parents)),
            "idea": c.idea,
            "path": c.path,
            "source": c.source,
            "source_sha256": c.source_sha256,
            "rejection_json": json.dumps(c.rejection.__dict__) if c.rejection else None,
            "verdict_json": v.dumps(indent=None) if v is not None else None,
            "duplicate_of": c.duplicate_of,
            "outcome": outcome,
            "score_low": s[0] if s is not None and s[0] > float("-inf") else None,
            "gpu_seconds": c.gpu_s,
            "created_at": now(),
        }
        self._insert("agent_candidates", fields, replace=True)

    def candidates(self, run_id: str) -> list[Candidate]:
        """A run's candidates whose rows verify and read back (the others are reported, not used)."""
        rows = self.conn.execute(
            "SELECT * FROM agent_candidates WHERE run_id = ? ORDER BY turn, sample", (run_id,)
        ).fetchall()
        out = []
        for r in self._verified("agent_candidates", rows):
            try:
                out.append(_candidate(r))
            except ReplayError as exc:
                self._report(str(exc))
        return out

    def stored_candidates(self, run_id: str) -> dict[str, Candidate]:
        """Judged candidates of a run by id (what a resumed run reuses instead of evaluating again)."""
        return {c.id: c for c in self.candidates(run_id) if c.verdict is not None or c.rejection is not None}


def _cell(column: str, value: Any) -> Any:
    """A value as it is bound: REAL columns get non-finite numbers as jsonsafe's strings."""
    if column in REAL and isinstance(value, (int, float)) and not isinstance(value, bool):
        return jsonsafe.encode(float(value))
    return value


def _shown(value: Any) -> str:
    text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(value))
    return text if len(text) <= 80 else text[:80] + "..."


def _candidate(r: dict[str, Any]) -> Candidate:
    """A candidate from its verified row; ReplayError if its JSON columns do not read back."""
    try:
        verdict = verdict_from_json(json.loads(r["verdict_json"])) if r["verdict_json"] else None
        rejection = Rejection(**json.loads(r["rejection_json"])) if r["rejection_json"] else None
        parents = tuple(str(p) for p in json.loads(r["parents_json"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise ReplayError(f"agent_candidates row {r['candidate_id']}: cannot be read ({exc})") from exc
    return Candidate(
        id=r["candidate_id"],
        turn=r["turn"],
        sample=r["sample"],
        kind=r["kind"],
        parents=parents,
        idea=r["idea"],
        response="",
        path=r["path"],
        source=r["source"],
        source_sha256=r["source_sha256"],
        rejection=rejection,
        verdict=verdict,
        duplicate_of=r["duplicate_of"],
        gpu_s=r["gpu_seconds"],
    )
