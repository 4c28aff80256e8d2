"""Candidate files and a fake evaluator that judges them by markers, returning real Verdicts.

Markers in a candidate's source decide its verdict:
  # SPEED: 2.5      passes with a best speedup of 2.5x (CI +-3%)
  # SOL: 0.9        its speed-of-light fraction
  # GPU_S: 3        the evaluation's elapsed_s (default 1)
  # COMPILE_ERROR   fails to build, with a long compiler log holding one error
  # WRONG           fails correctness on two cases
  # CHEAT: CODE     fails with that reason code (a cheat claiming a huge speed)
  # TASK_ERROR      an ERROR verdict: the task is degenerate
  # RAISES: TEXT    fails with runtime_error quoting TEXT (the rest of the line) as the exception
  # NOSPEED         a pass without a speed claim (speedup null: an interpreted kernel on a CPU)
  # FLAG: NAME      the verdict carries that flag
The fake yields verdicts in reverse order, as a real pool may finish them out of order.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from kernelproof.verdict import (
    CaseResult,
    Correctness,
    Coverage,
    FileRef,
    Outcome,
    Reason,
    ReasonCode,
    Roofline,
    ShapeTiming,
    Speedup,
    TimeStats,
    Timing,
    Verdict,
    compute_reward,
)

COMPILE_LOG = "\n".join(
    [f"building step {i}: ok" for i in range(60)]
    + [
        'kernel.cu(12): error: identifier "blockIdx_x" is undefined',
        "      int i = blockIdx_x * 256;",
        "              ^",
    ]
    + [f"note {i}" for i in range(40)]
)


def solution(marker: str = "SPEED: 2.0", tag: str = "") -> str:
    """A complete solution file carrying ``marker`` (``tag`` makes otherwise equal files differ)."""
    return (
        "import torch\nimport torch.nn as nn\n\n"
        f"# {marker}\n# variant {tag}\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, *args):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        return x * 2\n"
    )


def answer(marker: str = "SPEED: 2.0", tag: str = "") -> str:
    """A model's answer: a sentence, then the file in a fence."""
    return f"Here is the kernel.\n\n```python\n{solution(marker, tag)}```\n"


def timestats(ms: float) -> TimeStats:
    return TimeStats(20, ms, ms * 1.01, ms * 1.2, ms * 0.98, ms * 0.02, (ms * 0.99, ms * 1.01))


def make_verdict(source: str, solution_path: str, task_path: str = "task.py") -> Verdict:
    """Judge a source by its markers."""
    elapsed = float(_marker(source, "GPU_S") or 1.0)
    sha = hashlib.sha256(source.encode()).hexdigest()
    common = dict(
        task=FileRef(task_path, _sha_of_file(task_path)),
        solution=FileRef(solution_path, sha, "triton"),
        environment={"device": "cpu"},
        elapsed_s=elapsed,
    )
    if "TASK_ERROR" in source:
        reason = Reason(ReasonCode.DEGENERATE_TASK, "The task cannot tell right from wrong.")
        return _verdict(Outcome.ERROR, (reason,), **common)
    if "COMPILE_ERROR" in source:
        reason = Reason(ReasonCode.COMPILE_ERROR, "The kernel failed to build.", COMPILE_LOG)
        return _verdict(Outcome.FAIL, (reason,), **common)
    raised = re.search(r"#\s*RAISES:\s*(.*)", source)
    if raised:
        text = raised.group(1).replace("\\n", "\n")
        reason = Reason(
            ReasonCode.RUNTIME_ERROR, f"forward raised RuntimeError: {text}", f"RuntimeError: {text}"
        )
        return _verdict(Outcome.FAIL, (reason,), **common)
    cheat = _marker(source, "CHEAT")
    if cheat:
        reason = Reason(ReasonCode(cheat), f"Rejected as {cheat}.", "caught in timed call 3")
        return _verdict(Outcome.FAIL, (reason,), **common)
    if "WRONG" in source:
        cases = (
            CaseResult("small/normal/0", "small", "normal", True, 1e-7, 1e-8, 1e-6, 1e-8),
            CaseResult("odd/large/1", "odd", "large", False, 3.5e-1, 2.5e-2, 1e-6, 1e-8, "mismatch"),
            CaseResult("odd/spiky/0", "odd", "spiky", False, 9.0, 4.0e-1, 1e-6, 1e-8, "mismatch"),
        )
        corr = Correctness(
            3, 1, 4.0e-1, 9.0, "normwise <= 100x the fp32 reference's error", "fp32", None, cases
        )
        reason = Reason(
            ReasonCode.MISMATCH, "Values differ from the oracle beyond tolerance.", "case odd/large/1"
        )
        return _verdict(Outcome.FAIL, (reason,), correctness=corr, **common)
    speed = float(_marker(source, "SPEED") or 1.0)
    ci = (speed * 0.97, speed * 1.03)
    best = Speedup("best", speed, ci)
    sp = {"eager": Speedup("eager", speed, ci), "best": best}
    shape = ShapeTiming(
        "default",
        "cold",
        "cpu-perf-counter",
        timestats(1.0 / speed),
        {"eager": timestats(1.0)},
        (Speedup("eager", speed, ci), best),
        10,
        "ci_target",
    )
    corr = Correctness(6, 6, 1e-7, 1e-6, "normwise <= 100x the fp32 reference's error", "fp32")
    sol = _marker(source, "SOL")
    roof = Roofline(1e9, 1e6, 0.01, 1.0, 0.5, float(sol) if sol else None, "datasheet")
    cov = Coverage(0.95, (("add_kernel", "solution", 0.8), ("aten::copy_", "aten", 0.05)))
    timing = Timing("cold", "cpu", (shape,))
    reward = compute_reward(Outcome.PASS, best)
    flag = _marker(source, "FLAG")
    if "NOSPEED" in source:
        sp, reward = None, 0.0
    return _verdict(
        Outcome.PASS,
        (),
        flags=(flag,) if flag else (),
        correctness=corr,
        timing=timing,
        speedup=sp,
        roofline=roof,
        coverage=cov,
        reward=reward,
        **common,
    )


def _verdict(outcome, reasons, **fields) -> Verdict:
    base = dict(correctness=None, timing=None, speedup={}, roofline=None, coverage=None, reward=0.0)
    return Verdict(verdict=outcome, reasons=reasons, **{**base, **fields})


def _sha_of_file(path: str) -> str:
    """The task file's hash, as a real verdict carries it ("0" * 64 for a path that is not a file)."""
    p = Path(path)
    return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "0" * 64


def _marker(source: str, name: str) -> str | None:
    m = re.search(rf"#\s*{name}:\s*([\w.]+)", source)
    return m.group(1) if m else None


class FakeEvaluator:
    """Stands in for ``evaluate_many``; records every batch it was given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []  # solution paths per call
        self.options: list = []  # the EvalOptions of each call

    def __call__(self, pairs, options=None):
        pairs = list(pairs)
        self.batches.append([str(s) for _, s in pairs])
        self.options.append(options)
        for task, sol in reversed(pairs):
            yield make_verdict(Path(sol).read_text(), str(sol), str(task))

    @property
    def evaluated(self) -> list[str]:
        return [p for batch in self.batches for p in batch]


def sha(source: str) -> str:
    """The content hash a candidate carries for ``source`` (what its verdict must name)."""
    return hashlib.sha256(source.encode()).hexdigest()
