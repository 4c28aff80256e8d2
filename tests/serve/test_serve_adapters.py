"""The drop-in shapes over a real socket: KernelGYM's endpoints and fields, OpenRLHF's remote
reward, TRL's reward-function call with its documented keyword arguments, verl's compute_score."""

from __future__ import annotations

import asyncio
import time

import pytest
from serving import FAST, GOOD, TASKS, WRONG, start

from kernelproof import rl

RESPONSE_FIELDS = {
    "task_id",
    "status",
    "compiled",
    "correctness",
    "decoy_kernel",
    "reference_runtime",
    "kernel_runtime",
    "speedup",
    "metadata",
    "error_code",
}


def answer(source: str) -> str:
    """A model's answer holding one solution file, as a policy writes it."""
    return f"I fuse the three operations into one kernel.\n\n```python\n{source}```\n"


def kernelgym_result(c, task_id: str, timeout_s: float = 300.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = c.get(f"/status/{task_id}").json()["status"]
        if status in ("completed", "failed", "cancelled"):
            return c.get(f"/results/{task_id}").json()
        assert status in ("pending", "processing"), status
        time.sleep(0.3)
    raise AssertionError(f"{task_id} not done")


def test_kernelgym_request_and_response_shapes(server):
    reference = (TASKS / "scale_relu.py").read_text()
    with server.client() as c:
        ok = c.post(
            "/evaluate",
            json={
                "task_id": "rollout-7-sample-3",
                "reference_code": reference,  # the bytes of a served task: that task is judged
                "kernel_code": GOOD,
                "entry_point": "ModelNew",
                "backend": "triton",
                "num_correct_trials": 5,
                "num_perf_trials": 100,
                "timeout": 300,
                "reference_backend": "pytorch",
            },
        )
        batch = c.post(
            "/evaluate/batch",
            json={
                "tasks": [
                    {"task_id": "scale_relu", "kernel_code": WRONG},
                    {"task_id": "b-2", "kernel_code": GOOD, "reference_code": reference},
                ]
            },
        )
        assert ok.status_code == 200 and ok.json() == {"task_id": "rollout-7-sample-3", "status": "pending"}
        assert batch.status_code == 200 and batch.json()["task_ids"] == ["scale_relu", "b-2"]
        passed = kernelgym_result(c, "rollout-7-sample-3")
        failed = kernelgym_result(c, "scale_relu")
        unknown = c.get("/status/never-submitted")
    assert set(passed) == RESPONSE_FIELDS and set(failed) == RESPONSE_FIELDS
    assert passed["status"] == "completed" and passed["compiled"] is True and passed["correctness"] is True
    assert passed["decoy_kernel"] is False and passed["error_code"] is None
    assert passed["speedup"] == 0.0  # correctness only: no speed claim, never a point estimate
    assert passed["metadata"]["reward"] == 0.5 and passed["metadata"]["judged"] is True
    assert passed["metadata"]["asked_not_obeyed"]["num_perf_trials"] == 100
    assert failed["correctness"] is False and failed["error_code"] == "mismatch"
    assert failed["metadata"]["reward"] == 0.0
    assert unknown.status_code == 404


def test_kernelgym_refuses_a_reference_that_is_not_served_and_a_foreign_entry_point(server):
    with server.client() as c:
        foreign = c.post(
            "/evaluate",
            json={"task_id": "t1", "kernel_code": GOOD, "reference_code": "import torch\n# mine\n"},
        )
        entry = c.post("/evaluate", json={"task_id": "scale_relu", "kernel_code": GOOD, "entry_point": "Net"})
        unknown = c.post("/evaluate", json={"task_id": "not-served", "kernel_code": GOOD})
    assert foreign.status_code == 403 and "--trust-client-tasks" in foreign.json()["error"]
    assert entry.status_code == 422 and "ModelNew" in entry.json()["error"]
    assert unknown.status_code == 404


def test_openrlhf_remote_reward_shapes(server):
    prompts = ["Write ModelNew for scale_relu.\n"] * 3
    responses = [answer(GOOD), answer(WRONG), "I cannot do this."]
    with server.client() as c:
        r = c.post(
            "/openrlhf/reward",
            json={
                "query": [p + a for p, a in zip(prompts, responses)],
                "prompts": prompts,
                "labels": ["scale_relu"] * 3,
            },
        )
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["rewards"] == [0.5, 0.0, 0.0] and doc["scores"] == doc["rewards"]
    assert doc["extra_logs"]["judged"] == [1.0, 1.0, 1.0] and doc["extra_logs"]["pass"] == [1.0, 0.0, 0.0]
    assert doc["codes"][1] == ["mismatch"] and doc["codes"][2] == ["no_solution"]


def test_trl_reward_function_with_its_documented_keyword_arguments(server):
    reward = rl.trl_reward(server.url)
    prompts = [[{"role": "user", "content": "Write ModelNew for scale_relu."}]] * 3
    completions = [
        [{"role": "assistant", "content": answer(GOOD)}],  # conversational
        [{"role": "assistant", "content": answer(WRONG)}],
        [{"role": "assistant", "content": "no code at all"}],
    ]
    got = reward(
        prompts=prompts,
        completions=completions,
        completion_ids=[[1, 2, 3]] * 3,
        task=["scale_relu"] * 3,
        trainer_state=None,
    )
    assert got == [0.5, 0.0, 0.0]
    async_reward = rl.trl_reward_async(server.url)
    got_async = asyncio.run(
        async_reward(
            prompts=["p"] * 2,
            completions=[answer(GOOD), answer(WRONG)],
            completion_ids=[[1]] * 2,
            task=["scale_relu"] * 2,
        )
    )
    assert got_async == [0.5, 0.0]


def test_trl_reward_needs_the_task_column(server):
    with pytest.raises(ValueError, match="task_column"):
        rl.trl_reward(server.url)(prompts=["p"], completions=[answer(GOOD)], completion_ids=[[1]])


def test_verl_compute_score(server):
    extra = {"kernelproof_url": server.url}
    good = rl.compute_score("kernelbench", answer(GOOD), "scale_relu", extra)
    wrong = rl.compute_score("kernelbench", answer(WRONG), "scale_relu", extra)
    empty = rl.compute_score("kernelbench", "nothing", "scale_relu", extra)
    by_kwarg = rl.compute_score("kernelbench", answer(GOOD), "scale_relu", None, url=server.url)
    assert good == {"score": 0.5, "judged": True, "pass": True, "code": ""}
    assert wrong["score"] == 0.0 and wrong["code"] == "mismatch"
    assert empty["score"] == 0.0 and empty["code"] == "no_solution"
    assert by_kwarg == good


def test_a_client_reference_is_judged_when_the_operator_trusts_client_tasks(tmp_path, servers):
    s = start(tmp_path, *FAST, "--trust-client-tasks")
    servers.append(s)
    reference = (TASKS / "scale_relu.py").read_text() + "\n# the client's own copy\n"
    with s.client() as c:
        own = c.post("/v1/evaluate", json={"task": "my-task", "solution": GOOD, "reference": reference})
        gym = c.post(
            "/evaluate", json={"task_id": "mine-1", "kernel_code": GOOD, "reference_code": reference}
        )
        result = kernelgym_result(c, "mine-1")
    assert own.status_code == 200 and own.json()["verdict"]["verdict"] == "pass"
    assert gym.status_code == 200 and result["correctness"] is True
