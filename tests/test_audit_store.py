"""Audit reports persist beside the results store: a rerun of a sweep does not audit again.

At KernelBench's published sizes the audit was most of a task's setup, and a sweep resumed over
several runs repeated it for every task. These evaluations run on the CPU with a small task.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from kernelproof import api
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verify import audit
from kernelproof.verify.audit_store import AuditStore
from kernelproof.verify.cases import build_variant

DATA = Path(__file__).parent / "data"
TASK, SOL = str(DATA / "tasks" / "scale_relu.py"), str(DATA / "solutions" / "plain_torch.py")


def _counting(monkeypatch) -> list[str]:
    """Each distribution the audit really runs (not served) is recorded."""
    ran: list[str] = []
    real = audit._audit_distribution

    def counted(ctx, dist, *rest):
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
    assert list((tmp_path / "r.sqlite.audits").glob("*.json"))
    monkeypatch.setattr(audit, "_CACHE", {})  # a new process: only the folder remembers
    second = api.evaluate(TASK, SOL, options)
    assert second.passed and len(ran) == audited  # not run again


def test_without_a_store_nothing_is_written(tmp_path, monkeypatch):
    _counting(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert api.evaluate(TASK, SOL, EvalOptions(device="cpu", db="", correctness_only=True)).passed
    assert not list(tmp_path.rglob("*.audits"))


def test_another_variant_mode_or_task_content_is_not_served(tmp_path, monkeypatch):
    ran = _counting(monkeypatch)
    store = AuditStore(tmp_path / "audits")
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


def test_a_damaged_report_is_ignored_and_the_audit_runs_again(tmp_path, monkeypatch):
    ran = _counting(monkeypatch)
    store = AuditStore(tmp_path / "audits")
    task = load_task(TASK)
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)
    audit.audit_variant(task, ctx, 5, store)
    for f in (tmp_path / "audits").glob("*.json"):
        f.write_text(json.dumps({"schema": "something else"}))
    monkeypatch.setattr(audit, "_CACHE", {})
    assert not audit.audit_variant(task, ctx, 5, store).degenerate and len(ran) == 4
