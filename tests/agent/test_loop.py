"""The whole optimize loop over the real SDKs and loopback HTTP servers, with a fake evaluator."""

from __future__ import annotations

import threading

import pytest
from agent_fakes import FakeEvaluator, answer
from agent_loopback import Drop, Raw, Reply, Status

from kernelproof.agent import AgentOptions, Limits, Price, SearchSettings, optimize, parse_model
from kernelproof.agent.memory import Memory
from kernelproof.agent.strategies import STRATEGIES
from kernelproof.options import EvalOptions
from kernelproof.text import markdown_text

IDEAS = "1. Fuse the scale and the add.\n2. Use a larger block.\n"


class Script:
    """Answers in turn from a list of markers; idea requests get a fixed list."""

    def __init__(self, markers: list[str], ideas: str = IDEAS):
        self.markers = markers
        self.ideas = ideas
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, req):
        if "optimisation ideas" in req.last_user:
            return Reply(self.ideas)
        with self.lock:
            i, self.n = self.n, self.n + 1
        return Reply(answer(self.markers[min(i, len(self.markers) - 1)], tag=str(i)))


def options(tmp_path, **kw) -> AgentOptions:
    base = dict(
        eval=EvalOptions(device="cpu"), out_dir=str(tmp_path / "run"), db=str(tmp_path / "kp.db"), plot=False
    )
    base.update(kw)
    return AgentOptions(**base)


def model(server, provider: str = "openai", **kw):
    url = server.openai_url if provider == "openai" else server.anthropic_url
    return parse_model(
        f"{provider}:loopback-model", base_url=url, timeout_s=5, backoff_s=0.01, api_key="k", **kw
    )


def speed(c) -> float:
    return c.verdict.speedup["best"].median


def test_refine_feeds_each_verdict_back_and_keeps_the_fastest_verified(serve, task_file, tmp_path):
    script = Script(
        [
            "COMPILE_ERROR",
            "WRONG",
            "SPEED: 1.5",
            "CHEAT: stale_output\n# SPEED: 100",
            "SPEED: 2.5",
            "SPEED: 2",
        ]
    )
    server = serve(script)
    ev = FakeEvaluator()
    res = optimize(task_file, model(server), options(tmp_path, limits=Limits(max_candidates=6)), evaluator=ev)
    assert res.stop_reason == "max_candidates" and len(res.candidates) == 6
    prompts = [r.last_user for r in server.requests]
    assert 'identifier "blockIdx_x" is undefined' in prompts[1]
    assert "case odd/large/1 (shape odd, large inputs): mismatch" in prompts[2]
    assert "vs eager 1.50x [95% CI 1.46-1.54]" in prompts[3] and "Make it faster" in prompts[3]
    assert "reason code stale_output:" in prompts[4] and "\nRejected as stale_output.\n" in prompts[4]
    assert res.best.id == "t004s00" and speed(res.best) == 2.5 and res.best.passed
    assert (tmp_path / "run" / "best.py").read_text() == res.best.source
    assert res.spend.evaluated == 6 and res.spend.live_calls == 6


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_picks_the_fastest_verified_candidate_and_never_a_cheat(
    serve, task_file, tmp_path, strategy, provider
):
    markers = [
        "SPEED: 1.2",
        "CHEAT: timing_tamper\n# SPEED: 300",
        "WRONG",
        "SPEED: 1.8",
        "COMPILE_ERROR",
        "CHEAT: below_physical_floor\n# SPEED: 900",
        "SPEED: 1.4",
        "SPEED: 2.2",
        "CHEAT: output_aliases_input",
    ]
    server = serve(Script(markers))
    opts = options(
        tmp_path, strategy=strategy, limits=Limits(max_candidates=10), search=SearchSettings(samples=3)
    )
    ev = FakeEvaluator()
    res = optimize(task_file, model(server, provider), opts, evaluator=ev)
    verified = [c for c in res.candidates if c.passed]
    assert verified and res.best is not None and res.best.verdict.passed
    assert speed(res.best) == max(speed(c) for c in verified)
    assert not any(
        c.verdict and c.verdict.codes and "CHEAT" in c.source and c is res.best for c in res.candidates
    )
    assert res.spend.evaluated <= 10 and len(ev.evaluated) == res.spend.evaluated
    assert {r.path for r in server.requests} == {
        "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    }


def test_the_candidates_of_a_round_are_evaluated_together(serve, task_file, tmp_path):
    server = serve(Script([f"SPEED: 1.{i}" for i in range(1, 9)]))
    ev = FakeEvaluator()
    opts = options(
        tmp_path, strategy="best-of-n", limits=Limits(max_candidates=8), search=SearchSettings(samples=4)
    )
    res = optimize(task_file, model(server), opts, evaluator=ev)
    assert [len(b) for b in ev.batches] == [4, 4]
    assert speed(res.best) == 1.8


def test_malformed_answers_are_rejected_before_evaluation_and_explained(serve, task_file, tmp_path):
    answers = iter(["no code at all", "```python\nimport torch\n```", answer("SPEED: 1.3")])
    server = serve(lambda req: Reply(next(answers, answer("SPEED: 1.1", "later"))))
    ev = FakeEvaluator()
    res = optimize(task_file, model(server), options(tmp_path, limits=Limits(max_candidates=1)), evaluator=ev)
    assert [c.rejection.code if c.rejection else "evaluated" for c in res.candidates] == [
        "malformed_answer",
        "malformed_answer",
        "evaluated",
    ]
    assert len(ev.evaluated) == 1 and res.spend.evaluated == 1
    assert "no Python code block" in server.requests[1].last_user
    assert "`class ModelNew(nn.Module)`" in server.requests[2].last_user


def test_rate_limits_and_a_dropped_connection_are_survived(serve, task_file, tmp_path):
    script = Script(["SPEED: 1.1", "SPEED: 1.6"])
    hiccups = iter([Status(429, {"retry-after-ms": "5"}), Drop(), Status(503)])
    server = serve(lambda req: next(hiccups, None) or script(req))
    res = optimize(
        task_file,
        model(server),
        options(tmp_path, limits=Limits(max_candidates=2)),
        evaluator=FakeEvaluator(),
    )
    assert speed(res.best) == 1.6 and server.count == 5
    assert res.spend.retries == 3 and res.spend.failed_calls == 0


def test_a_call_that_fails_for_good_costs_a_turn_not_the_run(serve, task_file, tmp_path):
    script = Script(["SPEED: 1.7"])
    failures = iter([Status(500)] * 2)
    server = serve(lambda req: next(failures, None) or script(req))
    res = optimize(
        task_file,
        model(server, max_retries=1),
        options(tmp_path, limits=Limits(max_candidates=1)),
        evaluator=FakeEvaluator(),
    )
    assert res.spend.failed_calls == 1 and speed(res.best) == 1.7


def test_a_refused_key_stops_the_run_with_the_backends_message(serve, task_file, tmp_path):
    server = serve(lambda req: Status(401))
    res = optimize(task_file, model(server), options(tmp_path), evaluator=FakeEvaluator())
    assert res.stop_reason == "backend_error" and "401" in res.error or "Authentication" in res.error
    assert server.count == 1 and res.best is None


def test_a_provider_down_for_several_turns_ends_the_run(serve, task_file, tmp_path):
    server = serve(lambda req: Status(503))
    res = optimize(
        task_file,
        model(server, max_retries=0),
        options(tmp_path, max_failed_turns=2),
        evaluator=FakeEvaluator(),
    )
    assert res.stop_reason == "backend_unavailable" and server.count == 2


def test_identical_answers_are_evaluated_once(serve, task_file, tmp_path):
    server = serve(lambda req: Reply(answer("SPEED: 1.5", "same")))
    ev = FakeEvaluator()
    opts = options(tmp_path, strategy="best-of-n", search=SearchSettings(samples=3), patience=1)
    res = optimize(task_file, model(server), opts, evaluator=ev)
    assert len(ev.evaluated) == 1 and res.spend.evaluated == 1
    assert [c.duplicate_of for c in res.candidates] == ["", "t000s00", "t000s00"] + ["t000s00"] * 3
    assert all(c.passed for c in res.candidates) and res.best.id == "t000s00"


def test_stops_when_nothing_improves_for_patience_rounds(serve, task_file, tmp_path):
    server = serve(Script(["SPEED: 2.0", "SPEED: 1.5", "WRONG", "SPEED: 1.9"]))
    res = optimize(task_file, model(server), options(tmp_path, patience=3), evaluator=FakeEvaluator())
    assert res.stop_reason == "no_improvement" and len(res.candidates) == 4


def test_stops_once_the_speed_of_light_target_is_reached(serve, task_file, tmp_path):
    server = serve(Script(["SPEED: 1.5\n# SOL: 0.5", "SPEED: 2.5\n# SOL: 0.92", "SPEED: 3"]))
    res = optimize(task_file, model(server), options(tmp_path, sol_target=0.9), evaluator=FakeEvaluator())
    assert res.stop_reason == "sol_target" and len(res.candidates) == 2


def test_a_degenerate_task_ends_the_run(serve, task_file, tmp_path):
    server = serve(Script(["TASK_ERROR"]))
    res = optimize(task_file, model(server), options(tmp_path), evaluator=FakeEvaluator())
    assert res.stop_reason == "task_error" and res.best is None


def test_the_store_holds_every_prompt_answer_candidate_and_verdict(serve, task_file, tmp_path):
    server = serve(Script(["WRONG", "SPEED: 1.4"]))
    res = optimize(
        task_file,
        model(server),
        options(tmp_path, limits=Limits(max_candidates=2), plot=True),
        evaluator=FakeEvaluator(),
    )
    mem = Memory(tmp_path / "kp.db")
    run = mem.run(res.run_id)
    assert (
        run["status"] == "finished" and run["best_id"] == "t001s00" and run["stop_reason"] == "max_candidates"
    )
    calls = mem.calls(res.run_id)
    assert [c["kind"] for c in calls] == ["draft", "refine"] and all(
        c["prompt_json"] and c["response"] for c in calls
    )
    stored = mem.candidates(res.run_id)
    assert [c.verdict.verdict.value for c in stored] == ["fail", "pass"]
    for name in ("best", "verdict", "summary_md", "summary_json", "plot", "replay"):
        assert (tmp_path / "run").joinpath(res.files[name]).exists()


def padded(marker: str, tag: str, pad_chars: int) -> str:
    return "Reasoning. " * (pad_chars // 11) + "\n\n" + answer(marker, tag)


def test_the_token_budget_is_never_exceeded(serve, task_file, tmp_path):
    n = iter(range(100))
    server = serve(lambda req: Reply(padded("SPEED: 1.2", str(next(n)), 2400)))
    opts = options(
        tmp_path,
        strategy="best-of-n",
        search=SearchSettings(samples=1),
        patience=10,
        limits=Limits(max_tokens=12000),
        max_output_tokens=4000,
        min_output_tokens=200,
    )
    res = optimize(task_file, model(server), opts, evaluator=FakeEvaluator())
    assert res.spend.input_tokens + res.spend.output_tokens <= 12000
    assert res.stop_reason == "max_tokens"
    caps = [r.body["max_tokens"] for r in server.requests]
    assert caps[0] == 4000 and caps[-1] < 4000  # the last call's cap shrank to fit


def test_the_dollar_budget_is_never_exceeded(serve, task_file, tmp_path):
    server = serve(Script([f"SPEED: 1.{i}" for i in range(1, 9)]))
    opts = options(
        tmp_path,
        limits=Limits(max_dollars=0.02),
        price=Price(2.0, 8.0),
        max_output_tokens=1000,
        min_output_tokens=100,
    )
    res = optimize(task_file, model(server), opts, evaluator=FakeEvaluator())
    assert 0 < res.spend.dollars <= 0.02 and res.stop_reason == "max_dollars"
    assert abs(res.spend.dollars - (res.spend.input_tokens * 2 + res.spend.output_tokens * 8) / 1e6) < 1e-12


def test_the_gpu_budget_admits_no_call_whose_candidate_it_could_not_evaluate(serve, task_file, tmp_path):
    server = serve(Script(["SPEED: 1.5\n# GPU_S: 4"] * 6))
    opts = options(
        tmp_path,
        strategy="best-of-n",
        search=SearchSettings(samples=3),
        limits=Limits(max_gpu_seconds=10),
        eval_reserve_s=4,
    )
    res = optimize(task_file, model(server), opts, evaluator=FakeEvaluator())
    assert server.count == 2 and res.spend.gpu_seconds == 8 and res.stop_reason == "max_gpu_seconds"


def test_the_candidate_budget_is_exact_and_trims_the_last_round(serve, task_file, tmp_path):
    server = serve(Script([f"SPEED: 1.{i}" for i in range(1, 9)]))
    opts = options(
        tmp_path, strategy="best-of-n", search=SearchSettings(samples=4), limits=Limits(max_candidates=6)
    )
    ev = FakeEvaluator()
    res = optimize(task_file, model(server), opts, evaluator=ev)
    assert (
        server.count == 6 and [len(b) for b in ev.batches] == [4, 2] and res.stop_reason == "max_candidates"
    )


def test_without_a_reservation_bound_the_summary_says_when_the_gpu_budget_did_not_hold(
    serve, task_file, tmp_path
):
    server = serve(Script(["SPEED: 1.5\n# GPU_S: 4"] * 6))
    opts = options(
        tmp_path,
        strategy="best-of-n",
        search=SearchSettings(samples=3),
        limits=Limits(max_gpu_seconds=10),
        eval=EvalOptions(device="cpu", time_budget_s=3),
    )
    res = optimize(task_file, model(server), opts, evaluator=FakeEvaluator())
    assert (
        server.count == 3 and res.spend.gpu_seconds == 12
    )  # three 3 s estimates were admitted, each took 4 s
    assert res.summary["budgets_held"] is False
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "**a budget was exceeded**: max_gpu_seconds: 12.0 GPU s spent, over the limit of 10.0 GPU s" in md
    why = "max_gpu_seconds: the evaluation of t000s00 took 4.0 GPU s, more than the 3.0 reserved"
    assert "why: " + markdown_text(why) in md  # prose in summary.md is Markdown-escaped


def test_a_verdict_served_from_the_store_costs_no_gpu_seconds(serve, task_file, tmp_path):
    class FromStore(FakeEvaluator):
        def __call__(self, pairs, options=None):
            for v in super().__call__(pairs, options):
                yield v.__class__(**{**v.__dict__, "created_at": "2020-01-01T00:00:00+00:00"})

    server = serve(Script(["SPEED: 1.5\n# GPU_S: 7"]))
    res = optimize(
        task_file, model(server), options(tmp_path, limits=Limits(max_candidates=1)), evaluator=FromStore()
    )
    assert res.spend.gpu_seconds == 0 and res.best.gpu_s == 0 and res.best.verdict.elapsed_s == 7


# --- budgets hold: what the provider reports is charged, and the run stops before crossing a limit ---


def overbilling(reported=lambda cap: cap + 1):
    """A server whose every reply is a good answer but reports ``reported(cap)`` output tokens."""
    n = iter(range(100))

    def respond(req):
        cap = req.body.get("max_tokens") or req.body.get("max_completion_tokens")
        return Reply(answer("SPEED: 1.5", str(next(n))), output_tokens=reported(cap))

    return respond


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_reply_over_its_cap_is_charged_warned_about_and_ends_the_run(serve, task_file, tmp_path, provider):
    server = serve(overbilling(lambda cap: 40_000))
    price = Price(1.0, 20.0)  # 40 000 output tokens cost $0.80, over the $0.50 budget
    said = []
    opts = options(tmp_path, limits=Limits(max_dollars=0.50), price=price, max_output_tokens=32_000)
    res = optimize(task_file, model(server, provider), opts, evaluator=FakeEvaluator(), progress=said.append)
    assert server.count == 1 and res.stop_reason == "reply_over_cap"
    cap = server.requests[0].body["max_tokens"]  # shrunk to what the dollars left allow
    assert 20_000 < cap < 25_000
    assert res.spend.output_tokens == 40_000  # counted as the provider reported it
    assert res.spend.dollars == pytest.approx(price.cost(res.spend.input_tokens, 40_000))
    overshoot = price.cost(0, 40_000 - cap)
    assert res.spend.dollars <= 0.50 + overshoot + 1e-12  # over the budget by that one reply's overshoot only
    warning = f"the reply to call t000s00 reported 40000 output tokens, over the cap of {cap} sent with it"
    assert any(line.startswith("warning: " + warning) for line in said)
    assert res.warnings and res.warnings[0].startswith(warning)
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "- stopped: reply_over_cap (" + markdown_text(warning) in md
    assert "**a budget was exceeded**: max_dollars: $0.8" in md and "over the limit of $0.5000" in md
    assert "  - why: " + markdown_text(warning) in md and "## Warnings" in md
    assert "GPU seconds reserved" not in md  # the cause summary.md used to give for any budget
    assert res.best is not None  # the answer was paid for, so it was judged before stopping


def test_a_reply_over_its_cap_ends_the_run_even_with_budget_left(serve, task_file, tmp_path):
    server = serve(overbilling())
    opts = options(tmp_path, limits=Limits(max_candidates=10), max_output_tokens=2000, min_output_tokens=100)
    res = optimize(task_file, model(server, "anthropic"), opts, evaluator=FakeEvaluator())
    assert server.count == 1 and res.stop_reason == "reply_over_cap"
    assert res.spend.output_tokens == 2001 and res.summary["budgets_held"] is True
    assert "2001 output tokens, over the cap of 2000" in res.stop_detail


def test_a_budget_stop_says_which_budget_and_the_figures(serve, task_file, tmp_path):
    server = serve(Script([f"SPEED: 1.{i}" for i in range(1, 9)]))
    opts = options(
        tmp_path,
        limits=Limits(max_dollars=0.02),
        price=Price(2.0, 8.0),
        max_output_tokens=1000,
        min_output_tokens=100,
    )
    res = optimize(task_file, model(server), opts, evaluator=FakeEvaluator())
    assert res.stop_reason == "max_dollars" and res.spend.dollars <= 0.02
    assert res.stop_detail.startswith("the next call could cost $")
    assert (
        "of the $0.02 is left" in res.stop_detail and "input + 100 output tokens at least" in res.stop_detail
    )
    md = (tmp_path / "run" / "summary.md").read_text()
    assert f"- stopped: max_dollars ({markdown_text(res.stop_detail, limit=2000)})" in md


def test_the_call_budget_counts_failed_calls_and_stops_the_run(serve, task_file, tmp_path):
    script = Script(["WRONG", "SPEED: 1.2", "SPEED: 1.3"])
    failures = iter([Status(500)])
    server = serve(lambda req: next(failures, None) or script(req))
    opts = options(tmp_path, limits=Limits(max_calls=3))
    res = optimize(task_file, model(server, max_retries=0), opts, evaluator=FakeEvaluator())
    assert res.stop_reason == "max_calls" and res.spend.calls == 3 and res.spend.failed_calls == 1
    assert server.count == 3 and res.stop_detail == "3 of the 3 calls allowed are made"


@pytest.mark.parametrize("inside", ["prose", "code"])
def test_a_huge_answer_is_cut_in_the_history_sent_back(serve, task_file, tmp_path, inside):
    from kernelproof.agent.prompts import MAX_HISTORY_CHARS

    huge = "Thinking about tiles. " * 95_000  # 2.09 MB
    first = (
        huge + "\n\n" + answer("SPEED: 1.1", "huge")
        if inside == "prose"
        else "```python\nimport torch\n# " + huge + "\nclass ModelNew:\n    pass\n```\n"
    )
    n = iter(range(100))
    server = serve(
        lambda req: Reply(first if next(n) == 0 else answer("SPEED: 1.2", str(len(server.requests))))
    )
    opts = options(tmp_path, limits=Limits(max_candidates=5), max_output_tokens=600_000, patience=10)
    res = optimize(task_file, model(server), opts, evaluator=FakeEvaluator())
    assert len(res.candidates[0].response) > 2_000_000 and len(server.requests) >= 4
    base = len(server.requests[0].text)  # the first prompt: system, task, no history
    bound = base + 3 * (MAX_HISTORY_CHARS + 4_000)  # three earlier answers and their feedback at most
    for req in server.requests[1:]:
        assert len(req.text) < bound < 120_000
    sent_back = server.requests[1].body["messages"][-2]["content"]
    if inside == "prose":
        assert sent_back.startswith("[This answer of 2090") and "cut to the solution file" in sent_back
        assert "SPEED: 1.1" in sent_back
    else:
        assert "characters cut here ...]" in sent_back and len(sent_back) < MAX_HISTORY_CHARS + 200


def test_a_model_that_repeats_itself_runs_out_of_candidates(serve, task_file, tmp_path):
    server = serve(lambda req: Reply(answer("SPEED: 1.5", "same")))
    ev = FakeEvaluator()
    res = optimize(task_file, model(server), options(tmp_path, limits=Limits(max_candidates=2)), evaluator=ev)
    assert server.count == 2 and res.stop_reason == "max_candidates"
    assert len(ev.evaluated) == 1 and res.spend.evaluated == 1 and res.spend.repeats == 1
    assert res.candidates[1].duplicate_of == "t000s00"
    assert "1 repeats of an earlier answer" in res.stop_detail


def test_a_repeated_answer_without_code_counts_too_whitespace_aside(serve, task_file, tmp_path):
    texts = iter(
        ["I cannot write this kernel.", "I cannot  write\nthis kernel. ", "I cannot write this kernel."]
    )
    server = serve(lambda req: Reply(next(texts, "never asked")))
    res = optimize(
        task_file,
        model(server),
        options(tmp_path, limits=Limits(max_candidates=2)),
        evaluator=FakeEvaluator(),
    )
    assert server.count == 3 and res.stop_reason == "max_candidates"  # the first is not a candidate
    assert [c.duplicate_of for c in res.candidates] == ["", "t000s00", "t000s00"]
    assert res.spend.repeats == 2 and res.spend.evaluated == 0


def test_a_file_that_differs_only_in_whitespace_is_evaluated_not_shared(serve, task_file, tmp_path):
    a = answer("SPEED: 1.5", "ws")
    b = a.replace("return x * 2", "return  x * 2")
    texts = iter([a, b])
    server = serve(lambda req: Reply(next(texts, a)))
    ev = FakeEvaluator()
    optimize(task_file, model(server), options(tmp_path, limits=Limits(max_candidates=2)), evaluator=ev)
    assert len(ev.evaluated) == 2  # Python's whitespace can change the program: never share a verdict


def test_the_next_prompt_says_which_code_block_was_taken_and_which_were_dropped(serve, task_file, tmp_path):
    two = (
        "A helper:\n```python\ndef scale(x):\n    return x * 2\n```\nThe file:\n```python\n"
        + answer("SPEED: 1.2").split("```python\n")[1]
    )
    texts = iter([two])
    server = serve(lambda req: Reply(next(texts, answer("SPEED: 1.3", "later"))))
    optimize(
        task_file,
        model(server),
        options(tmp_path, limits=Limits(max_candidates=2)),
        evaluator=FakeEvaluator(),
    )
    feedback = server.requests[1].last_user
    assert (
        "Your answer held 2 code blocks. The solution file was taken from block 2 (python, lines 7-20)"
        in feedback
    )
    assert "Dropped: block 1 (python, lines 2-5): it does not define ModelNew" in feedback


def test_a_provider_that_sends_malformed_replies_is_retried_then_ends_the_run(serve, task_file, tmp_path):
    server = serve(lambda req: Raw("{not json"))
    res = optimize(
        task_file,
        model(server, max_retries=1),
        options(tmp_path, max_failed_turns=2),
        evaluator=FakeEvaluator(),
    )
    assert res.stop_reason == "backend_unavailable" and server.count == 4  # 2 turns, 2 attempts each
    assert "MalformedReply" in res.stop_detail and res.spend.calls == 2
