"""A/A fidelity: the reference itself as the candidate, timed against the eager baseline.

Both sides run the same code in separate workers, so every speedup should be 1.00 and about 95 %
of the confidence intervals should contain 1.00. Target (for kernels >= 20 us): every median
within 1 % of 1.00, at most one of ten CIs excluding 1.00. Prints a table; writes aa.json.

``--per-device 2`` evaluates two tasks at once per GPU (``EvalOptions.per_device``): each timing
then runs while another evaluation is between its stretches on the same GPU, which is what the
device gate must keep out of the measurement; the same targets apply.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import reference_as_solution, suite_pairs, table, write_json

from kernelproof.api import evaluate_many
from kernelproof.options import EvalOptions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--time-budget", type=float, default=6.0)
    ap.add_argument("--per-device", type=int, default=1, help="evaluations in flight per GPU")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kp-aa-"))
    rows, docs = [], []
    pairs = [(task, reference_as_solution(task, tmp)) for task, _ in suite_pairs()[: args.tasks]]
    opts = EvalOptions(
        device=args.device,
        db="",
        seed=1,
        seeds_per_case=1,
        time_budget_s=args.time_budget,
        per_device=args.per_device,
    )
    print(f"{args.per_device} evaluation(s) in flight per device", flush=True)
    for v in evaluate_many(pairs, opts):
        task = Path(v.task.path)
        s = v.speedup.get("eager")
        sh = v.timing.shapes[0] if v.timing and v.timing.shapes else None
        if s is None or s.median is None or sh is None:
            rows.append([task.name, "-", "-", "-", ",".join(v.codes)])
            continue
        inside = s.ci95[0] <= 1.0 <= s.ci95[1]
        rows.append(
            [
                task.name,
                f"{sh.candidate.median_ms:.4f}",
                f"{s.median:.4f}",
                f"[{s.ci95[0]:.4f}, {s.ci95[1]:.4f}]",
                "yes" if inside else "NO",
            ]
        )
        print("row:", "  ".join(rows[-1]), flush=True)  # a cut run keeps what it measured
        docs.append(
            {
                "task": task.name,
                "median_ms": sh.candidate.median_ms,
                "speedup": s.median,
                "ci95": s.ci95,
                "ci_contains_1": inside,
                "rounds": sh.rounds,
            }
        )
    print(table(rows, ["task", "cand ms", "A/A speedup", "95% CI", "CI has 1"]))
    n = len(docs)
    within = sum(abs(d["speedup"] - 1) <= 0.01 for d in docs)
    excl = sum(not d["ci_contains_1"] for d in docs)
    print(f"A/A: {within}/{n} medians within 1% of 1.00; {excl}/{n} CIs exclude 1.00")
    write_json("aa.json", docs)


if __name__ == "__main__":
    main()
