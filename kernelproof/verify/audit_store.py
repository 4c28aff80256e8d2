"""Audit reports kept across runs, so a rerun of a sweep does not audit every task again.

At KernelBench's published sizes a task's audit (six negative controls on two distributions) is
most of its setup time. A report depends on the task's content, the shape variant, the mode
(dropout on or off), the device type and the judging code, so those are its key; the kernelproof
source hash (kernelproof/source.py) means a report from other judging code is never served. The
reports live in a folder beside the results store's database (``<db>.audits/``), written only by
the trusted parent (atomically: a temporary file renamed into place); the store's folder is among
the paths no worker can reach (kernelproof/sandbox/plan.py ``default_protected``). A file that
does not read back as a report is ignored and the audit runs again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kernelproof.source import this_source

if TYPE_CHECKING:
    from kernelproof.task import Task
    from kernelproof.verify.audit import AuditReport
    from kernelproof.verify.cases import VariantContext


class AuditStore:
    """Audit reports in a folder, one JSON file per (task content, variant, mode, device type, source)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    @classmethod
    def beside(cls, db: str | None) -> AuditStore | None:
        """The folder beside a results store's database file; None without a store."""
        return cls(f"{db}.audits") if db else None

    def key(self, task: Task, ctx: VariantContext) -> str:
        fields = [task.sha256, ctx.variant, ctx.mode, ctx.device.type, ctx.precision, this_source()]
        return hashlib.sha256(json.dumps(fields).encode()).hexdigest()

    def get(self, task: Task, ctx: VariantContext) -> AuditReport | None:
        from kernelproof.verify.audit import AuditReport

        path = self.root / f"{self.key(task, ctx)}.json"
        try:
            report = AuditReport.from_json(json.loads(path.read_text()))
        except (OSError, ValueError):
            return None
        return report if report.variant == ctx.variant else None

    def put(self, task: Task, ctx: VariantContext, report: AuditReport) -> None:
        """Written whole or not at all; a folder that cannot be written only costs the next run."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(report.to_json(), f)
            os.replace(tmp, self.root / f"{self.key(task, ctx)}.json")
        except OSError:
            return
