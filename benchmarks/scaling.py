"""Multi-GPU scaling: the same suite slice, same seed, on one GPU and then on every visible GPU.

Each run gets a fresh worker pool (nothing pre-spawned by the other run). Prints the wall time of
each run, the ratio, and per task both verdicts and both speedups with their CIs, so "the same
verdicts" and "the same figures within their intervals" are read off the table, not assumed.
Needs >= 2 GPUs for the comparison; writes scaling.json.

    python benchmarks/scaling.py --only level2 --only level3
"""

from __future__ import annotations

import argparse
import time

import torch
from _common import suite_pairs, table, write_json

from kernelproof.api import evaluate_many
from kernelproof.executors.local import LocalPool
from kernelproof.options import EvalOptions


def run(pairs, device: str, options: EvalOptions) -> tuple[float, dict[str, object]]:
    pool = LocalPool()
    t0 = time.perf_counter()
    try:
        verdicts = {v.task.path: v for v in evaluate_many(pairs, options.replace(device=device), pool=pool)}
    finally:
        pool.close()
    return time.perf_counter() - t0, verdicts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=[], help="keep tasks whose path contains this")
    ap.add_argument("--time-budget", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    gpus = torch.cuda.device_count()
    if gpus < 2:
        raise SystemExit(f"scaling needs at least 2 visible GPUs, found {gpus}")
    pairs = [(t, s) for t, s in suite_pairs() if not args.only or any(p in str(t) for p in args.only)]
    options = EvalOptions(
        db="", seed=args.seed, seeds_per_case=1, time_budget_s=args.time_budget, baselines=("eager",)
    )
    one_s, one = run(pairs, "cuda:0", options)
    print(f"one GPU: {len(one)} evaluations in {one_s:.1f} s", flush=True)
    all_s, every = run(pairs, "cuda", options)
    print(f"{gpus} GPUs: {len(every)} evaluations in {all_s:.1f} s", flush=True)

    def fig(v) -> str:
        s = v.speedup.get("eager") if v.speedup else None
        if s is None or s.median is None:
            return "-"
        return f"{s.median:.3f} [{s.ci95[0]:.3f}, {s.ci95[1]:.3f}]" if s.ci95 else f"{s.median:.3f}"

    rows, docs, same = [], [], 0
    for path, a in one.items():
        b = every.get(path)
        agree = b is not None and a.verdict == b.verdict and a.codes == b.codes
        same += agree
        rows.append(
            [
                path.split("suite/")[-1],
                a.verdict.value,
                b.verdict.value if b else "-",
                fig(a),
                fig(b) if b else "-",
                b.settings.get("device", "") if b else "-",
                "yes" if agree else "NO",
            ]
        )
        docs.append({"task": path, "one": a.to_json(), "all": b.to_json() if b else None})
    print(
        table(
            rows,
            ["task", "1 GPU", f"{gpus} GPUs", "speedup, 1 GPU", f"speedup, {gpus} GPUs", "device", "same"],
        )
    )
    print(
        f"scaling: {one_s:.1f} s on one GPU, {all_s:.1f} s on {gpus}: {one_s / all_s:.2f}x; "
        f"same verdict and codes on {same}/{len(one)} tasks"
    )
    write_json("scaling.json", {"gpus": gpus, "one_gpu_s": one_s, "all_gpus_s": all_s, "tasks": docs})


if __name__ == "__main__":
    main()
