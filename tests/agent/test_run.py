"""Runs that continue (--resume) and runs that re-run (--replay): no repeated paid call, no network."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from agent_fakes import FakeEvaluator, answer
from agent_loopback import Reply

from kernelproof.agent import AgentOptions, Limits, SearchSettings, load_run, optimize, parse_model
from kernelproof.agent.agent_errors import ReplayError
from kernelproof.options import EvalOptions

MARKERS = ["WRONG", "SPEED: 1.3", "COMPILE_ERROR", "SPEED: 1.9", "SPEED: 1.6", "SPEED: 2.4", "SPEED: 1.1"]


def by_turn(req):
    """The refine answer for a turn, whichever server or process asks: turn = answers so far."""
    turn = sum(m["role"] == "assistant" for m in req.body["messages"])
    return Reply(answer(MARKERS[turn % len(MARKERS)], tag=str(turn)))


def options(tmp_path, name: str = "run", **kw) -> AgentOptions:
    base = dict(
        eval=EvalOptions(device="cpu"),
        out_dir=str(tmp_path / name),
        db=str(tmp_path / "kp.db"),
        plot=False,
        search=SearchSettings(window=20),
        limits=Limits(max_candidates=5),
    )
    base.update(kw)
    return AgentOptions(**base)


def model(server):
    return parse_model("openai:loopback-model", base_url=server.openai_url, timeout_s=5, api_key="k")


class Interrupting(FakeEvaluator):
    """Raises KeyboardInterrupt on its n-th batch, as a user's Ctrl-C would."""

    def __init__(self, at_batch: int):
        super().__init__()
        self.at_batch = at_batch

    def __call__(self, pairs, options=None):
        if len(self.batches) + 1 == self.at_batch:
            self.batches.append([])
            raise KeyboardInterrupt
        return super().__call__(pairs, options)


def sources(res) -> list[tuple[str, str]]:
    return [(c.id, c.source) for c in res.candidates]


def test_resume_continues_an_interrupted_run_without_repeating_paid_calls(serve, task_file, tmp_path):
    reference = optimize(
        task_file, model(serve(by_turn)), options(tmp_path, "ref"), evaluator=FakeEvaluator()
    )
    first = serve(by_turn)
    with pytest.raises(KeyboardInterrupt):
        optimize(task_file, model(first), options(tmp_path), evaluator=Interrupting(at_batch=3))
    assert first.count == 3  # turn 2 was answered, then its evaluation was interrupted
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert load_run(str(tmp_path / "run"))["status"] == "failed"

    second = serve(by_turn)
    ev = FakeEvaluator()
    res = optimize(task_file, model(second), options(tmp_path), evaluator=ev, resume=str(tmp_path / "run"))
    assert second.count == 2  # only turns 3 and 4 were asked for
    assert [Path(p).stem for p in ev.evaluated] == ["t002s00", "t003s00", "t004s00"]
    assert res.run_id == run["run_id"] and sources(res) == sources(reference)
    assert res.best.id == reference.best.id and res.spend.evaluated == 5
    assert res.spend.gpu_seconds == reference.spend.gpu_seconds
    assert res.diverged == 0


def test_resuming_a_finished_run_makes_no_call_and_no_evaluation(serve, task_file, tmp_path):
    done = optimize(task_file, model(serve(by_turn)), options(tmp_path), evaluator=FakeEvaluator())
    again = serve(by_turn)
    ev = FakeEvaluator()
    res = optimize(task_file, model(again), options(tmp_path), evaluator=ev, resume=done.run_id)
    assert again.count == 0 and ev.evaluated == []
    assert sources(res) == sources(done) and res.best.id == done.best.id


def test_resume_with_a_larger_budget_goes_on_from_where_the_run_stopped(serve, task_file, tmp_path):
    done = optimize(task_file, model(serve(by_turn)), options(tmp_path), evaluator=FakeEvaluator())
    more = serve(by_turn)
    res = optimize(
        task_file,
        model(more),
        options(tmp_path, limits=Limits(max_candidates=6)),
        evaluator=FakeEvaluator(),
        resume=done.run_id,
    )
    assert more.count == 1 and len(res.candidates) == 6 and res.best.id == "t005s00"


def test_replay_makes_no_network_call_and_reproduces_the_run(serve, task_file, tmp_path):
    server = serve(by_turn)
    original = optimize(task_file, model(server), options(tmp_path), evaluator=FakeEvaluator())
    calls = server.count
    res = optimize(
        task_file,
        "",
        options(tmp_path, "replayed"),
        evaluator=FakeEvaluator(),
        replay=tmp_path / "run" / "replay.jsonl",
    )
    assert server.count == calls
    assert sources(res) == sources(original) and res.best.id == original.best.id
    assert res.run_id != original.run_id and res.diverged == 0 and res.spend.live_calls == 0
    assert res.spend.input_tokens == original.spend.input_tokens  # the log's usage is charged again


def test_replay_serves_by_position_even_when_fresh_verdicts_change_the_prompts(serve, task_file, tmp_path):
    optimize(task_file, model(serve(by_turn)), options(tmp_path), evaluator=FakeEvaluator())

    class Slower(FakeEvaluator):  # another machine: every speed differs, so every later prompt differs
        def __call__(self, pairs, options=None):
            for v in super().__call__(pairs, options):
                if v.passed:
                    best = v.speedup["best"]
                    sp = {k: s.__class__(s.baseline, s.median * 0.9, s.ci95) for k, s in v.speedup.items()}
                    v = v.__class__(**{**v.__dict__, "speedup": sp})
                    assert best.median != sp["best"].median
                yield v

    res = optimize(task_file, "", options(tmp_path, "elsewhere"), evaluator=Slower(), replay=tmp_path / "run")
    assert len(res.candidates) == 5 and res.diverged > 0


def test_a_replay_that_outruns_its_log_stops_without_calling_out(serve, task_file, tmp_path):
    optimize(task_file, model(serve(by_turn)), options(tmp_path), evaluator=FakeEvaluator())
    res = optimize(
        task_file,
        "",
        options(tmp_path, "longer", limits=Limits(max_candidates=9)),
        evaluator=FakeEvaluator(),
        replay=tmp_path / "run",
    )
    assert res.stop_reason == "replay_exhausted" and len(res.candidates) == 5


def test_a_replay_log_of_another_task_is_refused(serve, task_file, tmp_path):
    optimize(task_file, model(serve(by_turn)), options(tmp_path), evaluator=FakeEvaluator())
    other = tmp_path / "other_task.py"
    other.write_text(task_file.read_text() + "\n# changed\n")
    with pytest.raises(ReplayError, match="another task"):
        optimize(other, "", options(tmp_path, "x"), evaluator=FakeEvaluator(), replay=tmp_path / "run")
    with pytest.raises(ReplayError, match="another version"):
        optimize(
            other, "openai:m", options(tmp_path, "y"), evaluator=FakeEvaluator(), resume=str(tmp_path / "run")
        )


def test_resume_and_replay_together_are_refused(task_file, tmp_path):
    with pytest.raises(ReplayError, match="do not go together"):
        optimize(task_file, "openai:m", options(tmp_path), evaluator=FakeEvaluator(), resume="a", replay="b")


def test_replay_runs_where_neither_sdk_is_installed(serve, task_file, tmp_path):
    optimize(task_file, model(serve(by_turn)), options(tmp_path), evaluator=FakeEvaluator())
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["openai"] = None  # importing either SDK now raises ImportError
        sys.modules["anthropic"] = None
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from agent_fakes import FakeEvaluator
        from kernelproof.agent import AgentOptions, Limits, SearchSettings, optimize
        from kernelproof.options import EvalOptions
        opts = AgentOptions(eval=EvalOptions(device="cpu"), out_dir={str(tmp_path / "offline")!r},
                            db={str(tmp_path / "offline.db")!r}, plot=False, search=SearchSettings(window=20),
                            limits=Limits(max_candidates=5))
        res = optimize({str(task_file)!r}, "", opts, evaluator=FakeEvaluator(), replay={str(tmp_path / "run")!r})
        print(res.best.id, len(res.candidates), res.spend.live_calls)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["t003s00", "5", "0"]


def failing_second_request(serve):
    from agent_loopback import Status

    n = iter(range(1000))
    return serve(lambda req: Status(500) if next(n) == 1 else by_turn(req))


def no_retry_model(server):
    return parse_model(
        "openai:loopback-model", base_url=server.openai_url, timeout_s=5, api_key="k", max_retries=0
    )


def test_a_call_that_failed_in_the_recorded_run_fails_again_on_resume_and_replay(serve, task_file, tmp_path):
    first = failing_second_request(serve)
    original = optimize(task_file, no_retry_model(first), options(tmp_path), evaluator=FakeEvaluator())
    assert first.count == 6 and original.spend.failed_calls == 1
    assert "error" in (tmp_path / "run" / "replay.jsonl").read_text()

    again = serve(by_turn)
    resumed = optimize(
        task_file,
        no_retry_model(again),
        options(tmp_path, limits=Limits(max_candidates=6)),
        evaluator=FakeEvaluator(),
        resume=original.run_id,
    )
    assert again.count == 1  # only the sixth candidate's call; the failed one is not asked again
    assert sources(resumed)[:5] == sources(original) and resumed.diverged == 0

    replayed = optimize(
        task_file, "", options(tmp_path, "replayed"), evaluator=FakeEvaluator(), replay=tmp_path / "run"
    )
    assert sources(replayed) == sources(original) and replayed.stop_reason == original.stop_reason
    assert replayed.spend.failed_calls == 1 and replayed.diverged == 0
