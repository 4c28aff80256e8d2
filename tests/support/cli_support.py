"""Helpers for command-line tests, the one runner of the command line in tests: in this process
(``run_here``, ``run_piped``), in a process of its own (``run_child``: raw bytes, the entry point's
exit status, a closed pipe, a read-only folder) or on a pseudo-terminal (``run_on_terminal``, Ctrl-C
included); and verdicts built as the evaluator writes them. tests/test_layout.py keeps copies of
these runners out of the test files."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import select
import subprocess
import sys
import time
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
    raw: bytes = b""  # a child's: the bytes it wrote (stdout, then stderr; on a terminal, both as one)

    @property
    def output(self) -> str:
        """stdout, then stderr: what a person at the command line reads."""
        return self.out + self.err


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


def _child_env(env: dict | None, columns: int, term: str | None = None) -> dict[str, str]:
    """This process's environment for a child, with this tree first on its PYTHONPATH."""
    out = {**os.environ, "COLUMNS": str(columns), **(env or {})}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), out.get("PYTHONPATH", "")) if p)
    if term is not None:
        out["TERM"] = term
        out.pop("NO_COLOR", None)
    return out


def run_child(
    *args: str,
    columns: int = 80,
    cwd: str | Path | None = None,
    env: dict | None = None,
    timeout: float = 300,
    wrap: tuple[str, ...] = (),
    stdout: int | None = None,
) -> Ran:
    """``python -m kernelproof.cli ARGS`` in a process of its own, piped, ``columns`` wide, in
    ``cwd`` with ``env`` added (a value None removes the variable). ``wrap``: a command that runs the
    CLI (``unshare -m sh -c ...``); ``stdout``: a file descriptor of the caller's for its stdout (a
    closed pipe). Text decoded as UTF-8; ``raw`` keeps the bytes."""
    full = {k: v for k, v in _child_env(env, columns).items() if v is not None}
    done = subprocess.run(
        [*wrap, sys.executable, "-m", "kernelproof.cli", *map(str, args)],
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=full,
        timeout=timeout,
    )
    out, err = done.stdout or b"", done.stderr or b""
    return Ran(done.returncode, out.decode(errors="replace"), err.decode(errors="replace"), out + err)


def run_on_terminal(
    *args: str,
    term: str = "dumb",
    columns: int = 80,
    cwd: str | Path | None = None,
    interrupt_when: bytes | None = None,
    guard_s: float = 280,
) -> Ran:
    """``kernelproof ARGS`` in ``cwd`` with a pseudo-terminal ``columns`` wide as its stdout and
    stderr (``out``, and ``raw`` as written). ``interrupt_when``: Ctrl-C is pressed once that is on
    the screen and again half a second later, as a person presses it; ``guard_s`` ends a child that
    never exits (the test's own guard, no claim about speed)."""
    import pty

    env = _child_env(None, columns, term)
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        if cwd is not None:
            os.chdir(cwd)
        os.execvpe(sys.executable, [sys.executable, "-m", "kernelproof.cli", *map(str, args)], env)
    out, pressed, started = b"", 0, time.monotonic()
    last = started  # when Ctrl-C was last pressed
    while True:
        if time.monotonic() - started > guard_s:
            os.kill(pid, 9)
            break
        if interrupt_when is not None and (
            (pressed == 0 and interrupt_when in out) or (pressed == 1 and time.monotonic() - last > 0.5)
        ):
            os.write(fd, b"\x03")
            pressed, last = pressed + 1, time.monotonic()
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    if interrupt_when is not None:
        assert pressed >= 1, out.decode(errors="replace")
    return Ran(os.waitstatus_to_exitcode(status), out.decode(errors="replace"), "", out)


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
