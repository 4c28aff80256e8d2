"""Servers of their own: back-pressure (429), the bearer token (refused at startup beyond
loopback without one; 401 without it), a client that goes away, and a restart mid-batch."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from cli_support import run_child
from serving import FAST, GOOD, ROOT, WRONG, start, wait_for

TOKEN = "s3cret-token-for-the-tests-0123456789"


def test_a_full_queue_answers_429_with_retry_after(tmp_path, servers):
    s = start(tmp_path, *FAST, "--queue-limit", "2")
    servers.append(s)
    items = [{"task": "scale_relu", "solution": GOOD + f"\n# {i}\n"} for i in range(3)]
    with s.client() as c:
        too_many = c.post("/v1/jobs", json={"items": items})
        accepted = c.post("/v1/jobs", json={"items": items[:2]})
        full = c.post("/v1/evaluate", json=items[2])
        metrics = c.get("/metrics").text
    assert too_many.status_code == 429 and int(too_many.headers["Retry-After"]) > 0
    assert "queue is full" in too_many.json()["error"]
    assert accepted.status_code == 202
    assert full.status_code == 429 and "Retry-After" in full.headers
    assert 'kernelproof_refused_total{why="queue_full"} 2' in metrics


def test_binding_beyond_loopback_without_a_token_is_refused_at_startup(tmp_path):
    done = run_child(
        *("serve", "--tasks", "tests/data/tasks", "--host", "0.0.0.0", "--port", "0"),
        *("--db", str(tmp_path / "s.sqlite"), "--device", "cpu"),
        cwd=ROOT,
        timeout=120,
    )
    assert done.code == 2, done.err
    assert "not a loopback address" in done.err and "--token-file" in done.err
    assert "listening" not in done.out


def test_with_a_token_file_every_request_but_healthz_needs_the_token(tmp_path, servers):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    s = start(tmp_path, *FAST, "--host", "0.0.0.0", "--token-file", str(token_file))
    s.url = s.url.replace("0.0.0.0", "127.0.0.1")
    servers.append(s)
    with s.client(token="") as anonymous, s.client(token="wrong-token-of-the-same-size-000000") as wrong:
        assert anonymous.get("/healthz").status_code == 200
        no_token = anonymous.post("/v1/evaluate", json={"task": "scale_relu", "solution": GOOD})
        bad_token = wrong.get("/v1/tasks")
    with s.client(token=TOKEN) as c:
        ok = c.get("/v1/tasks")
        refused = c.get("/metrics").text
    assert no_token.status_code == 401 and no_token.headers["www-authenticate"] == "Bearer"
    assert bad_token.status_code == 401
    assert ok.status_code == 200
    assert 'kernelproof_refused_total{why="unauthorized"} 2' in refused


def test_a_client_that_goes_away_cancels_its_queued_jobs(tmp_path, servers):
    # one slot and one job taken for it: the first job runs, the others stay queued (with more jobs
    # than slots a job taken waits for the slot as running, where it can no longer be cancelled)
    s = start(tmp_path, *FAST, "--jobs-per-slot", "1")
    servers.append(s)
    items = [{"task": "scale_relu", "solution": GOOD + f"\n# gone {i}\n"} for i in range(3)]
    with s.client() as c:
        with c.stream("POST", "/v1/jobs/stream", json={"items": items}) as r:
            head = json.loads(next(r.iter_lines()))
        # the stream is closed: the queued jobs are cancelled, the running one finishes
        states = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            states = {d["id"]: d["state"] for d in c.get(f"/v1/batches/{head['batch']}").json()["results"]}
            if "queued" not in states.values() and "running" not in states.values():
                break
            time.sleep(0.3)
    assert sorted(states.values()) == ["cancelled", "cancelled", "done"], states

    # a client of the synchronous endpoint that stops waiting: its queued jobs are cancelled too
    # each job at least 1.5 s (its import waits): however fast the machine, the client's 2 s run
    # out with three or more still queued
    slow = "import time as _time\n_time.sleep(1.5)\n" + GOOD
    waiting = [{"task": "scale_relu", "solution": slow + f"\n# impatient {i}\n"} for i in range(5)]
    with s.client(timeout=2) as c, pytest.raises(httpx.ReadTimeout):
        c.post("/v1/evaluate", json={"items": waiting})
    with s.client() as c:
        deadline = time.monotonic() + 60
        while (cancelled := _metric(c.get("/metrics").text, "kernelproof_cancelled_total")) < 3:
            assert time.monotonic() < deadline, f"{cancelled} cancelled"
            time.sleep(0.3)
        time.sleep(1.0)
        metrics = c.get("/metrics").text
    # those still queued when it went away (those judged or running by then finish)
    assert _metric(metrics, "kernelproof_cancelled_total") >= 3
    assert _metric(metrics, "kernelproof_queue_depth") == 0


def test_a_restart_mid_batch_serves_what_was_judged_and_reruns_what_was_in_flight(tmp_path, servers):
    s = start(tmp_path, *FAST, "--jobs-per-slot", "1")  # one job at a time: judged one after the other
    servers.append(s)
    # the second job's import waits 5 s: it is still running when the first one's answer is read,
    # however fast the machine judges a wrong kernel
    slow_wrong = "import time as _time\n_time.sleep(5)\n" + WRONG
    items = [{"task": "scale_relu", "solution": src + "\n# restart\n"} for src in (GOOD, slow_wrong)]
    with s.client() as c:
        batch = c.post("/v1/jobs", json={"items": items}).json()
        first = wait_for(c, batch["jobs"][0])
        deadline = time.monotonic() + 60
        while (state := c.get(f"/v1/jobs/{batch['jobs'][1]}").json()["state"]) != "running":
            assert state == "queued", f"the second job was {state} before the crash"
            assert time.monotonic() < deadline, "the second job never started"
            time.sleep(0.1)
    s.kill_all()  # a crash: no shutdown, the second job in flight

    again = start(tmp_path, *FAST)
    servers.append(again)
    with again.client() as c, c.stream("GET", f"/v1/batches/{batch['batch']}/stream") as r:
        answers = {d["id"]: d for d in (json.loads(line) for line in r.iter_lines() if line)}
    assert sorted(answers) == sorted(batch["jobs"])
    kept = answers[batch["jobs"][0]]
    assert kept["verdict"]["created_at"] == first["verdict"]["created_at"], "a judged verdict was lost"
    assert [answers[j]["verdict"]["verdict"] for j in batch["jobs"]] == ["pass", "fail"]
    assert all(answers[j]["state"] == "done" for j in batch["jobs"])


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in the metrics")
