from __future__ import annotations

import json

import pytest
from agent_fakes import FakeEvaluator, answer
from agent_loopback import Raw, Reply
from cli_support import run_piped

from kernelproof.commands.optimize import EXIT_FOUND, EXIT_NONE, EXIT_PROVIDER, EXIT_USAGE


@pytest.fixture
def cli(monkeypatch):
    """Invoke ``kernelproof optimize ...`` with the fake evaluator standing in for evaluate_many."""
    import kernelproof.api

    ev = FakeEvaluator()
    monkeypatch.setattr(kernelproof.api, "evaluate_many", ev)

    def invoke(*args: str):
        return run_piped("optimize", *args)

    invoke.evaluator = ev
    return invoke


def counter_server(serve, markers):
    n = iter(range(1000))

    def respond(req):
        i = next(n)
        return Reply(answer(markers[min(i, len(markers) - 1)], str(i)))

    return serve(respond)


def test_optimize_runs_against_a_local_server_and_writes_the_best_file(cli, serve, task_file, tmp_path):
    server = counter_server(serve, ["WRONG", "SPEED: 1.7", "SPEED: 1.2"])
    out = tmp_path / "run"
    result = cli(
        str(task_file),
        "--model",
        "vllm:qwen",
        "--base-url",
        server.openai_url,
        "--max-candidates",
        "3",
        "--device",
        "cpu",
        "--out",
        str(out),
        "--db",
        str(tmp_path / "kp.db"),
        "--no-plot",
        "--json",
        str(tmp_path / "result.json"),
    )
    assert result.code == EXIT_FOUND, result.output
    assert "best t001s00: 1.70x" in result.output and "stopped: max_candidates" in result.output
    doc = json.loads((tmp_path / "result.json").read_text())
    assert doc["best"] == str(out / "best.py") and doc["verdict"]["verdict"] == "pass"
    assert server.count == 3


@pytest.mark.parametrize(
    ("args", "mode", "said"),
    [
        ((), "auto", "probed, part of the contract: auto_odd (batch_size=3, features=33)"),
        (("--shape-variants", "task"), "task", "- the task's own: small (batch_size=4, features=33)"),
    ],
)
def test_candidates_are_judged_on_the_probed_shapes_unless_told_and_the_prompt_says_which(
    cli, serve, task_file, tmp_path, args, mode, said
):
    server = counter_server(serve, ["SPEED: 1.5"])
    out = tmp_path / "run"
    result = cli(
        str(task_file), "--model", "vllm:qwen", "--base-url", server.openai_url, "--max-candidates", "1",
        "--device", "cpu", "--out", str(out), "--db", "", "--no-plot", *args,
    )  # fmt: skip
    assert result.code == EXIT_FOUND, result.output
    assert [o.shape_variants for o in cli.evaluator.options] == [mode]
    prompt = server.requests[0].last_user
    assert said in prompt and (mode == "auto") == ("auto_half" in prompt)


def test_resume_by_folder_takes_the_runs_own_settings_and_a_larger_budget(cli, serve, task_file, tmp_path):
    server = counter_server(serve, ["SPEED: 1.1", "SPEED: 1.3", "SPEED: 1.9"])
    args = ["--device", "cpu", "--db", str(tmp_path / "kp.db"), "--no-plot"]
    first = cli(
        str(task_file),
        "--model",
        "vllm:qwen",
        "--base-url",
        server.openai_url,
        "--max-candidates",
        "2",
        "--out",
        str(tmp_path / "run"),
        *args,
    )
    assert first.code == EXIT_FOUND and server.count == 2
    more = cli("--resume", str(tmp_path / "run"), "--max-candidates", "3", "--no-plot")
    assert more.code == EXIT_FOUND, more.output
    assert server.count == 3 and "best t002s00: 1.90x" in more.output


def test_replay_needs_no_model_makes_no_call_and_keeps_the_recorded_budgets(cli, serve, task_file, tmp_path):
    server = counter_server(serve, ["SPEED: 1.4"])
    args = ["--device", "cpu", "--db", str(tmp_path / "kp.db"), "--no-plot"]
    cli(
        str(task_file),
        "--model",
        "vllm:qwen",
        "--base-url",
        server.openai_url,
        "--out",
        str(tmp_path / "a"),
        "--max-candidates",
        "2",
        "--strategy",
        "best-of-n",
        "--samples",
        "2",
        *args,
    )
    calls = server.count
    again = cli(
        str(task_file), "--replay", str(tmp_path / "a" / "replay.jsonl"), "--out", str(tmp_path / "b"), *args
    )
    assert again.code == EXIT_FOUND, again.output
    assert server.count == calls and "0 live calls" in again.output
    assert "stopped: max_candidates" in again.output and "best-of-n" in again.output


def test_a_run_without_a_verified_candidate_exits_1(cli, serve, task_file, tmp_path):
    server = counter_server(serve, ["WRONG"])
    result = cli(
        str(task_file),
        "-m",
        "vllm:qwen",
        "--base-url",
        server.openai_url,
        "--max-candidates",
        "2",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "r"),
        "--db",
        "",
        "--no-plot",
    )
    assert result.code == EXIT_NONE and "no verified solution" in result.output
    assert (tmp_path / "r" / "agent.db").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "gpt-5"], "PROVIDER:MODEL"),
        (["--model", "openai:gpt-5", "--strategy", "greedy"], "unknown strategy"),
        (["--model", "openai:gpt-5", "--max-dollars", "1", "--price", "cheap"], "IN,OUT"),
        (["--model", "vllm:q", "--max-dollars", "1"], "--price"),
        (["--model", "vllm:q", "--shape-variants", "some"], "--shape-variants must be probe | auto | task"),
    ],
)
def test_misuse_exits_2_with_a_sentence(cli, task_file, tmp_path, args, message):
    result = cli(str(task_file), *args, "--out", str(tmp_path / "r"), "--db", "", "--device", "cpu")
    assert result.code == EXIT_USAGE
    assert message in result.output


def test_a_task_is_needed_unless_resuming(cli):
    result = cli("--model", "openai:gpt-5")
    assert result.code == EXIT_USAGE and "TASK is needed" in result.output


def run_args(server, tmp_path, *more: str) -> list[str]:
    return [
        "--model",
        "vllm:qwen",
        "--base-url",
        server.openai_url,
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "run"),
        "--db",
        "",
        "--no-plot",
        *more,
    ]


def test_malformed_replies_are_retried_then_the_run_exits_4(cli, serve, task_file, tmp_path):
    server = serve(lambda req: Raw('{"choices": nope'))
    result = cli(str(task_file), *run_args(server, tmp_path, "--retries", "1"))
    assert result.code == EXIT_PROVIDER, result.output
    assert server.count == 6  # three turns of one call, each tried twice
    assert "stopped: backend_unavailable" in result.output and "MalformedReply" in result.output


def test_a_reply_over_its_cap_is_warned_about_on_stderr_and_exits_4(cli, serve, task_file, tmp_path):
    server = serve(lambda req: Reply(answer("SPEED: 1.4"), output_tokens=req.body["max_tokens"] * 3))
    result = cli(
        str(task_file), *run_args(server, tmp_path, "--max-output-tokens", "2000", "--price", "1,10")
    )
    assert result.code == EXIT_PROVIDER, result.output
    stderr = " ".join(result.err.split())  # rich wraps at the terminal's width
    assert "warning: the reply to call t000s00 reported 6000 output tokens, over the cap of 2000" in stderr
    assert "stopped: reply_over_cap" in result.output and server.count == 1
    assert (tmp_path / "run" / "best.py").exists()  # what was paid for and verified is kept


def test_a_model_that_repeats_itself_stops_at_max_candidates(cli, serve, task_file, tmp_path):
    server = serve(lambda req: Reply(answer("SPEED: 1.4", "same")))
    result = cli(str(task_file), *run_args(server, tmp_path, "--max-candidates", "2"))
    assert result.code == EXIT_FOUND, result.output
    assert server.count == 2 and "stopped: max_candidates" in result.output and "1 repeats" in result.output
    assert len(cli.evaluator.evaluated) == 1


def test_max_calls_bounds_the_calls_and_says_so(cli, serve, task_file, tmp_path):
    server = counter_server(serve, ["WRONG"])
    result = cli(str(task_file), *run_args(server, tmp_path, "--max-calls", "2"))
    assert result.code == EXIT_NONE and server.count == 2
    assert "stopped: max_calls (2 of the 2 calls allowed are made)" in result.output


def test_help_states_every_exit_code(cli):
    text = " ".join(cli("--help").output.split())
    for code in ("0 a verified solution was found", "1 none was", "2 misuse", "3 kernelproof's own failure"):
        assert code in text
    assert "4 the LLM provider failed" in text


def test_optimize_without_a_spending_bound_runs_with_the_default_and_its_help_says_so(
    cli, serve, task_file, tmp_path
):
    from kernelproof.agent.budget import DEFAULT_MAX_CALLS

    shown = " ".join(cli("--help").output.split())
    assert f"--max-calls {DEFAULT_MAX_CALLS}" in shown.replace("│", "").replace("  ", " ")
    server = serve(lambda req: Reply(" "))  # never a candidate
    out = tmp_path / "run"
    args = ["--model", "vllm:qwen", "--base-url", server.openai_url, "--device", "cpu", "--no-plot"]
    result = cli(
        str(task_file),
        *args,
        "--out",
        str(out),
        "--db",
        str(tmp_path / "kp.db"),
        "--max-rounds",
        "500",
        "--patience",
        "500",
    )
    assert result.code == EXIT_NONE, result.output
    assert "stopped: max_calls" in result.output and server.count == DEFAULT_MAX_CALLS
    again = cli(str(task_file), *args, "--out", str(out), "--db", str(tmp_path / "kp.db"))
    assert again.code == EXIT_USAGE and "one folder holds one run" in " ".join(again.output.split())
