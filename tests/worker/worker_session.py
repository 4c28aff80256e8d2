"""A candidate worker with one task variant loaded, driven request by request (tests only)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import torch

from kernelproof.evaluate.worker_requests import load_request
from kernelproof.host.process import SpawnSpec, WorkerProcess
from kernelproof.task import load_task
from kernelproof.verify.case_plan import VariantContext, build_variant, make_inputs

TESTS = Path(__file__).resolve().parents[1]
EXPLOITS = TESTS / "exploits"
DATA = TESTS / "data"


def load_header(ctx: VariantContext, path: str) -> tuple[dict, list[torch.Tensor]]:
    """A ``load`` request for ``ctx``'s variant: the one the parent sends."""
    return load_request(ctx, path)


@contextmanager
def loaded(task: Path, solution: Path, variant: str = "small"):
    """(worker, ctx): a candidate worker with ``solution`` loaded for ``variant`` of ``task``."""
    ctx = build_variant(load_task(task), variant, torch.device("cpu"), "eval", 0)
    make_inputs(ctx, "task", 0)  # the first call learns the input slots, as the parent's setup does
    worker = WorkerProcess(SpawnSpec("candidate", "cpu"))
    try:
        staged = worker.stage_solution(str(solution))
        header, tensors = load_header(ctx, staged)
        reply, _ = worker.request(header, tensors, 120)
        assert reply.get("ok"), reply
        yield worker, ctx
    finally:
        worker.close()
