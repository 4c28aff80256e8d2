"""Helpers for command-line tests: run the CLI in this process, as a terminal or a pipe sees it, and build verdicts."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

from kernelproof.verdict import (
    Correctness,
    FileRef,
    Outcome,
    Reason,
    ReasonCode,
    ShapeTiming,
    Speedup,
    TimeStats,
    Timing,
    Verdict,
)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


def run_here(capsys, *args: str) -> Ran:
    """The CLI in this process (monkeypatched api functions reach it); stdout and stderr apart."""
    from kernelproof.cli import run

    capsys.readouterr()
    code = run([str(a) for a in args])
    got = capsys.readouterr()
    return Ran(code, got.out, got.err)


def run_piped(*args: str, columns: int = 80, cwd: str | Path | None = None, env: dict | None = None) -> Ran:
    """The CLI as a piped command sees it: stdout and stderr apart, neither a terminal, ``columns``
    wide (``COLUMNS``), run in `cwd` with `env` added; in this process, restored afterwards.

    A child process would import torch and start a zygote of its own for each call (about 4 s of
    CPU on a 2-core machine); here the evaluations use this process's. What needs a process of its
    own (a terminal, the raw bytes written, the entry point's exit status) starts one: tests/commands/test_cli.py.
    """
    from kernelproof.cli import run

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update({"COLUMNS": str(columns), **(env or {})})
    out, err = io.StringIO(), io.StringIO()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run([str(a) for a in args])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return Ran(code, out.getvalue(), err.getvalue())


def _stats(median_ms: float, n: int = 25) -> TimeStats:
    return TimeStats(
        n, median_ms, median_ms, median_ms * 1.5, median_ms * 0.9, median_ms * 0.1, (median_ms, median_ms)
    )


def make_verdict(
    outcome: str = "pass",
    codes: tuple[str, ...] = (),
    *,
    task: str = "suite/level1/relu.py",
    solution: str = "solutions/level1/relu.py",
    cases_run: int = 4,
    candidate_ms: float = 2.0,
    baselines_ms: dict[str, float] | None = None,
    round_ratios: dict[str, tuple[float, ...]] | None = None,
    created_at: str = "2026-12-01T10:00:00+00:00",
) -> Verdict:
    """A verdict as the evaluator writes it. ``baselines_ms``: each baseline's median over all calls;
    ``round_ratios``: its per-round ratios (the speedup is their median, the CI their range)."""
    import statistics

    baselines_ms = {"eager": 1.0} if baselines_ms is None else baselines_ms
    timing, speedup = None, {}
    if outcome == "pass" and baselines_ms:
        ratios = round_ratios or {b: (ms / candidate_ms,) * 5 for b, ms in baselines_ms.items()}
        speedup = {
            b: Speedup(b, statistics.median(r), (min(r), max(r)), statistics.median(r), round_ratios=tuple(r))
            for b, r in ratios.items()
        }
        best = [min(vals) for vals in zip(*ratios.values())]  # each round's fastest baseline
        speedup["best"] = Speedup(
            "best", statistics.median(best), (min(best), max(best)), round_ratios=tuple(best)
        )
        rounds = len(next(iter(ratios.values())))
        shape = ShapeTiming(
            "small",
            "cold",
            "cpu-perf-counter",
            _stats(candidate_ms, 5 * rounds),
            {b: _stats(ms, 5 * rounds) for b, ms in baselines_ms.items()},
            tuple(speedup.values()),
            rounds,
            "max_rounds",
        )
        timing = Timing("cold", "cpu", (shape,))
    return Verdict(
        verdict=Outcome(outcome),
        reasons=tuple(Reason(ReasonCode(c), f"the candidate is {c}") for c in codes),
        task=FileRef(task, hashlib.sha256(task.encode()).hexdigest()),
        solution=FileRef(solution, hashlib.sha256(solution.encode()).hexdigest(), "triton"),
        correctness=Correctness(
            cases_run, cases_run if outcome == "pass" else 0, 1e-7, 1e-6, "normwise", "fp32"
        ),
        timing=timing,
        speedup=speedup,
        roofline=None,
        coverage=None,
        environment={"device": "cpu"},
        reward=0.0,
        settings={"baselines": list(baselines_ms), "seed": 1},
        created_at=created_at,
    )
