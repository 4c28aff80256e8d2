"""A KernelBench run folder judged as it is, written back in KernelBench's own files.

KernelBench's scripts write ``runs/<run>/level_<L>_problem_<P>_sample_<S>_kernel.py`` (several
samples per problem) and read ``runs/<run>/eval_results.json``; the problem is
``KernelBench/level<L>/<P>_<Name>.py``. Problem ids come from the number before the first
underscore of the problem file's name, as KernelBench's own dataset reads them
(``src/kernelbench/dataset.py``), never from a position in a listing: level 1 sorted by name
starts 1, 10, 100, 11.

What is written, so that KernelBench's analysis (``scripts/benchmark_eval_analysis.py``) reads
it unchanged:

- ``eval_results.json``: ``{"<problem_id>": [{"sample_id", "compiled", "correctness", "metadata",
  "runtime", "runtime_stats"}, ...]}`` sorted by problem id; ``runtime`` is the candidate's mean
  milliseconds per call at the task's own shape (-1.0 when not timed), kernelproof's verdict under
  ``metadata["kernelproof"]`` and the reference's time of the same session under
  ``metadata["ref_runtime"]`` (KernelBench's own field name).
- ``baseline_time_torch.json`` (eager) and, when measured,
  ``baseline_time_torch_compile_inductor_default.json``: ``{"level<L>": {"<P>_<Name>.py":
  {"mean": ms, ...}}}``, the file the analysis takes as ``baseline_file=``; the reference's time
  of a problem is the median over its timed samples of the reference's mean, and ``null`` for a
  problem none of whose samples was timed (the analysis reads it only for correct samples).

The scores follow KernelBench: a problem without a correct sample is incorrect, and fast_p's
denominator is every problem of the level (docs/kernelbench.md).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelproof.errors import UsageError

SAMPLE_NAME = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
# What KernelBench's analysis script calls each baseline's timing file (results/timing/<hardware>/).
BASELINE_FILES = {
    "eager": "baseline_time_torch",
    "compile:default": "baseline_time_torch_compile_inductor_default",
}
KB_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)  # the p values KernelBench's analysis prints
# Outcomes that say nothing about the candidate: the task cannot be judged (degenerate_task,
# task_error), the device or machine could not run it (too_large, environment, machine_busy), or
# kernelproof failed (internal_error). KernelBench has no such exclusion; both figures are shown.
NOT_THE_CANDIDATES = frozenset(
    {"degenerate_task", "task_error", "too_large", "environment", "machine_busy", "internal_error"}
)
MISSING = "missing"  # the verdict word of a sample whose file the run folder lacks


@dataclass(frozen=True)
class Problem:
    id: int  # the number prefix of the file's name
    name: str  # the file's name, "<P>_<Name>.py" (the key of KernelBench's baseline files)
    path: Path


@dataclass(frozen=True)
class Sample:
    problem: int
    sample: int
    path: Path | None  # None: the run folder has no file for it (judged as failing, never run)


@dataclass(frozen=True)
class KernelBenchRun:
    """What one ``kernelproof kernelbench`` judges: the level's problems and the run's samples."""

    run_dir: Path
    level: int
    problems: dict[int, Problem]  # every problem of the level, by id
    samples: tuple[Sample, ...]  # per problem with a sample file: ids 0..num_samples-1, sorted
    num_samples: int  # samples per problem (the highest id found + 1, unless given)
    strays: tuple[str, ...] = ()  # sample files of this level whose problem the checkout lacks

    def pairs(self) -> list[tuple[Path, Path]]:
        """(problem file, sample file) of every sample present, in problem then sample order."""
        return [(self.problems[s.problem].path, s.path) for s in self.samples if s.path is not None]

    @property
    def missing(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s.path is None)


def level_problems(checkout: Path, level: int) -> dict[int, Problem]:
    """The problems of ``checkout/KernelBench/level<level>`` by the number prefix of their names."""
    folder = Path(checkout) / "KernelBench" / f"level{level}"
    if not folder.is_dir():
        raise UsageError(
            f"{folder} is not a folder: --kernelbench takes the root of a KernelBench checkout "
            "(the folder that holds KernelBench/level1)"
        )
    found: dict[int, Problem] = {}
    for path in sorted(folder.glob("*.py")):
        head = path.name.split("_")[0]
        if not head.isdigit():
            continue  # KernelBench skips these too
        pid = int(head)
        if pid in found:
            raise UsageError(f"two problems with id {pid} in {folder}: {found[pid].name} and {path.name}")
        found[pid] = Problem(pid, path.name, path)
    if not found:
        raise UsageError(f"no problem file (<id>_<name>.py) in {folder}")
    return dict(sorted(found.items()))


def find_run(run_dir: Path, level: int, checkout: Path, num_samples: int | None = None) -> KernelBenchRun:
    """The samples of ``run_dir`` for ``level``, each mapped to its problem; UsageError with none."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"run folder {run_dir} " + ("is not a folder" if run_dir.exists() else "not found"))
    if num_samples is not None and num_samples < 1:
        raise UsageError(f"--num-samples must be at least 1, not {num_samples}")
    problems = level_problems(checkout, level)
    files: dict[tuple[int, int], Path] = {}
    strays = []
    for path in sorted(run_dir.iterdir()):
        m = SAMPLE_NAME.match(path.name)
        if m is None or int(m.group(1)) != level or not path.is_file():
            continue
        pid, sid = int(m.group(2)), int(m.group(3))
        if pid not in problems:
            strays.append(path.name)
        elif num_samples is None or sid < num_samples:
            files[(pid, sid)] = path
    if not files:
        raise UsageError(
            f"no level_{level}_problem_<P>_sample_<S>_kernel.py in {run_dir} for a problem of "
            f"{Path(checkout) / 'KernelBench' / f'level{level}'}"
        )
    n = num_samples if num_samples is not None else max(sid for _, sid in files) + 1
    samples = tuple(
        Sample(pid, sid, files.get((pid, sid))) for pid in sorted({p for p, _ in files}) for sid in range(n)
    )
    return KernelBenchRun(run_dir, level, problems, samples, n, tuple(strays))


def headline_timing(doc: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The timed shape KernelBench would time: the task's own ("default"), cold; else the first cold."""
    shapes = [s for s in ((doc or {}).get("timing") or {}).get("shapes") or [] if s.get("regime") == "cold"]
    return next((s for s in shapes if s.get("shape") == "default"), shapes[0] if shapes else None)


def _stats(stats: Mapping[str, Any] | None, doc: Mapping[str, Any]) -> dict[str, Any]:
    """KernelBench's runtime_stats (ms) from a kernelproof TimeStats; no ``std``: none is measured."""
    if not stats:
        return {}
    out = {k: stats.get(f"{k}_ms") for k in ("mean", "median", "min", "max", "iqr")}
    out["num_trials"] = stats.get("n")
    env = doc.get("environment") or {}
    out["hardware"] = env.get("device_name") or env.get("gpu") or ""
    out["device"] = (doc.get("timing") or {}).get("device") or env.get("device") or ""
    return out


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def sample_entry(sample: Sample, doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """One sample's entry of eval_results.json."""
    if doc is None:
        note = "the run folder has no file for this sample"
        return {
            "sample_id": sample.sample,
            "compiled": False,
            "correctness": False,
            "metadata": {"other_error": note, "kernelproof": {"verdict": MISSING, "codes": [], "note": note}},
            "runtime": -1.0,
            "runtime_stats": {},
        }
    codes = [r.get("code", "") for r in doc.get("reasons", [])]
    passed = doc.get("verdict") == "pass"
    shape = headline_timing(doc) if passed else None
    cand = (shape or {}).get("candidate") or {}
    ref = ((shape or {}).get("baselines") or {}).get("eager") or {}
    metadata: dict[str, Any] = {}
    for code, key in (("compile_error", "compilation_error"), ("runtime_error", "runtime_error")):
        if code in codes:
            metadata[key] = next(r.get("message", "") for r in doc["reasons"] if r.get("code") == code)
    if not passed and not metadata and codes:
        metadata["correctness_issue"] = doc["reasons"][0].get("message", "")
    if _finite(ref.get("mean_ms")):
        metadata["ref_runtime"] = ref["mean_ms"]
        metadata["ref_runtime_stats"] = _stats(ref, doc)
    metadata["kernelproof"] = {
        "verdict": doc.get("verdict"),
        "codes": codes,
        "reasons": [
            {"code": r.get("code", ""), "message": r.get("message", "")} for r in doc.get("reasons", [])
        ],
        "flags": list(doc.get("flags", [])),
        "speedup": {k: (v or {}).get("median") for k, v in (doc.get("speedup") or {}).items()},
        "shape": (shape or {}).get("shape", ""),
        "solution_sha256": (doc.get("solution") or {}).get("sha256", ""),
        "stored_at": (doc.get("stored") or {}).get("at", ""),
    }
    return {
        "sample_id": sample.sample,
        "compiled": "compile_error" not in codes,
        "correctness": passed,
        "metadata": metadata,
        "runtime": cand["mean_ms"] if _finite(cand.get("mean_ms")) else -1.0,
        "runtime_stats": _stats(cand, doc) if _finite(cand.get("mean_ms")) else {},
    }


Judged = Mapping[tuple[int, int], Mapping[str, Any]]  # (problem id, sample id) -> verdict document


def eval_results(run: KernelBenchRun, docs: Judged) -> dict[str, list[dict[str, Any]]]:
    """KernelBench's eval_results.json: problem id (a string) -> entries by sample id, sorted."""
    out: dict[str, list[dict[str, Any]]] = {}
    for s in run.samples:
        out.setdefault(str(s.problem), []).append(sample_entry(s, docs.get((s.problem, s.sample))))
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def baseline_times(run: KernelBenchRun, results: Mapping[str, list[dict[str, Any]]], baseline: str) -> dict:
    """KernelBench's baseline timing file for ``baseline`` over every problem of the level."""
    level: dict[str, Any] = {}
    for pid, problem in run.problems.items():
        stats = [
            e["metadata"]["ref_runtime_stats" if baseline == "eager" else f"ref_runtime_stats:{baseline}"]
            for e in results.get(str(pid), [])
            if ("ref_runtime_stats" if baseline == "eager" else f"ref_runtime_stats:{baseline}")
            in e["metadata"]
        ]
        if not stats:
            level[problem.name] = {"mean": None, "note": "not timed: no sample of this problem passed"}
            continue
        mid = statistics.median(s["mean"] for s in stats)
        level[problem.name] = {
            "mean": mid,
            "min": min(s["min"] for s in stats),
            "max": max(s["max"] for s in stats),
            "num_trials": sum(s["num_trials"] or 0 for s in stats),
            "hardware": stats[0]["hardware"],
            "device": stats[0]["device"],
            "samples": len(stats),
        }
    return {f"level{run.level}": level}


def add_baseline_stats(results: Mapping[str, list[dict[str, Any]]], docs: Judged, baseline: str) -> None:
    """Record another baseline's reference time in each timed entry (``ref_runtime_stats:<name>``)."""
    for pid, entries in results.items():
        for e in entries:
            doc = docs.get((int(pid), e["sample_id"]))
            shape = headline_timing(doc) if doc is not None and e["correctness"] else None
            stats = ((shape or {}).get("baselines") or {}).get(baseline) or {}
            if _finite(stats.get("mean_ms")):
                e["metadata"][f"ref_runtime_stats:{baseline}"] = _stats(stats, doc or {})


def calc_pass_at_k(n: int, c: int, k: int) -> float:
    """KernelBench's unbiased pass@k (scripts/eval_from_generations.py); 0 for a problem with no sample."""
    if n == 0:
        return 0.0
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


@dataclass(frozen=True)
class Scores:
    """fast_p and pass@k over the problems of a level, KernelBench's way and without the problems
    whose every sample ended in an outcome that says nothing about the candidate."""

    problems: int  # every problem of the level
    with_samples: int  # problems with at least one sample file
    correct: int  # problems with a correct sample
    pass_at_k: dict[int, float]  # k -> mean over every problem of the level
    fast_p: dict[str, dict[float, float]] | None  # "sample 0" | "best of N" -> p -> share; None: untimed
    unjudged: dict[str, int]  # code -> problems excluded from the second figure
    fast_p_judged: dict[str, dict[float, float]] | None  # the same over the problems left
    pass_at_k_judged: dict[int, float]


def _speedups(
    results: Mapping[str, list[dict[str, Any]]], base: Mapping[str, Any], pid: int, problem: Problem
):
    """(sample id, correct, speedup over the baseline file's mean or None) of each entry."""
    ref = (base.get(problem.name) or {}).get("mean")
    for e in results.get(str(pid), []):
        ok = bool(e["correctness"])
        rt = e["runtime"]
        yield e["sample_id"], ok, (ref / rt if ok and _finite(ref) and _finite(rt) else None)


def _unjudged(entries: Sequence[Mapping[str, Any]]) -> str | None:
    """The code that kept every sample of a problem from being judged on its merits, or None: each
    sample present ended in an outcome that says nothing about the candidate (missing ones aside)."""
    present = [
        e["metadata"]["kernelproof"] for e in entries if e["metadata"]["kernelproof"]["verdict"] != MISSING
    ]
    causes = [sorted(NOT_THE_CANDIDATES.intersection(k["codes"])) for k in present]
    if not present or not all(causes):
        return None
    return statistics.mode(c[0] for c in causes)


def score(
    run: KernelBenchRun,
    results: Mapping[str, list[dict[str, Any]]],
    baseline_file: Mapping[str, Any] | None,
    ks: Sequence[int] = (1,),
) -> Scores:
    """The level's scores from what eval_results.json holds (and the baseline file, for fast_p)."""
    base = (baseline_file or {}).get(f"level{run.level}", {})
    excluded: dict[str, int] = {}
    fast: dict[str, dict[float, list[bool]]] = {"sample 0": {}, f"best of {run.num_samples}": {}}
    fast_j: dict[str, dict[float, list[bool]]] = {k: {} for k in fast}
    passk: dict[int, list[float]] = {k: [] for k in ks}
    passk_j: dict[int, list[float]] = {k: [] for k in ks}
    correct = 0
    for pid, problem in run.problems.items():
        entries = results.get(str(pid), [])
        rows = list(_speedups(results, base, pid, problem))
        c = sum(1 for _, ok, _ in rows if ok)
        correct += c > 0
        cause = _unjudged(entries) if c == 0 else None
        judged = cause is None
        if cause is not None:
            excluded[cause] = excluded.get(cause, 0) + 1
        for k in ks:
            value = calc_pass_at_k(len(entries), c, min(k, len(entries)) if entries else k)
            passk[k].append(value)
            if judged:
                passk_j[k].append(value)
        first = next((s for sid, _, s in rows if sid == 0), None)
        best = max((s for _, _, s in rows if s is not None), default=None)
        for label, s in zip(fast, (first, best)):
            for p in KB_P:
                hit = s is not None and s > p
                fast[label].setdefault(p, []).append(hit)
                if judged:
                    fast_j[label].setdefault(p, []).append(hit)
    timed = any(_finite((v or {}).get("mean")) for v in base.values())

    def share(table):
        return {
            label: {p: sum(v) / len(v) if v else 0.0 for p, v in by_p.items()}
            for label, by_p in table.items()
        }

    return Scores(
        problems=len(run.problems),
        with_samples=len({s.problem for s in run.samples}),
        correct=correct,
        pass_at_k={k: sum(v) / len(v) for k, v in passk.items()},
        fast_p=share(fast) if timed else None,
        unjudged=excluded,
        fast_p_judged=share(fast_j) if timed else None,
        pass_at_k_judged={k: sum(v) / len(v) if v else 0.0 for k, v in passk_j.items()},
    )


def pass_at_k_results(
    run: KernelBenchRun, results: Mapping[str, list[dict[str, Any]]], ks: Sequence[int]
) -> dict:
    """KernelBench's pass_at_k_results.json, over every problem of the level (none: 0)."""
    problems = {}
    for pid in run.problems:
        entries = results.get(str(pid), [])
        n, c = len(entries), sum(1 for e in entries if e["correctness"] and e["compiled"])
        problems[str(pid)] = {
            "total_samples": n,
            "correct_samples": c,
            **{f"pass@{k}": calc_pass_at_k(n, c, min(k, n) if n else k) for k in ks},
        }
    total = len(problems)
    metadata = {
        "total_problems": total,
        "problems_with_samples": sum(1 for r in problems.values() if r["total_samples"] > 0),
        "total_evaluated_samples": sum(r["total_samples"] for r in problems.values()),
        "total_correct_samples": sum(r["correct_samples"] for r in problems.values()),
        **{f"pass@{k}_count": total for k in ks},
    }
    averages = {f"avg_pass@{k}": sum(r[f"pass@{k}"] for r in problems.values()) / total for k in ks}
    return {"averages": averages, "metadata": metadata, "problems": problems}
