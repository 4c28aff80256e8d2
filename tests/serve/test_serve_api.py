"""The service's own API over a real socket: verdicts, rewards and feedback; jobs, batches and
streams; the store answering a repeated request; 20 clients at once on 2 slots; the refusals."""

from __future__ import annotations

import json
import threading

import httpx
from serving import GOOD, WRONG, wait_for


def test_a_correct_solution_passes_with_a_reward_and_feedback(server):
    with server.client() as c:
        r = c.post("/v1/evaluate", json={"task": "scale_relu", "solution": GOOD})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["state"] == "done" and doc["verdict"]["verdict"] == "pass"
    assert doc["judged"] is True and doc["reward"] == 0.5  # the correct term alone: not timed, CPU
    assert doc["reward_terms"]["speed"] == 0.0 and "no speed term" in doc["reward_terms"]["why"]
    assert doc["feedback"].startswith("PASS")


def test_a_wrong_solution_fails_with_reward_zero_and_its_reason_in_the_feedback(server):
    with server.client() as c:
        doc = c.post("/v1/evaluate", json={"task": "scale_relu.py", "solution": WRONG}).json()
    assert doc["verdict"]["verdict"] == "fail" and doc["reward"] == 0.0 and doc["judged"] is True
    assert "mismatch" in [r["code"] for r in doc["verdict"]["reasons"]]
    assert "reason code mismatch" in doc["feedback"]


def test_a_repeated_request_is_answered_from_the_store(server):
    with server.client() as c:
        first = c.post("/v1/evaluate", json={"task": "scale_relu", "solution": GOOD}).json()
        again = c.post("/v1/evaluate", json={"task": "scale_relu", "solution": GOOD}).json()
        metrics = c.get("/metrics").text
    assert again["verdict"]["stored"] is not None
    assert again["verdict"]["created_at"] == first["verdict"]["created_at"] or first["verdict"]["stored"]
    assert "kernelproof_served_from_store_total" in metrics


def test_twenty_concurrent_clients_on_two_slots_each_get_their_own_verdict(server):
    """Four distinct solutions (two right, two wrong: a comment apart) from 20 clients at once."""
    sources = [
        GOOD + "\n# client a\n",
        GOOD + "\n# client b\n",
        WRONG + "\n# client a\n",
        WRONG + "\n# client b\n",
    ]
    expected = ["pass", "pass", "fail", "fail"]
    got: dict[int, dict] = {}

    def client(i: int) -> None:
        with httpx.Client(base_url=server.url, timeout=600) as c:
            r = c.post("/v1/evaluate", json={"task": "scale_relu", "solution": sources[i % 4]})
            got[i] = {"status": r.status_code, **(r.json() if r.status_code == 200 else {"text": r.text})}

    threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(20)), "a client got no answer"
    for i, doc in got.items():
        assert doc["status"] == 200, doc
        assert doc["verdict"]["verdict"] == expected[i % 4], (i, doc["verdict"]["reasons"])
        assert doc["verdict"]["solution"]["sha256"] == _sha(sources[i % 4])
    assert len({d["id"] for d in got.values()}) == 20


def test_a_batch_streams_each_verdict_as_it_finishes(server):
    items = [{"task": "scale_relu", "solution": s} for s in (GOOD, WRONG, GOOD + "\n# streamed\n")]
    lines = []
    with server.client() as c, c.stream("POST", "/v1/jobs/stream", json={"items": items}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
        for line in r.iter_lines():
            if line:
                lines.append(json.loads(line))
    head, answers = lines[0], lines[1:]
    assert len(head["jobs"]) == 3 and sorted(a["id"] for a in answers) == sorted(head["jobs"])
    by_id = {a["id"]: a for a in answers}
    assert [by_id[j]["verdict"]["verdict"] for j in head["jobs"]] == ["pass", "fail", "pass"]


def test_a_job_is_submitted_then_read_by_its_id(server):
    with server.client() as c:
        r = c.post("/v1/jobs", json={"items": [{"task": "scale_relu", "solution": WRONG}]})
        assert r.status_code == 202
        (job_id,) = r.json()["jobs"]
        doc = wait_for(c, job_id)
        batch = c.get(f"/v1/batches/{r.json()['batch']}").json()
        unknown = c.get("/v1/jobs/nope")
    assert doc["verdict"]["verdict"] == "fail" and doc["reward"] == 0.0
    assert batch["results"][0]["id"] == job_id
    assert unknown.status_code == 404


def test_requests_that_do_not_fit_are_refused_with_a_sentence(server):
    with server.client() as c:
        unknown_task = c.post("/v1/evaluate", json={"task": "no_such_task", "solution": GOOD})
        no_solution = c.post("/v1/evaluate", json={"task": "scale_relu"})
        stray_field = c.post(
            "/v1/evaluate", json={"task": "scale_relu", "solution": GOOD, "path": "/etc/passwd"}
        )
        not_json = c.post("/v1/evaluate", content=b"{not json")
        timed_on_correctness_only = c.post(
            "/v1/evaluate", json={"task": "scale_relu", "solution": GOOD, "correctness_only": False}
        )
    assert unknown_task.status_code == 404 and "no task 'no_such_task'" in unknown_task.json()["error"]
    assert no_solution.status_code == 422 and "solution" in no_solution.json()["error"]
    assert stray_field.status_code == 422 and "path" in stray_field.json()["error"]
    assert not_json.status_code == 400
    assert timed_on_correctness_only.status_code == 422


def test_a_client_reference_is_refused_without_the_operator_option(server):
    reference = (server_tasks() / "scale_relu.py").read_text()
    with server.client() as c:
        r = c.post("/v1/evaluate", json={"task": "mine", "solution": GOOD, "reference": reference})
    assert r.status_code == 403 and "--trust-client-tasks" in r.json()["error"]


def test_an_oversize_body_is_refused_before_it_is_read(server):
    with server.client() as c:
        announced = c.post("/v1/evaluate", json={"task": "scale_relu", "solution": "x" * 1_100_000})

        def chunks():
            for _ in range(40):
                yield b"y" * 50_000

        streamed = c.post("/v1/evaluate", content=chunks())  # no length announced
    assert announced.status_code == 413 and streamed.status_code == 413


def test_health_tasks_and_metrics_answer(server):
    with server.client() as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert "scale_relu" in c.get("/v1/tasks").json()["tasks"]
        metrics = c.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    for name in (
        "kernelproof_queue_depth",
        'kernelproof_in_flight{device="cpu"}',
        "kernelproof_evaluations_per_second",
        "kernelproof_verdicts_total",
        "kernelproof_build_seconds_total",
        "kernelproof_evaluation_seconds_total",
    ):
        assert name in text, name


def server_tasks():
    from serving import TASKS

    return TASKS


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
