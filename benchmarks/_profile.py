"""Where an evaluation's wall time goes, by part: the parent's own steps and each worker request.

The phase marks in a verdict say how long setup, correctness and timing took; this says why. It
wraps the functions the pipeline calls (by their names in the modules that call them) and
``WorkerProcess.request`` (by op, with the bytes that crossed the wire), for the duration of a
``with`` block, and restores them after. Times are inclusive: ``check_correctness`` contains the
``run`` requests and ``judge_case`` calls made inside it. Used by ``cost.py --profile``.
"""

from __future__ import annotations

import importlib
import time
from collections import defaultdict
from typing import Any

from kernelproof.host import process

# (module, function name as that module sees it): the parent-side steps worth a line
TARGETS = (
    ("kernelproof.evaluate.setup", "build_variant"),
    ("kernelproof.evaluate.setup", "reference_is_random"),
    ("kernelproof.evaluate.setup", "inplace_findings"),
    ("kernelproof.evaluate.chain", "check_correctness"),
    ("kernelproof.evaluate.chain", "time_candidate"),
    ("kernelproof.verify.audit", "audit_variant"),
    ("kernelproof.evaluate.correctness", "make_inputs"),
    ("kernelproof.evaluate.correctness", "reference_and_oracle"),
    ("kernelproof.evaluate.correctness", "judge_case"),
    ("kernelproof.evaluate.correctness", "load_candidate"),
    ("kernelproof.evaluate.timing", "make_inputs"),
    ("kernelproof.evaluate.timing", "reference_and_oracle"),
    ("kernelproof.evaluate.timing", "load_candidate"),
    ("kernelproof.evaluate.timing", "load_program"),
    ("kernelproof.evaluate.timing", "account"),
    ("kernelproof.evaluate.timing", "time_variant"),
    ("kernelproof.evaluate.timing", "time_steady"),
)


class Profile:
    """``with Profile() as p: evaluate(...)``, then ``p.rows()``: label, calls, seconds, MB."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.mbytes: dict[str, float] = defaultdict(float)
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Profile:
        for mod_name, name in TARGETS:
            mod = importlib.import_module(mod_name)
            if hasattr(mod, name):
                self._patch(mod, name, f"{mod_name.rsplit('.', 1)[-1]}.{name}")
        original = process.WorkerProcess.request
        prof = self

        def request(worker, header, tensors=None, timeout_s=600.0, expect=None):
            label = f"request {header.get('op', '?')}"
            if header.get("draw") or header.get("second_run_projection") is not None:
                label += " (large case)"
            sent = sum(t.numel() * t.element_size() for t in tensors or [])
            t0 = time.perf_counter()
            try:
                reply, outs = original(worker, header, tensors, timeout_s, expect)
            finally:
                prof.seconds[label] += time.perf_counter() - t0
                prof.calls[label] += 1
            got = sum(t.numel() * t.element_size() for t in outs)
            prof.mbytes[label] += (sent + got) / 2**20
            steps = reply.get("steps_s") if isinstance(reply, dict) else None
            for step, seconds in (steps or {}).items():  # the worker's own account of the request
                prof.seconds[f"  {label}, in the worker: {step}"] += float(seconds)
                prof.calls[f"  {label}, in the worker: {step}"] += 1
            return reply, outs

        self._saved.append((process.WorkerProcess, "request", original))
        process.WorkerProcess.request = request
        return self

    def __exit__(self, *exc) -> bool:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)
        self._saved.clear()
        return False

    def _patch(self, mod, name: str, label: str) -> None:
        fn = getattr(mod, name)
        prof = self

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                prof.seconds[label] += time.perf_counter() - t0
                prof.calls[label] += 1

        self._saved.append((mod, name, fn))
        setattr(mod, name, timed)

    def rows(self) -> list[list[str]]:
        order = sorted(self.seconds, key=lambda k: -self.seconds[k])
        return [
            [
                k,
                str(self.calls[k]),
                f"{self.seconds[k]:.2f}",
                f"{self.mbytes[k]:.0f}" if k in self.mbytes else "",
            ]
            for k in order
        ]

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            k: {"calls": self.calls[k], "seconds": self.seconds[k], "mbytes": self.mbytes.get(k, 0.0)}
            for k in self.seconds
        }
