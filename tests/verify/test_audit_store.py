"""Audit reports persist in the results store: a rerun of a sweep does not audit again.

At KernelBench's published sizes the audit was most of a task's setup, and a sweep resumed over
several runs repeated it for every task. These evaluations run on the CPU with a small task.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import torch

from kernelproof import api
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verify import audit
from kernelproof.verify.audit_store import AuditStore
from kernelproof.verify.case_plan import build_variant

DATA = Path(__file__).resolve().parents[1] / "data"
TASK, SOL = str(DATA / "tasks" / "scale_relu.py"), str(DATA / "solutions" / "plain_torch.py")


def _counting(monkeypatch) -> list[str]:
    """Each distribution the whole audit really runs is recorded (not one served, nor the check of
    a served report under the evaluation's own weights, tests/verify/test_audit_these_weights.py)."""
    ran: list[str] = []
    real = audit._audit_distribution

    def counted(ctx, dist, *rest):
        if len(rest) < 5 or rest[4] == audit.CONTROLS:
            ran.append(dist)
        return real(ctx, dist, *rest)

    monkeypatch.setattr(audit, "_audit_distribution", counted)
    monkeypatch.setattr(audit, "_CACHE", {})
    return ran


def test_a_second_run_is_served_the_stored_audit(tmp_path, monkeypatch):
    ran = _counting(monkeypatch)
    options = EvalOptions(device="cpu", db=str(tmp_path / "r.sqlite"), correctness_only=True, fresh=True)
    first = api.evaluate(TASK, SOL, options)
    audited = len(ran)  # every variant audited, the probed shapes too
    assert first.passed and audited >= len(audit.AUDIT_DISTRIBUTIONS)
    assert _rows(tmp_path / "r.sqlite")
    monkeypatch.setattr(audit, "_CACHE", {})  # a new process: only the store remembers
    second = api.evaluate(TASK, SOL, options)
    assert second.passed and len(ran) == audited  # not run again


def _rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT key, doc, hmac FROM audits").fetchall()


def test_without_a_store_nothing_is_written(tmp_path, monkeypatch):
    _counting(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert api.evaluate(TASK, SOL, EvalOptions(device="cpu", db="", correctness_only=True)).passed
    assert not list(tmp_path.iterdir())


def test_another_variant_mode_or_task_content_is_not_served(tmp_path, monkeypatch):
    ran = _counting(monkeypatch)
    store = AuditStore(str(tmp_path / "r.sqlite"))
    task = load_task(TASK)
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)
    report = audit.audit_variant(task, ctx, 5, store)
    monkeypatch.setattr(audit, "_CACHE", {})
    assert audit.audit_variant(task, ctx, 5, store) == report and len(ran) == 2
    other_mode = build_variant(task, "default", torch.device("cpu"), "eval", 3)
    assert store.get(task, other_mode) is None
    changed = tmp_path / "scale_relu_changed.py"
    changed.write_text(Path(TASK).read_text() + "\n# changed\n")
    assert (
        store.get(load_task(changed), build_variant(load_task(changed), "default", ctx.device, "train", 3))
        is None
    )


def test_a_report_changed_outside_kernelproof_is_not_served(tmp_path, monkeypatch):
    """A row rewritten to call a degenerate task sound (its signature no longer matches), or one
    planted unsigned, is ignored and the audit runs again."""
    ran = _counting(monkeypatch)
    db = tmp_path / "r.sqlite"
    store = AuditStore(str(db))
    task = load_task(TASK)
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)
    audit.audit_variant(task, ctx, 5, store)
    ((key, doc, _),) = _rows(db)
    forged = json.loads(doc)
    forged["controls"][0]["rel_norm_err"] = 0.5
    for mac in ("0" * 64, None):
        with sqlite3.connect(db) as con:
            con.execute(
                "UPDATE audits SET doc = ?, hmac = ? WHERE key = ?", (json.dumps(forged), mac or "", key)
            )
        monkeypatch.setattr(audit, "_CACHE", {})
        assert store.get(task, ctx) is None
    before = len(ran)
    assert not audit.audit_variant(task, ctx, 5, store).degenerate and len(ran) == before + 2
    assert store.get(task, ctx) is not None  # stored again, signed
