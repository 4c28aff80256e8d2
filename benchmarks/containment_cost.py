"""What containment costs an evaluation, and whether large outputs still travel on the device.

Evaluates one task and solution (default: the level1 gelu example, 805 MB outputs) with the
candidate's worker contained (its own uid, Landlock, seccomp, mounts: the default) and without
(the parent's containment plan replaced by one that applies nothing: a switch of this benchmark,
never a user option), one after the other, and prints per run: the worker's start (spawn to
hello, no spare worker started ahead), correctness, the whole evaluation, how many outputs came
back through the device handoff (wire/handoff.py), and the layers the worker reported.

    python benchmarks/containment_cost.py --repeats 2
"""

from __future__ import annotations

import argparse
import time

from _common import ROOT, table

from kernelproof.api import evaluate
from kernelproof.executors.local import LocalPool
from kernelproof.options import EvalOptions
from kernelproof.sandbox import plan
from kernelproof.wire.handoff import Inbox


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default=str(ROOT / "suite" / "level1" / "09_gelu.py"))
    ap.add_argument("--solution", default=str(ROOT / "examples" / "level1" / "09_gelu.py"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=2)
    ns = ap.parse_args()
    delivered: list[int] = []
    collect = Inbox.collect

    def counting(self, offered, reply, wire):
        delivered.extend(reply.get("delivered") or [])
        return collect(self, offered, reply, wire)

    Inbox.collect = counting
    planned = plan.plan_for
    rows = []
    for mode in ("contained", "uncontained") * ns.repeats:
        plan.plan_for = (
            planned if mode == "contained" else (lambda role, *a, **k: plan.uncontained(role, "benchmark"))
        )
        pool = LocalPool(prespawn=False)
        delivered.clear()
        t0 = time.monotonic()
        v = evaluate(
            ns.task, ns.solution, EvalOptions(device=ns.device, db="", correctness_only=True), pool=pool
        )
        wall = time.monotonic() - t0
        pool.close()
        ph = v.environment.get("phases", {})
        ready = ph.get("worker_ready_s", 0) - ph.get("build_done_s", ph.get("setup_s", 0))
        layers = v.environment.get("sandbox") or {}
        active = ",".join(n for n, x in layers.items() if x.get("active")) or "none"
        rows.append(
            [
                mode,
                v.verdict.value,
                f"{ready:.2f}",
                f"{ph.get('correctness_done_s', 0) - ph.get('worker_ready_s', 0):.2f}",
                f"{v.elapsed_s:.2f}",
                f"{wall:.2f}",
                str(len(delivered)),
                active,
            ]
        )
        print(" ".join(rows[-1]), flush=True)
    plan.plan_for = planned
    print(
        table(
            rows,
            ["mode", "verdict", "worker start s", "correctness s", "eval s", "wall s", "handoffs", "layers"],
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
