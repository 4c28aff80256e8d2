"""Throughput: evaluations per GPU-hour over a mixed batch, with builds overlapping evaluation.

The batch is what an agent loop or an RL rollout sends: the suite's Triton solutions, CUDA
load_inline and native variants of two elementwise tasks (copies that differ by a comment, so
every copy is a cache miss), exact duplicates (cache hits), candidates that fail to compile,
wrong ones and one that hangs. Everything goes through ``kernelproof.api.evaluate_many`` with one
pool: builds are submitted up front and run on the CPU cores while the GPU evaluates whatever is
built. Before the batch, one evaluation warms the pool (a worker, the first baselines) and the
precompiled torch headers are built (once per machine; their time is printed apart).

Prints evaluations per GPU-hour, the median build and evaluation times, the time evaluations
waited for builds, and the GPU idle fraction (NVML utilisation sampled in a thread; "not
measured" without nvidia-ml-py or on the CPU). Never gates CI.

``--per-device 2`` keeps two evaluations in flight per GPU (their timings never overlap);
``--warm-builds`` fills the build cache first, untimed, so the one pass measures warm caches;
``--passes 2`` runs the batch twice instead (cold, then warm) at twice the cost.

On the GPU machine:   python benchmarks/throughput.py
Plan only:            python benchmarks/throughput.py --dry-run
On a CPU-only torch:  python benchmarks/throughput.py --device cpu   (two Triton candidates, interpreted)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from _common import ROOT, phase_durations, phase_parts, suite_pairs, table, write_json

from kernelproof.api import evaluate_many
from kernelproof.evaluate.build import needs_build
from kernelproof.executors.local import LocalPool, resolve_devices
from kernelproof.measure.telemetry import nvml_handle
from kernelproof.options import EvalOptions
from kernelproof.solution import read_solution

CUDA_TEMPLATE = '''"""{what} ({tag}): one elementwise load_inline kernel, KernelBench style."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>

__global__ void {name}_kernel(const float* x, float* y, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        float v = x[i];
        y[i] = {expr};
    }}
}}

torch::Tensor {name}_cuda(torch::Tensor x) {{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long n = xc.numel();
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    {name}_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}}
"""
cpp_source = "torch::Tensor {name}_cuda(torch::Tensor x);"
ext = load_inline(name="{name}", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["{name}_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.{name}_cuda(x)
'''

NATIVE_TEMPLATE = '''"""{what} ({tag}): one elementwise kernel through kernelproof.native."""

import torch
import torch.nn as nn

from kernelproof.native import load_cuda

SRC = r"""
extern "C" __global__ void {name}(const float* x, float* y, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        float v = x[i];
        y[i] = {expr};
    }}
}}
"""
mod = load_cuda(SRC, ["{name}"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        mod.{name}(grid=((n + 255) // 256,), block=(256,), args=(x, y, n))
        return y
'''

EXPR = {
    "09_gelu": "v * 0.5f * (1.0f + erff(v * 0.7071067811865476f))",
    "10_silu": "v / (1.0f + expf(-v))",
}
WRONG_EXPR = "fmaxf(v, 0.0f)"  # relu: not the function asked for
BROKEN_EXPR = "undefined_activation(v)"  # nvcc: identifier is undefined


@dataclass(frozen=True)
class Candidate:
    kind: str  # triton | cuda | native | cuda-duplicate | compile-fail | wrong | hang
    task: Path
    path: Path
    expect: str  # pass | compile_error | mismatch | timeout


def make_candidates(work: Path, copies: int, tasks: int) -> list[Candidate]:
    """The batch, written under `work` (grouped by task, so a task's baselines stay warm)."""
    pairs = suite_pairs()[:tasks] if tasks else suite_pairs()
    by_task = {t.stem: t for t, _ in suite_pairs()}
    out: list[Candidate] = []
    for task, sol in pairs:
        dest = work / "triton" / task.parent.name / task.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(sol, dest)
        out.append(Candidate("triton", task, dest, "pass"))
    for stem, expr in EXPR.items():
        task = by_task[stem]
        what = stem.split("_", 1)[1].upper()
        first_cuda = None
        for i in range(copies):
            p = _write(
                work / "cuda" / f"{stem}_{i}.py", CUDA_TEMPLATE, what, f"copy {i}", f"kp_{stem[3:]}", expr
            )
            out.append(Candidate("cuda", task, p, "pass"))
            first_cuda = first_cuda or p
        for i in range(max(1, copies // 2)):
            p = _write(
                work / "native" / f"{stem}_{i}.py", NATIVE_TEMPLATE, what, f"copy {i}", f"{stem[3:]}_k", expr
            )
            out.append(Candidate("native", task, p, "pass"))
        dup = work / "cuda" / f"{stem}_dup.py"
        shutil.copyfile(first_cuda, dup)  # same bytes: a cache hit
        out.append(Candidate("cuda-duplicate", task, dup, "pass"))
        name = f"kp_{stem[3:]}_broken"
        p = _write(work / "bad" / f"{stem}_broken.py", CUDA_TEMPLATE, what, "broken", name, BROKEN_EXPR)
        out.append(Candidate("compile-fail", task, p, "compile_error"))
        p = _write(
            work / "bad" / f"{stem}_wrong.py", NATIVE_TEMPLATE, what, "wrong", f"{stem[3:]}_w", WRONG_EXPR
        )
        out.append(Candidate("wrong", task, p, "mismatch"))
    gelu_task = by_task["09_gelu"]
    hang = work / "bad" / "09_gelu_hang.py"
    src = (ROOT / "examples" / "level1" / "09_gelu.py").read_text()
    hang.write_text(src.replace("        x = x.contiguous()\n", "        while True:\n            pass\n", 1))
    out.append(Candidate("hang", gelu_task, hang, "timeout"))
    out.sort(key=lambda c: str(c.task))  # a task's candidates together: its baselines stay warm
    return out


def _write(path: Path, template: str, what: str, tag: str, name: str, expr: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(template.format(what=what, tag=tag, name=name, expr=expr))
    return path


class IdleSampler:
    """NVML utilisation of the given GPUs every `period_s`; idle fraction = share of samples at 0 %."""

    def __init__(self, indices: list[int], period_s: float = 0.1):
        self.indices = indices
        self.period_s = period_s
        self.samples: list[int] = []
        self.note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            # torch's indices, found in NVML by UUID (NVML ignores CUDA_VISIBLE_DEVICES)
            self._handles = [nvml_handle(pynvml, i) for i in indices]
        except Exception as exc:  # noqa: BLE001 - no NVML: say so, measure the rest
            self._nvml = None
            self.note = f"not measured ({type(exc).__name__}: {exc}; pip install nvidia-ml-py)"

    def __enter__(self) -> IdleSampler:
        if self._nvml is not None and self.indices:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            for h in self._handles:
                self.samples.append(int(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu))

    def idle_fraction(self) -> float | None:
        if not self.samples:
            return None
        return sum(s == 0 for s in self.samples) / len(self.samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (every visible GPU), cuda:N, or cpu")
    ap.add_argument("--tasks", type=int, default=0, help="suite tasks with Triton candidates (0: all 25)")
    ap.add_argument("--copies", type=int, default=4, help="CUDA load_inline copies per elementwise task")
    ap.add_argument("--limit", type=int, default=0, help="evaluate only the first N candidates (0: all)")
    ap.add_argument("--time-budget", type=float, default=2.0, help="timing seconds per timed shape")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a worker step or a build may take")
    ap.add_argument("--build-workers", type=int, default=0, help="builder processes (0: one per 4 cores)")
    ap.add_argument(
        "--build-cache", default=None, help="build cache (default: a fresh one, every build cold)"
    )
    ap.add_argument(
        "--per-device",
        type=int,
        default=1,
        help="evaluations in flight per GPU (untimed work overlaps; timing never does)",
    )
    ap.add_argument(
        "--passes", type=int, default=1, help="2: the batch again, its builds now in the cache (warm)"
    )
    ap.add_argument(
        "--warm-builds",
        action="store_true",
        help="build every candidate into the cache first (not timed), then one pass with warm caches",
    )
    ap.add_argument(
        "--max-seconds",
        type=float,
        default=0.0,
        help="per pass: stop after this long and report what finished (0: run all)",
    )
    ap.add_argument(
        "--dry-run", action="store_true", help="write the candidates, print the plan, evaluate nothing"
    )
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="kp-throughput-"))
    cpu = args.device == "cpu"
    candidates = make_candidates(work, args.copies, args.tasks)
    if cpu:  # the interpreter runs Triton on the CPU; CUDA and native builds need a GPU to run
        candidates = [c for c in candidates if c.kind == "triton" and c.task.stem in EXPR]
    if args.limit:
        candidates = candidates[: args.limit]
    kinds = sorted({c.kind for c in candidates})
    print(
        f"{len(candidates)} candidates over {len({c.task for c in candidates})} tasks in {work}: "
        + ", ".join(f"{k} {sum(c.kind == k for c in candidates)}" for k in kinds)
    )
    if args.dry_run:
        print(f"(candidates kept in {work})")
        print(
            table(
                [[c.kind, c.task.stem, c.expect, c.path.name] for c in candidates],
                ["kind", "task", "expect", "file"],
            )
        )
        return

    cache = args.build_cache or str(work / "build-cache")
    opts = EvalOptions(
        device=args.device,
        db="",
        time_budget_s=args.time_budget,
        seeds_per_case=1,
        timeout_s=args.timeout,
        build_cache=cache,
        build_workers=args.build_workers,
        correctness_only=False,
        per_device=args.per_device,
    )
    devices = resolve_devices(args.device)
    print(f"{args.per_device} evaluation(s) in flight per device on {', '.join(devices)}", flush=True)
    gpus = [int(d.split(":")[1]) for d in devices if d.startswith("cuda")]
    pool = LocalPool()
    doc: dict = {"devices": devices, "per_device": args.per_device, "passes": []}
    try:
        t0 = time.perf_counter()
        warm = candidates[0]
        next(evaluate_many([(warm.task, warm.path)], opts, pool=pool))
        doc["warmup_s"] = time.perf_counter() - t0
        doc["pch_s"] = 0.0
        if not cpu:
            t0 = time.perf_counter()
            pool.builder_pool(devices[0], opts).warm_pch()
            doc["pch_s"] = time.perf_counter() - t0
        print(
            f"warm-up {doc['warmup_s']:.1f} s, precompiled headers {doc['pch_s']:.1f} s (once; not in the figures)",
            flush=True,
        )
        if args.warm_builds and not cpu:
            t0 = time.perf_counter()
            doc["warm_builds"] = fill_build_cache(candidates, pool.builder_pool(devices[0], opts))
            doc["warm_builds_s"] = time.perf_counter() - t0
            print(
                f"build cache filled: {doc['warm_builds']} builds in {doc['warm_builds_s']:.1f} s (not in the figures)",
                flush=True,
            )
        for k in range(args.passes):
            # Pass 1 builds every candidate cold (unless --warm-builds filled the cache); later
            # passes find the same sources in the cache.
            name = "cold builds" if k == 0 and not args.warm_builds else "warm caches"
            print(f"== pass {k + 1}: {name}", flush=True)
            lent_before = sum(pool.gate(d).lent_count for d in devices)
            verdicts, wall_s, idle, note = run_pass(candidates, opts, pool, gpus, args.max_seconds)
            # Reported as soon as the pass ends: a later pass cut short by a time limit loses only itself.
            print(f"\n== {name}")
            doc["passes"].append(report(name, candidates, kinds, verdicts, wall_s, idle, note, len(gpus)))
            lent = sum(pool.gate(d).lent_count for d in devices) - lent_before
            doc["passes"][-1]["summary"]["lent"] = lent
            print(
                f"workers stopped for another evaluation's timing (a reply awaited >= 2 s, the GPU then quiet): {lent}"
            )
            write_json("throughput.json", doc)
    finally:
        pool.close()
        shutil.rmtree(work, ignore_errors=True)


def fill_build_cache(candidates, builders) -> int:
    """Build every candidate that has a build step straight through the builder pool (so the
    evaluations find cache entries, not builds already under way); returns how many."""
    futures = []
    for c in candidates:
        sol = read_solution(str(c.path))
        if needs_build(sol.triage.backend) and not sol.triage.syntax_error:
            futures.append(builders.submit(c.path))
    for f in futures:
        f.result()  # a candidate's failed build is a result too, never raised
    return len(futures)


def run_pass(candidates, opts, pool, gpus: list[int], max_seconds: float):
    """Every candidate through one evaluate_many; (verdicts, wall s, GPU idle fraction, its note)."""
    sampler = IdleSampler(gpus) if gpus else None
    verdicts = []
    t0 = last = time.perf_counter()
    with sampler or _Nothing():
        for v in evaluate_many([(c.task, c.path) for c in candidates], opts, pool=pool):
            verdicts.append(v)
            codes = ",".join(v.codes) or "-"
            b = v.build
            how = "" if b is None else (" build cached" if b.cached else f" build {b.build_s:.1f}s")
            print(
                f"[{len(verdicts)}/{len(candidates)}] {v.verdict.value:4s} {codes:18s} {v.elapsed_s:6.1f}s{how}  {v.solution.path}",
                flush=True,
            )
            print(f"    {phase_parts(v)}", flush=True)
            last = time.perf_counter()  # the figures count up to the last verdict received
            if max_seconds and last - t0 > max_seconds:
                break  # unfinished builds and candidates are dropped
    wall_s = last - t0
    if len(verdicts) < len(candidates):
        print(f"stopped after {wall_s:.0f} s (--max-seconds): {len(verdicts)} of {len(candidates)} evaluated")
    idle = sampler.idle_fraction() if sampler else None
    note = sampler.note if sampler and sampler.note else ("" if gpus else "not measured (no GPU)")
    return verdicts, wall_s, idle, note


def report(name, candidates, kinds, verdicts, wall_s, idle, note, n_gpus: int) -> dict:
    """Print one pass's figures; return them with every evaluation, for the JSON."""
    expected = {str(c.path): c for c in candidates}
    rows = []
    for kind in kinds:
        vs = [v for v in verdicts if expected[v.solution.path].kind == kind]
        if not vs:
            continue
        ok = sum(_as_expected(v, expected[v.solution.path].expect) for v in vs)
        rows.append(
            [kind, str(len(vs)), f"{ok}/{len(vs)}", f"{statistics.median(v.elapsed_s for v in vs):.1f}"]
        )
    print(table(rows, ["kind", "n", "as expected", "median eval s"]))
    builds = [v.build for v in verdicts if v.build is not None]
    cold = [b.build_s for b in builds if not b.cached]
    per_gpu_hour = len(verdicts) / (wall_s / 3600.0) / max(1, n_gpus) if wall_s > 0 else None
    idle_text = f"{idle:.1%}" if idle is not None else note
    summary = {
        "pass": name,
        "candidates": len(verdicts),
        "planned": len(candidates),
        "tasks": len({v.task.path for v in verdicts}),
        "wall_s": wall_s,
        "evaluations_per_gpu_hour": per_gpu_hour,
        "median_evaluation_s": statistics.median(v.elapsed_s for v in verdicts) if verdicts else None,
        "median_cold_build_s": statistics.median(cold) if cold else None,
        "cold_builds": len(cold),
        "cache_hits": sum(b.cached for b in builds),
        "build_wait_s": sum(b.wait_s for b in builds),
        "gpu_idle_fraction": idle,
        "gpu_idle_note": "" if idle is not None else idle_text,
    }
    by_phase: dict[str, float] = {}
    for v in verdicts:
        for phase, seconds in phase_durations(v).items():
            by_phase[phase] = by_phase.get(phase, 0.0) + seconds
    summary["seconds_by_phase"] = by_phase
    unit = "GPU-hour" if n_gpus else "device-hour (CPU, interpreted)"
    print(
        f"{len(verdicts)} evaluations in {wall_s:.0f} s on {max(1, n_gpus)} device(s): "
        f"{_fmt(per_gpu_hour, 0)} evaluations per {unit}"
    )
    print(
        f"median evaluation {_fmt(summary['median_evaluation_s'])} s; median cold build {_fmt(summary['median_cold_build_s'])} s "
        f"({len(cold)} cold, {summary['cache_hits']} cache hits); evaluations waited {summary['build_wait_s']:.1f} s for builds"
    )
    print(f"GPU idle fraction: {idle_text}")
    print("seconds by phase, all evaluations: " + ", ".join(f"{k} {x:.1f}" for k, x in by_phase.items()))
    evaluations = [
        {
            "solution": v.solution.path,
            "kind": expected[v.solution.path].kind,
            "verdict": v.verdict.value,
            "codes": v.codes,
            "elapsed_s": v.elapsed_s,
            "build": None if v.build is None else v.build.__dict__,
        }
        for v in verdicts
    ]
    return {"summary": summary, "evaluations": evaluations}


def _as_expected(v, expect: str) -> bool:
    return v.passed if expect == "pass" else expect in v.codes


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
