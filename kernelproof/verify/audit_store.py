"""Audit reports kept across runs, in the results store, so a rerun of a sweep does not audit again.

At KernelBench's published sizes a task's audit (six negative controls on two distributions) is
most of its setup time, and a sweep resumed over several runs repeated it for every task. A
report depends on the task's content, the shape variant, the mode (dropout on or off), the device
type, the precision and the judging code, so those are its key; the kernelproof source hash
(kernelproof/code_identity.py) means a report from other judging code is never served.

The reports are rows of their own table (``audits``) in the results store's SQLite file, so they
travel with it (a sweep carries its store from one run to the next). Like every row there, each
is signed with the store's key (kernelproof/store_key.py: an HMAC over the key and the document):
a report planted or changed outside kernelproof (one that would call a degenerate task sound)
does not verify and the audit runs again. A store that cannot be read or written costs only the
next run's audit, never the evaluation.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from kernelproof import store_key
from kernelproof.code_identity import this_source
from kernelproof.errors import StoreError
from kernelproof.store import open_connection, refuse_foreign_objects

if TYPE_CHECKING:
    from kernelproof.task import Task
    from kernelproof.verify.audit import AuditReport
    from kernelproof.verify.case_plan import VariantContext

TABLE = "audits"
SCHEMA = f"CREATE TABLE IF NOT EXISTS {TABLE} (key TEXT PRIMARY KEY, doc TEXT NOT NULL, hmac TEXT NOT NULL)"


class AuditStore:
    """Audit reports in a results store's database, one signed row per (task content, variant,
    mode, device type, precision, kernelproof source)."""

    def __init__(self, db: str, key: bytes | None = None) -> None:
        self.path = db
        self._key = key

    @classmethod
    def beside(cls, db: str | None) -> AuditStore | None:
        """The audits of the results store at `db`; None without a store."""
        return cls(db) if db else None

    def key(self, task: Task, ctx: VariantContext) -> str:
        fields = [task.sha256, ctx.variant, ctx.mode, ctx.device.type, ctx.contract_key, this_source()]
        return hashlib.sha256(json.dumps(fields).encode()).hexdigest()

    def get(self, task: Task, ctx: VariantContext) -> AuditReport | None:
        """The stored report, when one is there, verifies and reads back as a report."""
        from kernelproof.verify.audit import AuditReport

        if not Path(self.path).is_file():
            return None
        key = self.key(task, ctx)
        try:
            con = open_connection(self.path)
            try:
                con.execute(SCHEMA)
                row = con.execute(f"SELECT doc, hmac FROM {TABLE} WHERE key = ?", (key,)).fetchone()
            finally:
                con.close()
            if row is None or not store_key.verifies(self._signing_key(), TABLE, (key, row[0]), row[1]):
                return None
            report = AuditReport.from_json(json.loads(row[0]))
        except (sqlite3.Error, StoreError, OSError, ValueError):
            return None
        return report if report.variant == ctx.variant else None

    def put(self, task: Task, ctx: VariantContext, report: AuditReport) -> None:
        """The report stored, signed (a store that cannot be written only costs the next run)."""
        key = self.key(task, ctx)
        doc = json.dumps(report.to_json(), sort_keys=True)
        try:
            mac = store_key.sign(self._signing_key(), TABLE, (key, doc))
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            con = open_connection(self.path)
            try:
                con.execute(SCHEMA)
                con.execute("BEGIN IMMEDIATE")
                refuse_foreign_objects(con, self.path)  # nothing planted between the check and the write
                con.execute(
                    f"INSERT OR REPLACE INTO {TABLE} (key, doc, hmac) VALUES (?, ?, ?)", (key, doc, mac)
                )
                con.execute("COMMIT")
            finally:
                con.close()
        except (sqlite3.Error, StoreError, OSError):
            return

    def _signing_key(self) -> bytes:
        if self._key is None:
            self._key = store_key.load_key(store_file=self.path)
        return self._key
