"""Real verdict documents for report tests, built through kernelproof.verdict's dataclasses."""

from __future__ import annotations

import hashlib
import json
import math

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

H200 = "NVIDIA H200"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _stats(median_ms: float) -> TimeStats:
    return TimeStats(
        n=25,
        median_ms=median_ms,
        mean_ms=median_ms * 1.01,
        max_ms=median_ms * 1.2,
        min_ms=median_ms * 0.97,
        iqr_ms=median_ms * 0.02,
        ci95_ms=(median_ms * 0.99, median_ms * 1.01),
    )


def make_verdict(
    task: str = "suite/level1/relu.py",
    solution: str = "examples/level1/relu_triton.py",
    outcome: Outcome = Outcome.PASS,
    speedups: dict[str, float] | None = None,
    codes: tuple[ReasonCode, ...] = (),
    message: str = "",
    sol_fraction: float | None = 0.4,
    custom_fraction: float | None = 0.97,
    flops: float | None = 2.0e9,
    min_bytes: float | None = 4.0e8,
    device: str = H200,
    created_at: str = "2026-12-01T10:00:00Z",
    samples: dict[str, list[float]] | None = None,
    task_text: str | None = None,
    ci_rel: float = 0.03,
) -> Verdict:
    """A verdict as the evaluator writes it; ``speedups`` maps baseline -> median ratio (CI +-ci_rel)."""
    speedups = {"eager": 2.0} if speedups is None and outcome is Outcome.PASS else (speedups or {})
    figures = {b: Speedup(b, m, (m * (1 - ci_rel), m * (1 + ci_rel)), geomean=m) for b, m in speedups.items()}
    if figures and "best" not in figures:
        worst = min(figures.values(), key=lambda s: s.median)
        figures["best"] = Speedup("best", worst.median, worst.ci95, geomean=worst.median)
    cand_ms = 0.5
    timing = None
    if figures:
        shape = ShapeTiming(
            shape="default",
            regime="cold",
            clock="cuda-kineto-span",
            candidate=_stats(cand_ms),
            baselines={b: _stats(cand_ms * s.median) for b, s in figures.items() if b != "best"},
            speedups=tuple(figures.values()),
            rounds=10,
            stopped_by="ci_target",
            samples_ms=samples or {},
        )
        timing = Timing(regime="cold", device="cuda:0", shapes=(shape,))
    roofline = None
    if figures and flops is not None:
        roofline = Roofline(
            flops=flops,
            min_bytes=min_bytes,
            floor_ms=0.05,
            achieved_tflops=flops / (cand_ms * 1e-3) / 1e12,
            achieved_tbps=(min_bytes or math.nan) / (cand_ms * 1e-3) / 1e12,
            sol_fraction=sol_fraction,
            ceilings="h200",
        )
    reasons = tuple(Reason(c, message or f"rejected: {c.value}") for c in codes)
    passed = outcome is Outcome.PASS
    return Verdict(
        verdict=outcome,
        reasons=reasons,
        task=FileRef(task, _sha(task_text if task_text is not None else task)),
        solution=FileRef(solution, _sha(solution), backend="triton"),
        correctness=Correctness(
            cases_run=4,
            cases_passed=4 if passed else 2,
            worst_rel_norm_err=1e-7,
            worst_max_abs_err=1e-6,
            tolerance="normwise <= 4x the fp32 reference's own error",
            precision="fp32",
            cases=(CaseResult("default/normal/0", "default", "normal", passed, 1e-6, 1e-7, 4e-7, 1e-7),),
        ),
        timing=timing if passed else None,
        speedup=figures if passed else {},
        roofline=roofline if passed else None,
        coverage=Coverage(custom_fraction=custom_fraction) if passed else None,
        environment={"device_name": device, "torch": "2.11.0"},
        reward=compute_reward(outcome, figures.get("best")),
        created_at=created_at,
        settings={"device": "cuda", "baselines": sorted(b for b in figures if b != "best")},
    )


def suite_documents() -> list[dict]:
    """Four tasks: one with three solutions, a failure with hostile text, a degenerate task, a slow one."""
    relu, gemm, bad, soft = (
        "suite/level1/relu.py",
        "suite/level1/gemm.py",
        "suite/level1/degenerate.py",
        "suite/level2/softmax.py",
    )
    both = {"eager": 3.0, "compile:default": 1.2}
    verdicts = [
        make_verdict(relu, "solutions/relu_a.py", speedups=both),
        make_verdict(relu, "solutions/relu_b.py", speedups={"eager": 1.5, "compile:default": 0.8}),
        make_verdict(
            relu,
            "solutions/relu_c.py",
            Outcome.FAIL,
            codes=(ReasonCode.MISMATCH,),
            message="values differ at <script>alert(1)</script> | index 3",
        ),
        make_verdict(
            gemm, "solutions/gemm_a.py", speedups={"eager": 0.9, "compile:default": 0.7}, flops=1.5e11
        ),
        make_verdict(bad, "solutions/bad_a.py", Outcome.ERROR, codes=(ReasonCode.DEGENERATE_TASK,)),
        make_verdict(soft, "solutions/soft_a.py", Outcome.FAIL, codes=(ReasonCode.TIMEOUT,)),
    ]
    return [v.to_json() for v in verdicts]


def _sha_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# Text a candidate may choose, built to render as something in each medium: terminal escapes
# (OSC title, OSC 8 link, cursor-up and erase, CR), Rich markup, a bidi override, and Markdown and
# HTML that would become an image, a link, an autolink, emphasis or raw elements.
HOSTILE = (
    "\x1b]0;title\x07\x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\ \x1b[1A\x1b[2K\r[bold]PASS[/]"
    " \u202egnp.exe ![img](https://evil.example/p.png) [a](https://evil.example/) <https://evil.example/>"
    " <b>raw</b> <img src=https://evil.example/q.png> *em* __strong__ `tick` ``two`` | pipe & amp"
)


def hostile_documents() -> list[dict]:
    """Synthetic verdicts carrying :data:`HOSTILE` in every string a report shows."""
    bad = make_verdict(
        f"suite/{HOSTILE}.py",
        f"solutions/{HOSTILE}.py",
        Outcome.FAIL,
        codes=(ReasonCode.MISMATCH,),
        message=HOSTILE,
    ).to_json()
    bad["flags"] = [HOSTILE]
    good = make_verdict(
        f"suite/{HOSTILE}.py", f"solutions/ok_{HOSTILE}.py", speedups={"eager": 2.0, HOSTILE: 1.5}
    ).to_json()
    good["environment"]["device_name"] = HOSTILE
    return [bad, good]


def benign_documents() -> list[dict]:
    """:func:`hostile_documents` with every hostile string replaced by a plain word."""
    text = json.dumps(hostile_documents())
    return json.loads(text.replace(json.dumps(HOSTILE)[1:-1], "plain"))
