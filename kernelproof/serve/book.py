"""The job book: every job the service accepted, in SQLite beside the results store.

Why persistent: a trainer that submitted a batch must find its verdicts after the service
restarts. A finished job keeps its verdict document; a job queued or running when the service
stopped is queued again when it starts (:meth:`JobBook.unfinished`), so nothing accepted is lost
and nothing half-run is served. A job keeps the bytes it was submitted with (task and solution):
the bytes judged after a restart are the bytes posted, never a file read back.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelproof.submission import Submission, submitted_bytes
from kernelproof.verdict import Verdict, from_json

QUEUED, RUNNING, DONE, CANCELLED = "queued", "running", "done", "cancelled"
STATES = (QUEUED, RUNNING, DONE, CANCELLED)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    batch TEXT NOT NULL,
    position INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL,
    solution_path TEXT NOT NULL,
    options TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL,
    verdict TEXT,
    created REAL NOT NULL,
    finished REAL,
    task_data BLOB,
    solution_data BLOB
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, created);
CREATE TABLE IF NOT EXISTS aliases (
    name TEXT PRIMARY KEY,
    job TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Job:
    id: str
    batch: str  # the request that submitted it (one id for a batch)
    position: int  # its place in that request
    task_id: str
    files: Submission  # the task's and the solution's bytes, as submitted (their paths only name them)
    options: dict[str, Any]  # the EvalOptions fields it is judged under
    key: str  # content hash of task, solution and options (jobs.job_key)
    state: str
    verdict: Verdict | None = None
    created: float = 0.0
    finished: float | None = None


class JobBook:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=NORMAL")
        self._con.executescript(_SCHEMA)
        have = {row[1] for row in self._con.execute("PRAGMA table_info(jobs)")}
        for column in ("task_data", "solution_data"):  # a book written before jobs kept their bytes
            if column not in have:
                self._con.execute(f"ALTER TABLE jobs ADD COLUMN {column} BLOB")
        self._lock = threading.Lock()

    def add(self, jobs: list[Job]) -> None:
        with self._lock:
            self._con.execute("BEGIN")
            self._con.executemany(
                "INSERT INTO jobs (id, batch, position, task_id, task_path, solution_path, options, key,"
                " state, created, task_data, solution_data) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        j.id,
                        j.batch,
                        j.position,
                        j.task_id,
                        j.files.task.path,
                        j.files.solution.path,
                        json.dumps(j.options, sort_keys=True),
                        j.key,
                        j.state,
                        j.created,
                        j.files.task.data,
                        j.files.solution.data,
                    )
                    for j in jobs
                ],
            )
            self._con.execute("COMMIT")

    def set_state(self, job_id: str, state: str) -> None:
        with self._lock:
            self._con.execute("UPDATE jobs SET state=? WHERE id=?", (state, job_id))

    def finish(self, job_id: str, verdict: Verdict) -> None:
        with self._lock:
            self._con.execute(
                "UPDATE jobs SET state=?, verdict=?, finished=? WHERE id=?",
                (DONE, verdict.dumps(indent=None), time.time(), job_id),
            )

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            row = self._con.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id=?", (job_id,)).fetchone()
        return _job(row) if row else None

    def batch(self, batch: str) -> list[Job]:
        with self._lock:
            rows = self._con.execute(
                f"SELECT {_COLUMNS} FROM jobs WHERE batch=? ORDER BY position", (batch,)
            ).fetchall()
        return [_job(r) for r in rows]

    def unfinished(self) -> list[Job]:
        """Jobs queued or running when the service last stopped, oldest first: to run (again)."""
        with self._lock:
            rows = self._con.execute(
                f"SELECT {_COLUMNS} FROM jobs WHERE state IN (?, ?) ORDER BY created, position",
                (QUEUED, RUNNING),
            ).fetchall()
        return [_job(r) for r in rows]

    def alias(self, name: str, job_id: str) -> None:
        """Name a job by a client's own id (KernelGYM's task_id); a later job may take the name."""
        with self._lock:
            self._con.execute("INSERT OR REPLACE INTO aliases (name, job) VALUES (?, ?)", (name, job_id))

    def by_alias(self, name: str) -> Job | None:
        with self._lock:
            row = self._con.execute("SELECT job FROM aliases WHERE name=?", (name,)).fetchone()
        return self.get(row[0]) if row else None

    def close(self) -> None:
        with self._lock:
            self._con.close()


_COLUMNS = (
    "id, batch, position, task_id, task_path, solution_path, options, key, state, verdict, created, finished,"
    " task_data, solution_data"
)


def _job(row: tuple) -> Job:
    (
        job_id,
        batch,
        position,
        task_id,
        task_path,
        solution_path,
        options,
        key,
        state,
        verdict,
        created,
        finished,
        task_data,
        solution_data,
    ) = row
    return Job(
        id=job_id,
        batch=batch,
        position=position,
        task_id=task_id,
        files=Submission(_file(task_path, task_data), _file(solution_path, solution_data)),
        options=json.loads(options),
        key=key,
        state=state,
        verdict=from_json(json.loads(verdict)) if verdict else None,
        created=created,
        finished=finished,
    )


def _file(path: str, data: bytes | None):
    """A job's file as submitted; a job of a book written before jobs kept their bytes is read from
    the file that service wrote, once."""
    if data is None:
        data = Path(path).read_bytes() if Path(path).is_file() else b""
    return submitted_bytes(path, bytes(data))
