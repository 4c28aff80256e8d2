"""The optimize loop with the real evaluator on CPU (Triton through its interpreter)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_loopback import Reply

from kernelproof.agent import AgentOptions, Limits, parse_model
from kernelproof.agent.agent_options import evaluation
from kernelproof.api import optimize
from kernelproof.options import EvalOptions

DATA = Path(__file__).parent / "data"


def openai_sdk() -> None:
    """The loopback model speaks through the `openai` SDK (the `agent` extra): a machine without it
    (the GPU image) skips, as it would any optional backend."""
    pytest.importorskip(
        "openai", reason="the vllm: backend needs the `openai` SDK (pip install -e '.[agent]')"
    )


def fenced(source: str) -> str:
    return f"A Triton kernel for y = 2x + 1.\n\n```python\n{source}```\n"


@pytest.mark.slow
def test_optimize_with_the_real_evaluator_feeds_a_real_rejection_back_and_keeps_the_verified_kernel(
    serve, tmp_path
):
    openai_sdk()
    correct = (DATA / "scale_add_triton.py").read_text()
    wrong = correct.replace("x * 2.0 + 1.0", "x * 2.0")  # forgets the + 1
    answers = iter([fenced(wrong), fenced(correct)])
    server = serve(lambda req: Reply(next(answers, fenced(correct))))
    opts = AgentOptions(
        limits=Limits(max_candidates=2),
        eval=EvalOptions(device="cpu", db=""),
        out_dir=str(tmp_path / "run"),
        db=str(tmp_path / "kp.db"),
        plot=False,
    )
    model = parse_model("vllm:loopback", base_url=server.openai_url, timeout_s=10)
    try:
        res = optimize(DATA / "scale_add.py", model, opts)
    except NotImplementedError:
        pytest.skip("kernelproof.api.evaluate_many is not implemented yet")
    first, second = res.candidates
    assert not first.passed and "mismatch" in first.verdict.codes
    assert "mismatch" in server.requests[1].last_user
    assert second.passed and res.best.id == second.id
    assert (tmp_path / "run" / "best.py").read_text() == correct
    assert res.spend.evaluated == 2 and res.spend.gpu_seconds > 0


@pytest.mark.gpu
def test_a_replay_log_carried_to_a_gpu_machine_runs_end_to_end(tmp_path):
    """The shipped log (recorded against a loopback server, evaluated on CPU) replayed on CUDA."""
    opts = AgentOptions(
        limits=Limits(max_candidates=2),
        eval=EvalOptions(device="cuda", db=""),
        out_dir=str(tmp_path / "run"),
        db=str(tmp_path / "kp.db"),
    )
    res = optimize(DATA / "scale_add.py", "", opts, replay=DATA / "scale_add.replay.jsonl")
    assert [c.id for c in res.candidates] == ["t000s00", "t001s00"]
    assert "mismatch" in res.candidates[0].verdict.codes
    assert res.best.id == "t001s00" and res.best_verdict.speedup["best"].median > 0
    assert res.spend.live_calls == 0 and (tmp_path / "run" / "summary.md").exists()


@pytest.mark.slow
def test_under_optimizes_default_a_hard_coded_row_length_is_never_the_best(serve, tmp_path):
    openai_sdk()
    """A KernelBench file has one shape; a kernel written for its row length passes it (with a flag
    under eval's default), but optimize probes other sizes as part of the contract."""
    solutions = Path(__file__).resolve().parents[1] / "data" / "solutions"
    hard_coded = (solutions / "row_mean_hardcoded.py").read_text()
    general = (solutions / "row_mean_general.py").read_text()
    answers = iter([fenced(hard_coded), fenced(general)])
    server = serve(lambda req: Reply(next(answers, fenced(general))))
    opts = AgentOptions(
        limits=Limits(max_candidates=2),
        eval=evaluation(device="cpu", db="", time_budget_s=0.3, min_rounds=2, max_rounds=2),
        out_dir=str(tmp_path / "run"),
        db=str(tmp_path / "kp.db"),
        plot=False,
    )
    model = parse_model("vllm:loopback", base_url=server.openai_url, timeout_s=10)
    task = Path(__file__).resolve().parents[1] / "data" / "tasks" / "kb_row_mean.py"
    res = optimize(task, model, opts)
    first, second = res.candidates
    assert "shape_specialized" in first.verdict.codes, first.verdict.codes
    assert "auto_odd (batch_size=7, cols=63)" in server.requests[0].last_user  # the prompt said so
    assert second.passed and res.best.id == second.id
