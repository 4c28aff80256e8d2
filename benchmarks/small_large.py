"""Small and large: a 4096-element elementwise op and a >= 1 GB copy, against the physical floor
and against triton.testing.do_bench. Explains the gaps: do_bench includes launch latency hidden by
its 256 MB flush; kernelproof reports the device-side span of the call's kernels.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _common import table, write_json

from kernelproof.api import evaluate
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
KERNELPROOF = {{"flops": "n", "policy": "library-ok"}}
"""
SOL = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2.0
"""


def main() -> None:
    import torch
    import triton.testing

    tmp = Path(tempfile.mkdtemp(prefix="kp-sl-"))
    rows, docs = [], []
    for label, n in (("4096 elements", 4096), ("1 GiB in + 1 GiB out", 2**28)):
        t = tmp / f"task_{n}.py"
        t.write_text(TASK.format(n=n))
        s = tmp / f"sol_{n}.py"
        s.write_text(SOL)
        v = evaluate(
            t,
            s,
            EvalOptions(
                device="cuda",
                db="",
                seed=3,
                seeds_per_case=1,
                distributions=("normal", "spiky"),  # two 1 GiB cases are enough to check a copy
                time_budget_s=5,
            ),
        )
        kp = v.timing.shapes[0].candidate.median_ms
        base = v.timing.shapes[0].baselines["eager"].median_ms
        x = torch.randn(n, device="cuda")
        db = triton.testing.do_bench(lambda x=x: x * 2.0, return_mode="median")
        floor = v.roofline.floor_ms if v.roofline else None
        bw = 2 * 4 * n / (kp * 1e-3) / 1e12
        rows.append(
            [
                label,
                f"{kp * 1e3:.2f}",
                f"{base * 1e3:.2f}",
                f"{db * 1e3:.2f}",
                f"{(floor or 0) * 1e3:.2f}",
                f"{bw:.2f}",
            ]
        )
        docs.append(
            {
                "case": label,
                "kernelproof_us": kp * 1e3,
                "eager_baseline_us": base * 1e3,
                "do_bench_us": db * 1e3,
                "floor_us": (floor or 0) * 1e3,
                "achieved_TBps": bw,
            }
        )
        print("row:", "  ".join(rows[-1]), flush=True)  # a cut run keeps what it measured
    print(table(rows, ["case", "kernelproof us", "eager worker us", "do_bench us", "floor us", "TB/s"]))
    write_json("small_large.json", docs)


if __name__ == "__main__":
    main()
