"""Output for people at 80 columns and in pipes: help texts that fit with their defaults whole,
eval lines wrapped at words, a pass with reward 0 explained, task and solution problems found before
any worker starts, a closed pipe that is not a failure, and bench's stored verdicts marked and shown
under the paths asked for."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import shutil
from pathlib import Path

import pytest
from cli_support import DATA, make_verdict, run_child, run_here, run_on_terminal, run_piped
from rich.console import Console

from kernelproof import api
from kernelproof.console import print_verdict
from kernelproof.verdict import FileRef, Stored

TASK = str(DATA / "tasks" / "scale_relu.py")
GOOD = str(DATA / "solutions" / "scale_relu_triton.py")
VERBS = ("eval", "bench", "audit", "results", "compare", "ceilings", "report", "certify", "verify", "keys")


@pytest.mark.parametrize("verb", [(), *[(v,) for v in VERBS], ("optimize",), ("cache",), ("cache", "clear")])
def test_help_fits_80_columns_with_its_defaults_whole_and_bare_bool_flags(verb):
    ran = run_piped(*verb, "--help", columns=80)
    assert ran.code == 0, ran
    lines = ran.out.splitlines()
    assert max(len(ln) for ln in lines) <= 80, [ln for ln in lines if len(ln) > 80]
    assert "…" not in ran.out and "<bool>" not in ran.out
    cut = [ln for ln in lines if ln.rstrip().endswith("...") and not ln.startswith("Usage:")]
    assert not cut, ran.out  # no summary cut short
    assert "Exit codes" in ran.out


def test_eval_help_shows_the_defaults_and_the_store_path_whole():
    text = run_piped("eval", "--help", columns=80).out
    assert "[default: 20.0]" in text and "[default: probe]" in text
    assert "~/.local/share/kernelproof/results.sqlite" in text
    fresh = next(ln for ln in text.splitlines() if ln.strip().startswith("--fresh"))
    assert "<" not in fresh  # a flag takes no value


def _printed(verdict, width: int = 80) -> str:
    out = io.StringIO()
    print_verdict(verdict, Console(file=out, width=width, emoji=False, color_system=None))
    return out.getvalue()


def test_eval_lines_wrap_at_words_within_80_columns():
    v = make_verdict(
        "fail",
        ("mismatch",),
        task="suite/level1/some_task_with_a_rather_long_name.py",
        solution="solutions/level1/some_task_with_a_rather_long_name_and_more.py",
    )
    text = _printed(v)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80, text
    flat = " ".join(text.split())
    assert "(triton backend, cpu)" in flat  # no word cut in two
    assert "solutions/level1/some_task_with_a_rather_long_name_and_more.py" in text  # a path whole
    assert lines[1].startswith("    ")  # a further line of the same item, indented under it


def test_a_pass_with_reward_0_says_why():
    untimed = dataclasses.replace(make_verdict("pass", baselines_ms={}), settings={"correctness_only": True})
    assert "reward 0.000 (not timed: --correctness-only)" in " ".join(_printed(untimed).split())
    slower = make_verdict("pass", candidate_ms=2.0, baselines_ms={"eager": 1.0})  # 0.5x: no speedup
    text = " ".join(_printed(slower).split())
    assert "reward 0.000 (the speedup's 95% lower bound, 0.5x, is not above 1x" in text
    faster = dataclasses.replace(
        make_verdict("pass", candidate_ms=1.0, baselines_ms={"eager": 2.0}), reward=0.69
    )
    assert re.search(r"reward 0\.690; ", _printed(faster))
    failed = make_verdict("fail", ("mismatch",))
    assert re.search(r"reward 0\.000; ", _printed(failed))  # a failure has no reward to explain


def _task(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("import torch\nclass Model(torch.nn.Module:\n    pass\n", "syntax error"),
        ("import torch\nclass M(torch.nn.Module):\n    pass\n", "defines no `Model`"),
    ],
)
def test_a_task_that_does_not_load_is_refused_before_any_worker_with_no_seed_or_flags(tmp_path, text, said):
    task = _task(tmp_path, "bad_task.py", text)
    ran = run_piped("eval", task, DATA / "solutions" / "plain_torch.py", "--device", "cpu", "--db", "")
    assert ran.code == 2, ran
    assert "task_error" in ran.out and said in ran.out
    assert not re.search(r"seed \d", ran.out) and "flag:" not in ran.out and "plain_torch:" not in ran.out
    assert "worker ready" not in ran.err and "the task must load first" in ran.out


def test_a_task_without_get_inputs_is_refused_before_any_worker():
    ran = run_piped("eval", DATA / "tasks" / "no_get_inputs.py", GOOD, "--device", "cpu", "--db", "")
    assert ran.code == 2 and "task_error" in ran.out and "get_inputs" in ran.out, ran
    assert "worker ready" not in ran.err


def test_a_solution_that_never_names_modelnew_fails_before_any_worker():
    ran = run_piped("eval", TASK, DATA / "solutions" / "no_modelnew.py", "--device", "cpu", "--db", "")
    assert ran.code == 1, ran
    assert "compile_error: the solution defines no class `ModelNew`" in " ".join(ran.out.split())
    assert "worker ready" not in ran.err and "correctness checked" not in ran.err


def test_a_closed_pipe_is_not_a_failure_a_pass_still_exits_0():
    """``kernelproof eval ... | head -0``: the reader is gone before the first line is written."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = run_child(
            "eval", TASK, GOOD, "--device", "cpu", "--db", "", "--correctness-only", stdout=write
        )
    finally:
        os.close(write)
    assert done.code == 0, done.err
    assert "Traceback" not in done.err and "BrokenPipe" not in done.err and "error:" not in done.err


def _sha256(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_bench_marks_a_stored_verdict_and_shows_the_paths_asked_for(monkeypatch, tmp_path):
    for folder, source in (("tasks", TASK), ("sols", GOOD)):
        (tmp_path / folder).mkdir()
        shutil.copy(source, tmp_path / folder / "a.py")
    served = dataclasses.replace(
        make_verdict("pass"),
        task=FileRef("suite/level1/10_silu.py", _sha256(tmp_path / "tasks" / "a.py")),
        solution=FileRef("old/level1/10_silu.py", _sha256(tmp_path / "sols" / "a.py"), "triton"),
        stored=Stored("2026-12-01T10:00:00+00:00", 3.5, {}),
    )
    monkeypatch.setattr(api, "bench", lambda pairs, options, **k: iter([served]))
    ran = run_piped("bench", tmp_path / "tasks", "--solutions", tmp_path / "sols", "--db", "", columns=80)
    assert ran.code == 0, ran
    assert "[1/1] pass  a.py (stored verdict from 2026-12-01T10:00)" in ran.out
    assert "10_silu" not in ran.out
    table = ran.out[ran.out.index("kernelproof bench") :].splitlines()
    row = next(i for i, ln in enumerate(table) if ln.startswith("a.py "))
    assert "stored" in table[row + 1]


def test_bench_prints_a_line_per_finished_item_when_piped(capsys, monkeypatch, tmp_path):
    for folder in ("suite", "sols"):
        (tmp_path / folder).mkdir()
        for name in ("a", "b"):
            (tmp_path / folder / f"{name}.py").write_text("")
    verdicts = [make_verdict("pass", task=str(tmp_path / "suite" / f"{n}.py")) for n in "ab"]
    monkeypatch.setattr(api, "bench", lambda pairs, options, **k: iter(verdicts))
    ran = run_here(capsys, "bench", tmp_path / "suite", "--solutions", tmp_path / "sols", "--db", "")
    assert ran.out.splitlines()[:2] == ["[1/2] pass  a.py", "[2/2] pass  b.py"]
    assert "\x1b" not in ran.out and "\r" not in ran.out  # no live line in a pipe


def test_eval_on_an_80_column_terminal_wraps_its_lines_at_words(tmp_path):
    task = tmp_path / "a_task_whose_file_name_is_long_enough_to_need_a_second_line.py"
    solution = tmp_path / "its_solution_with_a_name_as_long_as_the_task_or_longer_still.py"
    shutil.copy(TASK, task)
    shutil.copy(DATA / "solutions" / "no_modelnew.py", solution)
    ran = run_on_terminal("eval", str(task), str(solution), "--device", "cpu", "--db", "", cwd=tmp_path)
    status, text = ran.code, ran.out
    assert status == 1, text
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", ln).split("\r")[-1] for ln in text.splitlines()]
    assert max(len(ln) for ln in lines) <= 80, text
    assert "(torch backend, cpu)" in " ".join(text.split()) and solution.name in text  # shown here, whole


def test_a_long_reason_is_shown_whole_with_its_advice_and_its_detail_indented_within_80_columns():
    from kernelproof.verdict import Reason, ReasonCode

    why = "2.1 other tasks were runnable on average while the candidate stood still, " * 4
    message = f"the machine is too busy to time: {why}; run again, or add --correctness-only"
    detail = 'File "/var/lib/kernelproof/sandbox/worker-abc/ro/solution/sol.py", line 24, in forward ' * 2
    v = dataclasses.replace(
        make_verdict("error"), reasons=(Reason(ReasonCode.MACHINE_BUSY, message, detail),)
    )
    text = _printed(v)
    assert len(message) > 300 and "more characters" not in text
    assert "or add --correctness-only" in " ".join(text.split())  # the advice, at the end, is kept
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80, text
    at = next(i for i, ln in enumerate(lines) if "File " in ln)
    assert all(ln.startswith("        ") for ln in lines[at + 1 : at + 3]), text  # under its indent
    path = "/var/lib/kernelproof/sandbox/worker-abc/ro/solution/sol.py"
    assert sum(path in ln for ln in lines) == 2, text  # never cut, nor folded onto a line of its own


def test_a_timed_cpu_eval_prints_no_profiler_lines_on_stderr(tmp_path):
    """The parent profiles the reference on the CPU (which ATen ops it runs); torch's profiler
    printed two "USDT: ... profiler_start/stop" lines on every timed run."""
    plain = tmp_path / "plain.py"
    plain.write_text(Path(TASK).read_text().replace("class Model(", "class ModelNew("))
    ran = run_piped(
        "eval",
        TASK,
        str(plain),
        "--device",
        "cpu",
        "--db",
        "",
        "--time-budget",
        "0.5",
        "--time-when-busy",
        "--seeds-per-case",
        "1",
    )
    assert ran.code in (0, 1), ran.out + ran.err
    assert "USDT" not in ran.err and "profiler_start" not in ran.err, ran.err
