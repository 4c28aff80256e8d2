"""The agent's memory: every run, prompt, answer, candidate and verdict, in SQLite.

The tables live in the same database file as the verdict store, beside its tables and prefixed
``agent_``. The calls table is the replay log, keyed by (run, turn, sample) with the prompt's hash
beside each answer. WAL mode lets readers (``kernelproof report``) look at a run while it is
written; sqlite3 connections are not shareable across threads, so each thread opens its own.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelproof.agent.errors import ReplayError
from kernelproof.agent.ranking import score
from kernelproof.agent.records import Candidate, Completion, LoggedCall, Prompt, Rejection
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
    summary_json TEXT NOT NULL DEFAULT '{}'
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
    PRIMARY KEY (run_id, candidate_id)
);
"""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Memory:
    """One database file; a connection per thread, opened on first use."""

    def __init__(self, path: str | Path):
        self.path = str(Path(path).resolve())  # recorded in run.json: must hold from any directory
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self.conn:
            self.conn.executescript(SCHEMA)

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # --- runs ------------------------------------------------------------------------------
    def create_run(self, **fields: Any) -> None:
        fields.setdefault("created_at", now())
        cols = ", ".join(fields)
        marks = ", ".join("?" for _ in fields)
        with self.conn:
            self.conn.execute(f"INSERT INTO agent_runs ({cols}) VALUES ({marks})", tuple(fields.values()))

    def update_run(self, run_id: str, **fields: Any) -> None:
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self.conn:
            self.conn.execute(f"UPDATE agent_runs SET {sets} WHERE run_id = ?", (*fields.values(), run_id))

    def run(self, run_id: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT * FROM agent_runs WHERE run_id = ?", (run_id,)).fetchone()
        return dict(row) if row else None

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
        row = (
            run_id,
            turn,
            sample,
            kind,
            prompt.digest(),
            json.dumps(prompt.to_json()),
            c.text if c else None,
            c.input_tokens if c else 0,
            c.output_tokens if c else 0,
            cost_usd,
            c.finish_reason if c else "",
            c.model if c else "",
            c.attempts if c else 0,
            c.latency_s if c else 0.0,
            int(c.usage_estimated) if c else 0,
            origin,
            error,
            now(),
        )
        with self.conn:
            self.conn.execute(f"INSERT OR REPLACE INTO agent_calls VALUES ({', '.join('?' * len(row))})", row)

    def logged_calls(self, run_id: str) -> dict[tuple[int, int], LoggedCall]:
        """The answered calls of a run: its replay log."""
        rows = self.conn.execute(
            "SELECT * FROM agent_calls WHERE run_id = ? AND response IS NOT NULL ORDER BY turn, sample",
            (run_id,),
        ).fetchall()
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
            for r in rows
        }

    def failed_calls(self, run_id: str) -> dict[tuple[int, int], str]:
        """Calls of a run that got no answer, with their errors."""
        rows = self.conn.execute(
            "SELECT turn, sample, error FROM agent_calls WHERE run_id = ? AND response IS NULL", (run_id,)
        ).fetchall()
        return {(r["turn"], r["sample"]): r["error"] for r in rows}

    def calls(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT * FROM agent_calls WHERE run_id = ? ORDER BY turn, sample", (run_id,)
        )
        return [dict(r) for r in rows.fetchall()]

    # --- candidates ------------------------------------------------------------------------
    def record_candidate(self, run_id: str, c: Candidate) -> None:
        v = c.verdict
        s = score(v) if c.rejection is None else None
        outcome = "rejected" if c.rejection is not None else (v.verdict.value if v is not None else "pending")
        row = (
            run_id,
            c.id,
            c.turn,
            c.sample,
            c.kind,
            json.dumps(list(c.parents)),
            c.idea,
            c.path,
            c.source,
            c.source_sha256,
            json.dumps(c.rejection.__dict__) if c.rejection else None,
            v.dumps(indent=None) if v is not None else None,
            c.duplicate_of,
            outcome,
            s[0] if s is not None and s[0] > float("-inf") else None,
            c.gpu_s,
            now(),
        )
        with self.conn:
            self.conn.execute(
                f"INSERT OR REPLACE INTO agent_candidates VALUES ({', '.join('?' * len(row))})", row
            )

    def candidates(self, run_id: str) -> list[Candidate]:
        rows = self.conn.execute(
            "SELECT * FROM agent_candidates WHERE run_id = ? ORDER BY turn, sample", (run_id,)
        ).fetchall()
        return [_candidate(r) for r in rows]

    def stored_candidates(self, run_id: str) -> dict[str, Candidate]:
        """Judged candidates of a run by id (what a resumed run reuses instead of evaluating again)."""
        return {c.id: c for c in self.candidates(run_id) if c.verdict is not None or c.rejection is not None}


def _candidate(r: sqlite3.Row) -> Candidate:
    try:
        verdict = verdict_from_json(json.loads(r["verdict_json"])) if r["verdict_json"] else None
    except (ValueError, TypeError, KeyError) as exc:
        raise ReplayError(f"stored verdict of {r['candidate_id']} cannot be read: {exc}") from exc
    rejection = Rejection(**json.loads(r["rejection_json"])) if r["rejection_json"] else None
    return Candidate(
        id=r["candidate_id"],
        turn=r["turn"],
        sample=r["sample"],
        kind=r["kind"],
        parents=tuple(json.loads(r["parents_json"])),
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
