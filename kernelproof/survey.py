"""The verbs that judge no solution: ``audit`` (can a task tell right from wrong), ``ceilings``
(what good code reaches on a device) and ``results`` (what the store holds).

Split from :mod:`kernelproof.api`, which evaluates solutions; these look at what an evaluation
stands on instead. :mod:`kernelproof.api` re-exports each, so the command line and other callers
keep one namespace. Their options are checked as every verb's are (:mod:`kernelproof.preflight`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kernelproof.errors import UsageError
from kernelproof.executors.local import resolve_devices
from kernelproof.options import EvalOptions
from kernelproof.preflight import PathLike, checked_options
from kernelproof.store import db_path
from kernelproof.verdict import Outcome, ReasonCode

if TYPE_CHECKING:
    from kernelproof.verify.audit import AuditReport


@dataclass(frozen=True)
class TaskAudit:
    """One task's audit: a report per shape variant, or why the task could not be audited."""

    task: str  # the path as given
    shapes: tuple[AuditReport, ...] = ()
    error: str = ""  # the task does not load or its reference does not run (a TaskError)

    @property
    def degenerate(self) -> bool:
        return any(r.degenerate for r in self.shapes)

    def to_json(self) -> dict[str, Any]:
        if self.error:
            return {"task": self.task, "error": self.error}
        return {
            "task": self.task,
            "degenerate": self.degenerate,
            "controls": [dict(c, shape=r.variant) for r in self.shapes for c in r.to_json()["controls"]],
            "shapes": [r.to_json() for r in self.shapes],
        }


def audit_targets(target: PathLike) -> list[Path]:
    """The task files an audit of ``target`` covers: the file, or every task file under the folder."""
    path = Path(target)
    if path.is_dir():
        files = [f for f in sorted(path.rglob("*.py")) if not f.name.startswith("_")]
        if not files:
            raise UsageError(f"no task file (*.py) in {path}")
        return files
    if not path.exists():
        raise UsageError(f"task file not found: {path}")
    return [path]


def audit(target: PathLike, options: EvalOptions | None = None) -> Iterator[TaskAudit]:
    """Run the negative controls on every shape of each task under ``target`` (a file or a folder):
    a task they pass cannot tell right from wrong, so no candidate can be scored on it. One
    :class:`TaskAudit` per task as it is done; a task that does not load is one with ``error``."""
    import secrets

    from kernelproof.errors import TaskError
    from kernelproof.task import load_task, variants_for
    from kernelproof.verify.audit import audit_task

    options = checked_options(options)
    files = audit_targets(target)
    device = torch.device(resolve_devices(options.device)[0])
    seed = options.seed if options.seed is not None else secrets.randbits(62)
    for f in files:
        try:
            task = load_task(f)
            reports = audit_task(task, device, variants_for(task, device.type), seed)
        except TaskError as exc:
            yield TaskAudit(str(f), error=str(exc))
            continue
        yield TaskAudit(str(f), tuple(reports))


@dataclass(frozen=True)
class DeviceCeilings:
    """What good code reaches on a device (measured once per model, cached), beside its datasheet."""

    name: str  # the device's name as CUDA reports it
    copy_tbps: float  # a large device-to-device copy, TB/s
    matmul_tflops: dict[str, float]  # large library matmuls per unit, TFLOP/s
    datasheet_tbps: float | None  # None: the device is not in the datasheet table
    datasheet_tflops: dict[str, float]
    cache_path: str  # where the measurement is kept
    measured_now: bool  # measured by this call (not read from the cache)


def ceilings(device: str = "cuda", *, refresh: bool = False) -> DeviceCeilings:
    """Measure (or read the cached) copy bandwidth and matmul peaks of a CUDA device."""
    from kernelproof.measure import ceilings as measured
    from kernelproof.measure.roofline import device_spec

    if not torch.cuda.is_available():
        raise UsageError("ceilings are measured on a CUDA device; none is visible")
    if device in ("auto", "cpu"):
        raise UsageError(f"ceilings are measured on a CUDA device: --device cuda or cuda:N, not {device!r}")
    dev = resolve_devices(device)[0]
    name = torch.cuda.get_device_name(torch.device(dev))
    doc = None if refresh else measured.load(name)
    measured_now = doc is None
    if doc is None:
        doc = measured.measure(dev)
    spec = device_spec(name)
    return DeviceCeilings(
        name=name,
        copy_tbps=float(doc["copy_bandwidth_TBps"]),
        matmul_tflops={str(k): float(v) for k, v in doc["matmul_TFLOPs"].items()},
        datasheet_tbps=spec.datasheet_tbps if spec else None,
        datasheet_tflops=dict(spec.datasheet_tflops) if spec else {},
        cache_path=str(measured.cache_path(name)),
        measured_now=measured_now,
    )


@dataclass(frozen=True)
class StoredVerdicts:
    """Verdict documents from the results store, newest first, and how many it holds in all."""

    documents: tuple[dict[str, Any], ...]
    total: int
    path: str  # the store's file
    note: str = ""  # "N shown of M stored in PATH", and the matching rows that do not verify (never served)


def results(
    *,
    task: str | None = None,
    solution: str | None = None,
    outcome: str | None = None,
    code: str | None = None,
    limit: int | None = 50,
    db: str | None = None,
) -> StoredVerdicts:
    """Stored verdicts, newest first: paths containing ``task`` / ``solution``, with ``outcome``
    (pass | fail | error) and the reason ``code``; a filter that can match nothing is a UsageError."""
    from kernelproof.store import Store

    outcomes = tuple(o.value for o in Outcome)
    if outcome is not None and outcome not in outcomes:
        raise UsageError(f"--verdict must be {' | '.join(outcomes)}, not {outcome!r}")
    if code is not None and code not in {c.value for c in ReasonCode}:
        raise UsageError(f"--code {code!r} is not a reason code (docs/verdict.md lists them)")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, not {limit}")
    path = db_path(db)
    if path is None:
        raise UsageError("--db '' names no store: there is nothing to list")
    if db is None and not Path(path).exists():  # the default store, before anything was stored
        return StoredVerdicts((), 0, path, f"0 shown: nothing stored yet in {path}")
    store = Store(path, readonly=True)  # listing writes nothing: a read-only store is listed too
    docs = store.query(task=task, solution=solution, outcome=outcome, code=code, limit=limit)
    note = store.listing_note(len(docs), task=task, solution=solution, outcome=outcome, code=code)
    return StoredVerdicts(tuple(docs), store.count(), store.path, note)
