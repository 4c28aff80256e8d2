"""Scores over verdict documents: fast_p, geometric-mean speedup, per-task leaderboards.

fast_p follows KernelBench (``src/kernelbench/score.py``): the fraction of tasks whose solution is
correct AND faster than the baseline by a factor strictly greater than p, over all scored tasks;
a task with no passing or no timed solution counts as not fast. Where a task has several
solutions, each task is scored by its best one per baseline (best-of-n; with one solution per
task this is exactly KernelBench's figure). Degenerate tasks (reason ``degenerate_task``: the task
cannot tell right from wrong) are left out of every score and marked in the report.

The speedup used is the verdict's headline figure per baseline (the median paired ratio,
geometric mean over timed shapes); KernelBench divides means, which an outlier can move.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# p values KernelBench's analysis reports (fast_0 is the correctness rate of timed results).
STANDARD_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
DEGENERATE = "degenerate_task"


@dataclass(frozen=True)
class Figure:
    median: float | None  # headline speedup (>1: candidate faster)
    ci95: tuple[float, float] | None  # bootstrap CI of the median ratio
    note: str = ""  # why the figure is missing, when it is


@dataclass(frozen=True)
class Result:
    """One verdict document, flattened to what a report shows."""

    task_key: str  # task sha256 (two tasks with one path but different bytes stay apart)
    task: str  # task path as given
    solution: str  # solution path as given
    backend: str  # triton | cuda | native | torch | ""
    verdict: str  # pass | fail | error
    reasons: tuple[tuple[str, str], ...]  # (code, message) pairs
    flags: tuple[str, ...]  # non-fatal observations
    speedups: dict[str, Figure]  # baseline name -> figure
    sol_fraction: float | None  # speed-of-light fraction at measured ceilings
    custom_fraction: float | None  # share of GPU time in the submission's own kernels
    flops: float | None  # useful FLOPs of the headline shape
    min_bytes: float | None  # minimum bytes moved by the headline shape
    achieved_tflops: float | None
    achieved_tbps: float | None
    device: str  # where it was evaluated
    created_at: str  # ISO time of the verdict
    speed_claimed: bool = (
        True  # its speedups are a claim (verdict claims.speed; False: interpreted on the CPU, or unconfirmed)
    )

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def degenerate(self) -> bool:
        return any(code == DEGENERATE for code, _ in self.reasons)

    def speedup(self, baseline: str) -> float | None:
        fig = self.speedups.get(baseline)
        return fig.median if fig is not None and is_positive(fig.median) else None


def results_from(docs: Iterable[dict[str, Any]]) -> list[Result]:
    """Flatten verdict documents into :class:`Result` records."""
    return [_result(doc) for doc in docs]


def _result(doc: dict[str, Any]) -> Result:
    roof = doc.get("roofline") or {}
    cov = doc.get("coverage") or {}
    speedups = {}
    for name, s in (doc.get("speedup") or {}).items():
        ci = s.get("ci95")
        speedups[name] = Figure(
            median=s.get("median"),
            ci95=(ci[0], ci[1]) if ci and ci[0] is not None and ci[1] is not None else None,
            note=s.get("note", ""),
        )
    return Result(
        task_key=doc["task"].get("sha256") or doc["task"].get("path", ""),
        task=doc["task"].get("path", ""),
        solution=doc["solution"].get("path", ""),
        backend=doc["solution"].get("backend", ""),
        verdict=str(doc.get("verdict", "")),
        reasons=tuple((r.get("code", ""), r.get("message", "")) for r in doc.get("reasons", [])),
        flags=tuple(str(f) for f in doc.get("flags", [])),
        speedups=speedups,
        sol_fraction=roof.get("sol_fraction"),
        custom_fraction=cov.get("custom_fraction"),
        flops=roof.get("flops"),
        min_bytes=roof.get("min_bytes"),
        achieved_tflops=roof.get("achieved_tflops"),
        achieved_tbps=roof.get("achieved_tbps"),
        device=device_of(doc),
        created_at=str(doc.get("created_at", "")),
        # an untimed pass (interpreted on the CPU, or --correctness-only) claims no speed either
        speed_claimed=(doc.get("claims") or {}).get("speed") is not False
        and not (doc.get("settings") or {}).get("correctness_only"),
    )


def device_of(doc: dict[str, Any]) -> str:
    """The device a verdict was measured on, as the verdict states it."""
    env = doc.get("environment") or {}
    for key in ("device_name", "gpu", "device"):
        if isinstance(env.get(key), str) and env[key]:
            return env[key]
    timing = doc.get("timing") or {}
    return str(timing.get("device") or (doc.get("settings") or {}).get("device") or "")


def baselines_of(results: Sequence[Result]) -> list[str]:
    """Baseline names present, in report order: eager, compile modes, then best (only beside two or
    more baselines)."""
    names = {name for r in results for name in r.speedups}
    if len(names - {"best"}) <= 1:
        names.discard("best")  # the fastest of one baseline is that baseline: no second, equal curve

    def rank(name: str) -> tuple[int, str]:
        return (0 if name == "eager" else 2 if name == "best" else 1, name)

    return sorted(names, key=rank)


def group_by_task(results: Sequence[Result]) -> dict[str, list[Result]]:
    """Results per task key, each list ranked: passes by speedup, then failures, then errors."""
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(r.task_key, []).append(r)
    return {k: rank_results(v) for k, v in sorted(groups.items(), key=lambda kv: kv[1][0].task)}


def rank_results(results: Sequence[Result]) -> list[Result]:
    order = {"pass": 0, "fail": 1, "error": 2}

    def key(r: Result) -> tuple[int, float, str]:
        best = r.speedup("best") or r.speedup("eager") or 0.0
        return (order.get(r.verdict, 3), -best, r.solution)

    return sorted(results, key=key)


def degenerate_tasks(results: Sequence[Result]) -> set[str]:
    """Task keys that failed their audit anywhere: they are not scored."""
    return {r.task_key for r in results if r.degenerate}


def task_best(results: Sequence[Result], baseline: str) -> dict[str, tuple[bool, float | None]]:
    """Per scored task: (has a passing solution, best passing speedup against ``baseline``)."""
    skip = degenerate_tasks(results)
    out: dict[str, tuple[bool, float | None]] = {}
    for r in results:
        if r.task_key in skip:
            continue
        correct, best = out.get(r.task_key, (False, None))
        if r.passed:
            correct = True
            s = r.speedup(baseline)
            if s is not None and (best is None or s > best):
                best = s
        out[r.task_key] = (correct, best)
    return out


def speed_claims(results: Sequence[Result]) -> list[Result]:
    """The results fast_p and the geometric mean score: a pass only where its speed is a claim (an
    interpreted Triton kernel's time on the CPU says nothing about the kernel), and a task only where
    one of its passes is. A failure says the task was not solved by it, whatever its speed: it stays
    beside the passes that count. But a task whose every pass claims no speed is left out whole: it
    is solved, at a speed unknown, and its failures alone would count it unsolved (fast_0 = 0 % with
    every task correct)."""
    unknown = {r.task_key for r in results if r.passed} - {
        r.task_key for r in results if r.passed and r.speed_claimed
    }
    return [r for r in results if r.task_key not in unknown and (r.speed_claimed or not r.passed)]


def fast_p_note(results: Sequence[Result]) -> str | None:
    """What fast_p left out, in one sentence (None: nothing)."""
    left = len(results) - len(speed_claims(results))
    if not left:
        return None
    return (
        f"fast_p leaves out {left} verdict{'s' if left != 1 else ''} of tasks solved at a speed that is "
        "not a claim (not timed, Triton's interpreter on the CPU, launches that only ran ATen ops, or a "
        "timing the parent's clock could not confirm: claims.speed_withheld); a correct task counts only "
        "through solutions whose speed is a claim"
    )


def fast_p(
    results: Sequence[Result], p: float, baseline: str = "eager", *, unsolved: int = 0
) -> float | None:
    """Fraction of scored tasks that are correct with speedup > p (strict); None with no task.

    ``unsolved``: tasks of the suite that have no result at all (no solution was given); KernelBench
    counts them as incorrect, so they join the denominator. Results whose speed is not a claim are
    left out (:func:`speed_claims`)."""
    per_task = task_best(speed_claims(results), baseline)
    if not per_task and not unsolved:
        return None
    hits = sum(1 for ok, s in per_task.values() if ok and s is not None and s > p)
    return hits / (len(per_task) + unsolved)


def fast_p_curve(
    results: Sequence[Result], baseline: str, ps: Sequence[float]
) -> list[tuple[float, float | None]]:
    return [(p, fast_p(results, p, baseline)) for p in ps]


def geomean_speedup(results: Sequence[Result], baseline: str = "eager") -> float | None:
    """Geometric mean of the best passing speedup per task, over tasks that have one."""
    values = [s for ok, s in task_best(speed_claims(results), baseline).values() if ok and s is not None]
    return geomean(values)


def geomean(values: Iterable[float]) -> float | None:
    logs = [math.log(v) for v in values if is_positive(v)]
    return math.exp(sum(logs) / len(logs)) if logs else None


@dataclass(frozen=True)
class Score:
    baseline: str  # baseline name
    tasks: int  # scored tasks (degenerate tasks left out)
    correct: int  # tasks with at least one passing solution
    timed: int  # correct tasks with a speedup against this baseline
    fast_p: tuple[tuple[float, float | None], ...]  # (p, fast_p) at STANDARD_P
    geomean: float | None  # geometric-mean speedup over the timed correct tasks


def score(results: Sequence[Result], baseline: str) -> Score:
    per_task = task_best(results, baseline)
    return Score(
        baseline=baseline,
        tasks=len(per_task),
        correct=sum(1 for ok, _ in per_task.values() if ok),
        timed=sum(1 for ok, s in per_task.values() if ok and s is not None),
        fast_p=tuple(fast_p_curve(results, baseline, STANDARD_P)),
        geomean=geomean_speedup(results, baseline),
    )


def is_positive(x: Any) -> bool:
    """A finite number above zero (speedups, FLOPs and bytes that can be placed on a log axis)."""
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@dataclass(frozen=True)
class Summary:
    """Everything a report shows, computed once and shared by the HTML and Markdown writers."""

    title: str  # report heading
    results: tuple[Result, ...]  # every result, deduplicated
    tasks: dict[str, list[Result]]  # task key -> ranked results
    degenerate: frozenset[str]  # task keys left out of scores
    baselines: tuple[str, ...]  # baseline names present, in report order
    scores: tuple[Score, ...]  # one per baseline
    devices: tuple[str, ...]  # devices the results were measured on
    ceilings: dict[str, Any] | None  # device ceilings for the roofline, when known
    roots: tuple[str, str] = ("", "")  # names of the folders task and solution paths are relative to


def summarize(
    docs: Iterable[dict[str, Any]], title: str = "kernelproof report", ceilings: dict[str, Any] | None = None
) -> Summary:
    """Build a :class:`Summary`; ``ceilings`` None picks shipped ceilings matching the devices seen."""
    results, roots = relative_paths(results_from(docs))
    baselines = baselines_of(results)
    devices = tuple(sorted({r.device for r in results if r.device}))
    if ceilings is None:
        from kernelproof.data import match_ceilings

        ceilings = next((c for c in map(match_ceilings, devices) if c is not None), None)
    return Summary(
        title=title,
        results=tuple(results),
        tasks=group_by_task(results),
        degenerate=frozenset(degenerate_tasks(results)),
        baselines=tuple(baselines),
        scores=tuple(score(results, b) for b in baselines),
        devices=devices,
        ceilings=ceilings,
        roots=roots,
    )


def relative_paths(results: Sequence[Result]) -> tuple[list[Result], tuple[str, str]]:
    """The results with absolute task paths made relative to the folder all tasks share (the
    suite), and absolute solution paths to the folder all solutions share; reason messages too.

    Why: a report is shared, and the folders a run happened to sit in (a home directory, a
    temporary folder) say nothing about the kernels; ``level1/relu.py`` says what the task is.
    Returns the folders' own names too, for the page to say what the paths are relative to.
    """

    def root(paths: list[str]) -> str:
        absolute = [os.path.dirname(p) for p in paths if os.path.isabs(p)]
        return os.path.commonpath(absolute) if absolute else ""

    task_root, sol_root = root([r.task for r in results]), root([r.solution for r in results])

    def rel(path: str, base: str) -> str:
        return os.path.relpath(path, base) if base and os.path.isabs(path) else path

    def strip(text: str) -> str:
        for base in sorted({task_root, sol_root} - {"", os.sep}, key=len, reverse=True):
            text = text.replace(base + os.sep, "")
        return text

    out = [
        dataclasses.replace(
            r,
            task=rel(r.task, task_root),
            solution=rel(r.solution, sol_root),
            reasons=tuple((code, strip(msg)) for code, msg in r.reasons),
        )
        for r in results
    ]
    return out, (os.path.basename(task_root), os.path.basename(sol_root))


def task_label(summary: Summary, task_key: str) -> str:
    """The task's path, with a short hash where two different files share one path."""
    path = summary.tasks[task_key][0].task
    same_path = [k for k, rs in summary.tasks.items() if rs[0].task == path]
    return f"{path} ({task_key[:8]})" if len(same_path) > 1 else path


def format_ratio(x: float) -> str:
    """Two decimals where they say something (2.31), two significant digits below 0.1 (0.0019)."""
    return f"{x:.2f}" if abs(x) >= 0.1 else f"{x:.2g}"


def format_speedup(fig: Figure | None) -> str:
    """``2.31x [2.20, 2.45]``, or an em dash when missing."""
    if fig is None or not is_positive(fig.median):
        return "—"
    text = f"{format_ratio(fig.median)}x"
    if fig.ci95 is not None:
        text += f" [{format_ratio(fig.ci95[0])}, {format_ratio(fig.ci95[1])}]"
    return text


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def format_fraction(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:.0f} %"
