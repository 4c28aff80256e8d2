"""Runs a solution's forward a few times inside NVTX ranges `kp_call` (profiled by agreement.py)."""

from __future__ import annotations

import importlib.util
import sys

import torch

from kernelproof.task import load_task
from kernelproof.verify.case_plan import build_variant, make_inputs, to_device


def main() -> None:
    task_path, sol_path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    task = load_task(task_path)
    dev = torch.device("cuda")
    ctx = build_variant(task, "default", dev, task.meta.mode, 1)
    spec = importlib.util.spec_from_file_location("kp_sol", sol_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.ModelNew(*ctx.init_args).to(dev)
    for p in list(model.parameters()) + list(model.buffers()):
        if p.is_floating_point():
            p.data = p.data.to(ctx.dtype)
    model.load_state_dict(ctx.reference.state_dict(), strict=False)
    model.train(ctx.mode == "train")
    args = to_device(make_inputs(ctx, "normal", 3), dev)
    with torch.no_grad():
        for _ in range(3):
            model(*args)  # warm-up: JIT and autotuning outside the ranges
        torch.cuda.synchronize()
        for _ in range(calls):
            torch.cuda.nvtx.range_push("kp_call")
            model(*args)
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()
