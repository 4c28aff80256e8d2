"""The optimize loop with the real evaluator on CPU (Triton through its interpreter)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_loopback import Reply

from kernelproof.agent import AgentOptions, Limits, parse_model
from kernelproof.api import optimize
from kernelproof.options import EvalOptions

DATA = Path(__file__).parent / "data"


def fenced(source: str) -> str:
    return f"A Triton kernel for y = 2x + 1.\n\n```python\n{source}```\n"


@pytest.mark.slow
def test_optimize_with_the_real_evaluator_feeds_a_real_rejection_back_and_keeps_the_verified_kernel(
    serve, tmp_path
):
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
