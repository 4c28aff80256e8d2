"""A KernelBench run folder judged as it is, written back in KernelBench's own files.

KernelBench's scripts write ``runs/<run>/level_<L>_problem_<P>_sample_<S>_kernel.py`` (several
samples per problem) and read ``runs/<run>/eval_results.json``; the problem is
``KernelBench/level<L>/<P>_<Name>.py`` (or ``level<L>/<P>_<Name>.py`` in a folder prepared by
benchmarks/kernelbench_sweep.py). Problem ids come from the number before the first
underscore of the problem file's name, as KernelBench's own dataset reads them
(``src/kernelbench/dataset.py``), never from a position in a listing: level 1 sorted by name
starts 1, 10, 100, 11.

What is written, so that KernelBench's analysis (``scripts/benchmark_eval_analysis.py``) reads
it unchanged:

- ``eval_results.json``: ``{"<problem_id>": [{"sample_id", "compiled", "correctness", "metadata",
  "runtime", "runtime_stats"}, ...]}`` sorted by problem id, each field in KernelBench's meaning:
  ``compiled`` where a build ran and succeeded or none was needed; ``runtime`` the candidate's mean
  milliseconds per call at the task's own shape only where its speed is a claim, else -1.0 (not
  measured); kernelproof's verdict and the sizes judged at under ``metadata["kernelproof"]``, the
  reference's time of the same session under ``metadata["ref_runtime"]`` (KernelBench's own
  field name).
- ``baseline_time_torch.json`` (eager) and, when measured,
  ``baseline_time_torch_compile_inductor_default.json``: ``{"level<L>": {"<P>_<Name>.py":
  {"mean": ms, ...}}}``, the file the analysis takes as ``baseline_file=``; the reference's time
  of a problem is the median over its timed samples of the reference's mean, and
  :data:`NOT_TIMED_MEAN` for a problem none of whose samples was timed as a claim
  (:func:`baseline_times` says why).

The scores follow KernelBench: a problem without a correct sample is incorrect, and fast_p's
denominator is every problem of the level (docs/kernelbench.md).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
PUBLISHED = "published"  # the sizes label of a run at the tasks' own sizes
NOT_TIMED_MEAN = 0.0  # a baseline file's mean for a problem whose reference was not timed (baseline_times)
GENERATION_CONFIG = "generation_config.yaml"  # what KernelBench's generate_samples.py writes into the run


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
    config: Mapping[str, str] = field(default_factory=dict)  # the run's generation_config.yaml, if any
    sizes: str = PUBLISHED  # the sizes the problems are judged at: PUBLISHED, or "1/<factor>"

    def pairs(self) -> list[tuple[Path, Path]]:
        """(problem file, sample file) of every sample present, in problem then sample order."""
        return [(self.problems[s.problem].path, s.path) for s in self.samples if s.path is not None]

    @property
    def missing(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s.path is None)


def level_folder(checkout: Path, level: int) -> Path:
    """The folder of level ``level``'s problems under ``checkout``, in either layout: KernelBench's own
    checkout (``KernelBench/level<L>``) or the sweep's prepared folder (``level<L>`` directly,
    benchmarks/kernelbench_sweep.py ``--prepare``); the level folder itself is taken too."""
    checkout = Path(checkout)
    for folder in (checkout / "KernelBench" / f"level{level}", checkout / f"level{level}"):
        if folder.is_dir():
            return folder
    if checkout.name == f"level{level}" and checkout.is_dir():
        return checkout
    raise UsageError(
        f"no level{level} folder in {checkout}: --kernelbench takes the root of a KernelBench checkout "
        "(the folder that holds KernelBench/level1) or a folder prepared by "
        "benchmarks/kernelbench_sweep.py --prepare (it holds level1)"
    )


def level_problems(checkout: Path, level: int) -> dict[int, Problem]:
    """The problems of level ``level`` (:func:`level_folder`) by the number prefix of their names."""
    folder = level_folder(checkout, level)
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


def parse_problems(text: str) -> frozenset[int]:
    """``--problems``: ids and ranges, ``1,19`` or ``3-7`` or both (``1,3-7,19``); UsageError else."""
    ids: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise UsageError(f"--problems takes ids and ranges such as 1,19 or 3-7, not {text!r}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise UsageError(f"--problems: the range {part} runs backwards")
        ids.update(range(first, last + 1))
    return frozenset(ids)


def generation_config(run_dir: Path) -> dict[str, str]:
    """The top-level scalars of the run's generation_config.yaml (KernelBench's generate_samples.py
    writes every setting of the run there: level, num_samples, backend, precision, ...), as strings;
    empty without the file. Read line by line: the file is flat ``key: value`` YAML."""
    path = Path(run_dir) / GENERATION_CONFIG
    if not path.is_file():
        return {}
    found = {}
    for raw in path.read_text(errors="replace").splitlines():
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(.*?)\s*$", raw)
        if m and m.group(2) and not m.group(2).startswith(("|", ">", "{", "[")):
            found[m.group(1)] = m.group(2).strip("'\"")
    return found


def sample_levels(run_dir: Path) -> list[int]:
    """The levels the run folder's sample files name, sorted."""
    return sorted({int(m.group(1)) for p in Path(run_dir).iterdir() if (m := SAMPLE_NAME.match(p.name))})


def run_level(run_dir: Path, level: int | None, config: Mapping[str, str]) -> int:
    """The level to judge: ``--level``, else generation_config.yaml's, else the one level the sample
    files name; UsageError where none says or the files name several."""
    if level is not None:
        return level
    if str(config.get("level", "")).isdigit():
        return int(config["level"])
    levels = sample_levels(run_dir)
    if len(levels) == 1:
        return levels[0]
    if not levels:
        raise UsageError(f"no level_<L>_problem_<P>_sample_<S>_kernel.py in {run_dir}")
    raise UsageError(
        f"the sample files of {run_dir} are of levels {', '.join(map(str, levels))}: say which with --level"
    )


def find_run(
    run_dir: Path,
    level: int | None,
    checkout: Path,
    num_samples: int | None = None,
    problems: frozenset[int] | None = None,
) -> KernelBenchRun:
    """The samples of ``run_dir`` for ``level`` (None: :func:`run_level`), each mapped to its problem,
    only those of ``problems`` when given; UsageError with none. The number of samples per problem is
    ``num_samples``, else generation_config.yaml's ``num_samples``, else the highest id found + 1."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"run folder {run_dir} " + ("is not a folder" if run_dir.exists() else "not found"))
    if num_samples is not None and num_samples < 1:
        raise UsageError(f"--num-samples must be at least 1, not {num_samples}")
    config = generation_config(run_dir)
    level = run_level(run_dir, level, config)
    if (
        num_samples is None
        and str(config.get("num_samples", "")).isdigit()
        and int(config["num_samples"]) > 0
    ):
        num_samples = int(config["num_samples"])
    problems_all = level_problems(checkout, level)
    if problems is not None:
        unknown = sorted(problems - set(problems_all))
        chosen = {pid: p for pid, p in problems_all.items() if pid in problems}
        if not chosen:
            raise UsageError(f"--problems names no problem of level {level} (ids {_span(problems_all)})")
        if unknown and len(unknown) == len(problems):
            raise UsageError(f"--problems: no problem {', '.join(map(str, unknown))} in level {level}")
        problems_all = chosen
    files: dict[tuple[int, int], Path] = {}
    strays = []
    for path in sorted(run_dir.iterdir()):
        m = SAMPLE_NAME.match(path.name)
        if m is None or int(m.group(1)) != level or not path.is_file():
            continue
        pid, sid = int(m.group(2)), int(m.group(3))
        if problems is not None and pid not in problems:
            continue
        if pid not in problems_all:
            strays.append(path.name)
        elif num_samples is None or sid < num_samples:
            files[(pid, sid)] = path
    if not files:
        raise UsageError(
            f"no level_{level}_problem_<P>_sample_<S>_kernel.py in {run_dir} for a problem of "
            f"{level_folder(checkout, level)}" + (" among --problems" if problems is not None else "")
        )
    n = num_samples if num_samples is not None else max(sid for _, sid in files) + 1
    samples = tuple(
        Sample(pid, sid, files.get((pid, sid))) for pid in sorted({p for p, _ in files}) for sid in range(n)
    )
    return KernelBenchRun(run_dir, level, problems_all, samples, n, tuple(strays), config)


def _span(problems: Mapping[int, Problem]) -> str:
    ids = list(problems)
    return f"{ids[0]} to {ids[-1]}" if ids else "none"


def headline_timing(doc: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The timed shape KernelBench would time: the task's own ("default"), cold; else the first cold."""
    shapes = [s for s in ((doc or {}).get("timing") or {}).get("shapes") or [] if s.get("regime") == "cold"]
    return next((s for s in shapes if s.get("shape") == "default"), shapes[0] if shapes else None)


def _stats(stats: Mapping[str, Any] | None, doc: Mapping[str, Any]) -> dict[str, Any]:
    """KernelBench's runtime_stats (ms) from a kernelproof TimeStats: ``mean``, ``std``, ``min``,
    ``max``, ``num_trials``, ``hardware``, ``device`` as KernelBench's timing writes them, and
    kernelproof's ``median`` and ``iqr`` beside (``std`` is null in a verdict stored before it was
    recorded)."""
    if not stats:
        return {}
    out = {k: stats.get(f"{k}_ms") for k in ("mean", "std", "median", "min", "max", "iqr")}
    out["num_trials"] = stats.get("n")
    env = doc.get("environment") or {}
    out["hardware"] = env.get("device_name") or env.get("gpu") or ""
    out["device"] = (doc.get("timing") or {}).get("device") or env.get("device") or ""
    return out


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def speed_is_a_claim(doc: Mapping[str, Any]) -> bool:
    """Whether the verdict's times say something about the solution's speed: its ``claims.speed``
    (an interpreted Triton kernel on the CPU, timed anyway on a busy machine, ... is no claim);
    a verdict written before claims existed claims what it timed."""
    claims = doc.get("claims")
    return bool(claims.get("speed")) if isinstance(claims, Mapping) else True


def compiled(doc: Mapping[str, Any], needs_build: bool) -> bool:
    """KernelBench's ``compiled``: a build ran and succeeded, or the sample needed none (plain
    PyTorch, Triton's JIT) and did not fail to parse or load. A CUDA sample stopped before its build
    (this machine cannot build it, the task is too large) was never compiled."""
    codes = [r.get("code", "") for r in doc.get("reasons", [])]
    if "compile_error" in codes:
        return False
    build = doc.get("build")
    if isinstance(build, Mapping):
        return bool(build.get("ok"))
    return not needs_build


def sample_entry(
    sample: Sample, doc: Mapping[str, Any] | None, *, needs_build: bool = False, sizes: str = PUBLISHED
) -> dict[str, Any]:
    """One sample's entry of eval_results.json, in KernelBench's meaning: ``compiled`` as
    :func:`compiled`, ``correctness`` kernelproof's pass, ``runtime`` and ``runtime_stats`` only
    where the speed is a claim (:func:`speed_is_a_claim`), else KernelBench's "not measured"
    (-1.0 and {}); ``metadata.kernelproof.sizes`` says at which sizes it was judged."""
    if doc is None:
        note = "the run folder has no file for this sample"
        return {
            "sample_id": sample.sample,
            "compiled": False,
            "correctness": False,
            "metadata": {
                "other_error": note,
                "kernelproof": {"verdict": MISSING, "codes": [], "note": note, "sizes": sizes},
            },
            "runtime": -1.0,
            "runtime_stats": {},
        }
    codes = [r.get("code", "") for r in doc.get("reasons", [])]
    passed = doc.get("verdict") == "pass"
    shape = headline_timing(doc) if passed else None
    claim = shape is not None and speed_is_a_claim(doc)
    cand = (shape or {}).get("candidate") or {}
    ref = ((shape or {}).get("baselines") or {}).get("eager") or {}
    metadata: dict[str, Any] = {}
    for code, key in (("compile_error", "compilation_error"), ("runtime_error", "runtime_error")):
        if code in codes:
            metadata[key] = next(r.get("message", "") for r in doc["reasons"] if r.get("code") == code)
    if not passed and not metadata and codes:
        metadata["correctness_issue"] = doc["reasons"][0].get("message", "")
    if claim and _finite(ref.get("mean_ms")):
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
        "sizes": sizes,
        "speed_claimed": claim,
        "solution_sha256": (doc.get("solution") or {}).get("sha256", ""),
        "task_sha256": (doc.get("task") or {}).get("sha256", ""),
        "stored_at": (doc.get("stored") or {}).get("at", ""),
    }
    timed = claim and _finite(cand.get("mean_ms"))
    return {
        "sample_id": sample.sample,
        "compiled": compiled(doc, needs_build),
        "correctness": passed,
        "metadata": metadata,
        "runtime": cand["mean_ms"] if timed else -1.0,
        "runtime_stats": _stats(cand, doc) if timed else {},
    }


def needs_a_build(path: Path | None) -> bool:
    """Whether the sample's source asks for a build (CUDA or native code), by kernelproof's triage:
    the parent's reading of the file, the same that decides whether evaluation builds it."""
    if path is None:
        return False
    from kernelproof.evaluate.build import needs_build
    from kernelproof.solution import read_solution

    return needs_build(read_solution(str(path)).triage.backend)


def sample_backends(run: KernelBenchRun) -> dict[str, int]:
    """How many of the run's sample files hold each backend, by kernelproof's triage of each
    source (triton | cuda | native | torch)."""
    from kernelproof.solution import read_solution

    found: dict[str, int] = {}
    for _, path in run.pairs():
        backend = read_solution(str(path)).triage.backend
        found[backend] = found.get(backend, 0) + 1
    return found


Judged = Mapping[tuple[int, int], Mapping[str, Any]]  # (problem id, sample id) -> verdict document


def eval_results(run: KernelBenchRun, docs: Judged) -> dict[str, list[dict[str, Any]]]:
    """KernelBench's eval_results.json: problem id (a string) -> entries by sample id, sorted."""
    out: dict[str, list[dict[str, Any]]] = {}
    for s in run.samples:
        doc = docs.get((s.problem, s.sample))
        entry = sample_entry(s, doc, needs_build=doc is not None and needs_a_build(s.path), sizes=run.sizes)
        out.setdefault(str(s.problem), []).append(entry)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def baseline_times(run: KernelBenchRun, results: Mapping[str, list[dict[str, Any]]], baseline: str) -> dict:
    """KernelBench's baseline timing file for ``baseline`` over every problem of the level.

    A problem none of whose samples was timed as a claim has ``"mean": 0.0`` (with a ``note``):
    KernelBench's analysis divides this mean by the runtime of every correct sample, and a null
    there stops it with a TypeError, where 0.0 over KernelBench's "not measured" runtime (-1.0)
    reads as not faster at any p, which is what kernelproof's table says of it."""
    level: dict[str, Any] = {}
    for pid, problem in run.problems.items():
        stats = [
            e["metadata"]["ref_runtime_stats" if baseline == "eager" else f"ref_runtime_stats:{baseline}"]
            for e in results.get(str(pid), [])
            if ("ref_runtime_stats" if baseline == "eager" else f"ref_runtime_stats:{baseline}")
            in e["metadata"]
        ]
        if not stats:
            level[problem.name] = {
                "mean": NOT_TIMED_MEAN,
                "note": "not timed: no sample of this problem passed with its speed a claim",
                "sizes": run.sizes,
            }
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
            "sizes": run.sizes,
        }
    return {f"level{run.level}": level}


def add_baseline_stats(results: Mapping[str, list[dict[str, Any]]], docs: Judged, baseline: str) -> None:
    """Record another baseline's reference time in each timed entry (``ref_runtime_stats:<name>``)."""
    for pid, entries in results.items():
        for e in entries:
            doc = docs.get((int(pid), e["sample_id"]))
            claimed = e["metadata"]["kernelproof"].get("speed_claimed", False)
            shape = headline_timing(doc) if doc is not None and e["correctness"] and claimed else None
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
