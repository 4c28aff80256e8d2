"""Cost of an evaluation: wall time of a default `evaluate` of a level1 task (Triton: no build).

The first evaluation pays for cold workers and cold baselines; the next ones find a started
candidate worker and a started baseline worker waiting. Each row also gives the verdict's own
phase times, so the cost is read by part. Target (issue): <= 20 s with warm workers.

    python benchmarks/cost.py                 # on the GPU machine
    python benchmarks/cost.py --device cpu    # the same protocol on the CPU (interpreted Triton)
"""

from __future__ import annotations

import argparse
import time

from _common import ROOT, table, write_json

from kernelproof.api import evaluate
from kernelproof.options import EvalOptions

LABELS = ("first (cold workers)", "second (warm workers)", "third (warm workers)")
PHASES = (  # the verdict's phase marks, in order, and what the time up to each one was spent on
    ("setup_s", "setup"),
    ("worker_ready_s", "worker"),
    ("correctness_done_s", "correctness"),
    ("timing_done_s", "timing"),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--task", default="level1/09_gelu.py", help="a suite task with an example solution")
    args = ap.parse_args()
    task = ROOT / "suite" / args.task
    sol = ROOT / "examples" / args.task
    options = EvalOptions(device=args.device, db="")  # the defaults, as `kernelproof eval` uses them
    rows, docs = [], []
    for label in LABELS:
        t0 = time.perf_counter()
        v = evaluate(task, sol, options)
        wall = time.perf_counter() - t0
        phases = dict(v.environment.get("phases", {}))
        parts, last = [], 0.0
        for mark, name in PHASES:  # phases are marks since the start: turn them into durations
            if mark in phases:
                parts.append(f"{name} {phases[mark] - last:.1f}")
                last = phases[mark]
        rows.append([label, f"{wall:.1f}", v.verdict.value, str(v.correctness.cases_run), ", ".join(parts)])
        docs.append({"run": label, "wall_s": wall, "verdict": v.verdict.value, "phases": phases})
        print("row:", "  ".join(rows[-1]), flush=True)
    print(table(rows, ["evaluation", "wall s", "verdict", "cases", "by phase (s)"]))
    write_json("cost.json", docs)


if __name__ == "__main__":
    main()
