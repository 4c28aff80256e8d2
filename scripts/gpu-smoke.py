"""Smoke run of the pipeline on a GPU: one task, Triton solution, eager + compile baselines."""

import json
import sys
import time

from kernelproof.api import evaluate
from kernelproof.console import print_verdict
from kernelproof.options import EvalOptions

task, sol = sys.argv[1], sys.argv[2]
baselines = tuple(sys.argv[3].split(",")) if len(sys.argv) > 3 else ("eager",)
t0 = time.time()
v = evaluate(task, sol, EvalOptions(device="cuda", db="", seed=7, baselines=baselines, time_budget_s=8))
print_verdict(v)
print("wall", round(time.time() - t0, 1), "s")
print(json.dumps({"codes": v.codes, "flags": list(v.flags)}))
