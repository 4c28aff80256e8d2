"""The resolution of the parent's bounds on reported times: a 5 us and a 5 ms kernel, honest and forged.

For each kernel the candidate is evaluated honestly, then with its worker's batch replies forged to
claim a fraction of each measured window (1/2, 1/5, 1/10, 1/100, 1/1000), as a solution that writes
its own reply or rebinds the harness's clock would. For each run the table shows the verdict's
codes, which check fired (the calibrated gap, or the differential batch), whether the speedups
are claimed (or withheld, or claimed where the call was too short to bound), the reported mean, the
parent's back-to-back figure and the per-call gaps of candidate and baseline. The smallest forgery
each check catches is the bound's resolution at that kernel size (docs/timing.md).

    python benchmarks/timing_bounds.py              # the GPU when there is one, else the CPU
    python benchmarks/timing_bounds.py --device cpu

On a GPU the kernels are an elementwise op over about 3 M floats (about 5 us on an H200) and the
same op after a 5 ms spin of the device; on the CPU the same op over 64 K floats and after 5 ms of
host sleep. Writes timing_bounds.json under $OUT (default /tmp/kernelproof-bench).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import table, write_json

from kernelproof.api import evaluate
from kernelproof.host.process import WorkerProcess
from kernelproof.measure import parent_clock
from kernelproof.options import EvalOptions

TASK = """
import torch
import torch.nn as nn
n = {n}
class Model(nn.Module):
    def forward(self, x):
        return x * 2.0
def get_inputs():
    return [torch.randn(n)]
def get_init_inputs():
    return []
KERNELPROOF = {{"policy": "library-ok"}}
"""
FAST = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2.0
"""
SLOW_GPU = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        torch.cuda._sleep(int(5e-3 * torch.cuda.get_device_properties(x.device).clock_rate * 1e3))
        return x * 2.0
"""
SLOW_CPU = """
import time
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(5e-3)
        return x * 2.0
"""
FORGERIES = (1.0, 2.0, 5.0, 10.0, 100.0, 1000.0)


def forge(divide_by: float) -> None:
    """From now on the candidate's batch replies claim 1/divide_by of each window."""
    real = getattr(WorkerProcess, "_real_request", WorkerProcess.request)
    WorkerProcess._real_request = real

    def forged(self, header, tensors=None, timeout_s=600.0, expect=None):
        reply, out = real(self, header, tensors, timeout_s, expect)
        if (
            divide_by != 1.0
            and self.spec.role == "candidate"
            and header.get("op") == "end"
            and reply.get("ok")
        ):
            for key in ("span_ms", "event_ms", "host_ms"):
                reply[key] = [float(x) / divide_by for x in reply[key]]
        return reply, out

    WorkerProcess.request = forged


def speed_claim(verdict) -> str:
    """Whether the verdict claims the speedups: "claimed", "claimed, unbounded" (the call is shorter
    than the harness's work in a batch: the parent's clock could not bound it), or why withheld. A
    verdict that does not pass claims no speed, whatever its claims record says: "none (fails)"."""
    if not verdict.passed:
        return "none (fails)"
    claims = verdict.claims
    if claims is None:
        return "-"
    if not claims.speed:
        return f"withheld ({claims.speed_withheld})"
    return "claimed, unbounded" if any(f.startswith("timing_unbounded") for f in verdict.flags) else "claimed"


def which_check(verdict) -> str:
    for r in verdict.reasons:
        if r.code.value == "timing_tamper":
            return "differential" if "back to back" in r.message else "gap"
    return "-"


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--time-budget", type=float, default=2.0)
    ns = ap.parse_args()
    cuda = ns.device.startswith("cuda")
    parent_clock.BUSY_IS_ERROR = False  # measure anyway; the flags say whether the machine was busy
    kernels = {"5us": (3 * 2**20 if cuda else 2**16, FAST), "5ms": (2**16, SLOW_GPU if cuda else SLOW_CPU)}
    options = EvalOptions(
        device=ns.device,
        db="",
        seed=7,
        seeds_per_case=1,
        correctness_only=False,
        time_budget_s=ns.time_budget,
    )
    rows, doc = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (n, source) in kernels.items():
            task, sol = Path(tmp) / f"task_{name}.py", Path(tmp) / f"sol_{name}.py"
            task.write_text(TASK.format(n=n))
            sol.write_text(source)
            for factor in FORGERIES:
                forge(factor)
                v = evaluate(str(task), str(sol), options)
                shape = v.timing.shapes[0] if v.timing and v.timing.shapes else None
                over = shape.overhead_ms if shape else {}
                diff = next((f for f in v.flags if f.startswith("parent's back-to-back")), "")
                rows.append(
                    [
                        name,
                        f"1/{factor:g}",
                        ",".join(v.codes) or "pass",
                        which_check(v),
                        speed_claim(v),
                        f"{shape.candidate.mean_ms:.4g}" if shape else "-",
                        f"{over.get('candidate', {}).get('gap', float('nan')):.4g}",
                        f"{over.get('eager', {}).get('gap', float('nan')):.4g}",
                    ]
                )
                doc.append(
                    {"kernel": name, "claims": 1 / factor, "verdict": v.to_json(), "differential_note": diff}
                )
                print(rows[-1], diff, flush=True)
                # after each run: a run cut short keeps what it measured
                write_json("timing_bounds.json", doc)
    header = [
        "kernel",
        "claims",
        "codes",
        "caught by",
        "speed",
        "reported mean ms",
        "gap ms (cand)",
        "gap ms (eager)",
    ]
    print(table(rows, header))
    print(f"written: {write_json('timing_bounds.json', doc)}")


if __name__ == "__main__":
    main()
