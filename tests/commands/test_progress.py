"""Progress for the long verbs (kernelproof/cli_progress.py): a live line on a terminal, a line per
finished item in a pipe, and Ctrl-C that ends a run at once with one line of what was kept.

The module's own behaviour is checked on consoles written to memory; the verbs through a
pseudo-terminal, where Ctrl-C is a real SIGINT from the terminal, as a person sends it."""

from __future__ import annotations

import io
import os
import shutil

import pytest
from cli_support import DATA, run_on_terminal
from rich.console import Console

from kernelproof import cli_progress

TASK = str(DATA / "tasks" / "scale_relu.py")
HANGS = str(DATA / "solutions" / "forward_sleeps_forever.py")


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=80, color_system=None, emoji=False), out


def test_in_a_pipe_each_finished_item_is_a_line_with_its_count_and_nothing_is_redrawn():
    console, out = _console(terminal=False)
    with cli_progress.Progress("bench", 2, console=console) as shown:
        shown.running("a.py")
        shown.finished("pass  a.py")
        shown.note("no solution for c.py")
        shown.finished(("fail", "red"), "  b.py")
    assert out.getvalue().splitlines() == ["[1/2] pass  a.py", "no solution for c.py", "[2/2] fail  b.py"]


def test_on_a_terminal_a_live_line_says_how_far_and_what_runs_then_is_erased():
    console, out = _console(terminal=True)
    with cli_progress.Progress("bench", 2, console=console) as shown:
        shown.running("level1/a.py")
        assert shown.line().startswith("bench: 0/2 done, ") and shown.line().endswith("running level1/a.py")
        shown.finished("pass  a.py")
    text = out.getvalue()
    assert "\r\x1b[2Kbench: 0/2 done, 0 s; running level1/a.py" in text
    assert "[1/2] pass  a.py" in text and "bench: 1/2 done" in text
    assert text.endswith("\r\x1b[2K")  # the live line gone when the block ends


def test_a_live_line_of_untrusted_text_is_inert_and_never_wider_than_the_terminal():
    console, out = _console(terminal=True)
    with cli_progress.Progress("bench", console=console) as shown:
        shown.running("evil\x1b]0;title\x07" + "x" * 200)
    drawn = [part for part in out.getvalue().split("\r\x1b[2K") if part]
    assert drawn and all(len(d) < 80 for d in drawn)
    assert "\x07" not in out.getvalue() and "\\x1b]0;title\\x07" in out.getvalue()


def test_compare_steps_name_which_solution_each_phase_belongs_to_in_a_pipe():
    console, out = _console(terminal=False)
    with cli_progress.Progress("compare", console=console) as shown:
        steps = cli_progress.CompareSteps(shown)
        for phase, s in (
            ("setup", 0.5),
            ("correctness_done", 2.0),
            ("setup", 2.5),
            ("correctness_done", 4.0),
        ):
            steps.phase(phase, s)
    lines = out.getvalue().splitlines()
    assert lines[0] == "compare: A: task set up (references, float64 oracle, audit, cases) (0.5 s)"
    assert lines[3] == "compare: B: correctness checked (4.0 s)"


def test_what_a_ctrl_c_keeps_is_said_by_the_innermost_block():
    with cli_progress.keeping(lambda: "outer"):
        with cli_progress.keeping(lambda: "inner"):
            assert cli_progress._kept[-1]() == "inner"
        assert cli_progress._kept[-1]() == "outer"
    assert not cli_progress._kept


# --- through a terminal ---------------------------------------------------------------------------


def _interrupted(args: list[str], ready: bytes, cwd) -> tuple[int, str]:
    """Run ``kernelproof ARGS`` on a pseudo-terminal, press Ctrl-C once ``ready`` is on screen and
    again half a second later; return its exit status and everything it wrote."""
    ran = run_on_terminal(*args, term="xterm", columns=80, cwd=cwd, interrupt_when=ready)
    return ran.code, ran.out


@pytest.mark.timeout(300)
def test_ctrl_c_ends_a_bench_whose_evaluation_never_ends_with_what_was_kept(tmp_path):
    for folder, source in (("suite", TASK), ("sols", HANGS)):
        (tmp_path / folder).mkdir()
        shutil.copy(source, tmp_path / folder / "a.py")
    db = str(tmp_path / "r.sqlite")
    suite, sols = str(tmp_path / "suite"), str(tmp_path / "sols")
    args = ["bench", suite, "--solutions", sols, "--device", "cpu", "--db", db, "--correctness-only"]
    status, text = _interrupted(args, b"bench: 0/1 done", tmp_path)  # the live line, before any verdict
    assert status == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    said = [ln for ln in text.replace("\r", "\n").splitlines() if "interrupted:" in ln]
    # the store's path as the verbs show paths: relative to where it runs (tmp_path)
    assert len(said) == 1 and said[0].endswith(
        "interrupted: 0 of 1 verdicts kept in the store r.sqlite; 1 not finished"
    )


@pytest.mark.timeout(300)
def test_ctrl_c_twice_in_eval_prints_one_line_and_no_traceback(tmp_path):
    args = ["eval", TASK, HANGS, "--device", "cpu", "--db", "", "--correctness-only"]
    status, text = _interrupted(args, b"eval: ", tmp_path)  # the live line
    assert status == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    said = [ln for ln in text.replace("\r", "\n").splitlines() if "interrupted:" in ln]
    assert len(said) == 1 and "nothing was kept" in said[0], text


def test_compare_and_audit_say_how_far_they_got_when_piped():
    from cli_support import run_piped

    good = str(DATA / "solutions" / "scale_relu_triton.py")
    ran = run_piped("compare", TASK, good, good, "--device", "cpu", "--time-budget", "0.5")
    busy = ran.code == 2 and "busy" in ran.err  # a loaded machine: compare refuses to time, as eval does
    assert ran.code in (0, 1) or busy, ran
    steps = [ln for ln in ran.err.splitlines() if ln.startswith("compare: ")]
    assert steps[0].startswith("compare: A: task set up"), steps
    # B is verified after A (the same file as A here: verified again, as B), then both are timed
    first_b = next(i for i, s in enumerate(steps) if s.startswith("compare: B: "))
    assert steps[first_b].startswith("compare: B: task set up"), steps
    assert all(s.startswith("compare: A: ") for s in steps[:first_b]), steps
    assert all(s.startswith("compare: B: ") for s in steps[first_b:]), steps
    assert busy or "B over A" in ran.out  # the answer follows A's steps and B's
    audited = run_piped("audit", TASK, "--device", "cpu")
    assert audited.out.splitlines()[0] == "[1/1] ok " + os.path.relpath(TASK), audited


def test_a_slow_correctness_phase_tells_the_cases_done_and_a_quick_one_does_not(monkeypatch):
    """Inside correctness (minutes for a large task under the interpreter) a line at most every
    CASE_EVERY_S says how many cases are done: a sign of life, never a line per case."""
    from kernelproof.evaluate import phase_progress as evaluation_progress

    told: list[tuple[str, float]] = []
    clock = [100.0]
    monkeypatch.setattr(evaluation_progress.time, "monotonic", lambda: clock[0])
    with evaluation_progress.reporting(lambda phase, s: told.append((phase, s))):
        evaluation_progress.began(100.0)
        for done in range(1, 4):  # quick cases: nothing told
            clock[0] += 1.0
            evaluation_progress.case_done(done, 32)
        assert told == []
        clock[0] += evaluation_progress.CASE_EVERY_S
        evaluation_progress.case_done(4, 32)
        clock[0] += 1.0
        evaluation_progress.case_done(5, 32)  # too soon after the last line
    assert told == [("case 4 of 32 checked", 3.0 + evaluation_progress.CASE_EVERY_S)]
    evaluation_progress.case_done(6, 32)  # outside any sink: nothing, and no error
    assert len(told) == 1


def test_the_probed_shapes_cases_are_named_apart_from_the_contracts(monkeypatch):
    """After "32/32 cases" the probed shapes' cases do not read as "case 1 of 2 checked"."""
    from kernelproof.evaluate import phase_progress as evaluation_progress

    told: list[str] = []
    clock = [100.0]
    monkeypatch.setattr(evaluation_progress.time, "monotonic", lambda: clock[0])
    with evaluation_progress.reporting(lambda phase, s: told.append(phase)):
        evaluation_progress.began(100.0)
        clock[0] += evaluation_progress.CASE_EVERY_S
        evaluation_progress.case_done(1, 2, "probed-shape case")
    assert told == ["probed-shape case 1 of 2 checked"]


def test_bench_live_line_names_the_solution_in_flight_and_the_step_it_reached():
    console, out = _console(terminal=True)
    with cli_progress.Progress("bench", 5, console=console) as shown:
        steps = cli_progress.ItemSteps(shown, lambda path: path.removeprefix("/sols/"))
        with progress_item("/sols/level1/a.py"):
            steps("worker_ready", 5.2)
        assert shown.line().endswith("; running level1/a.py: worker ready at 5 s"), shown.line()
        with progress_item("/sols/level1/b.py"):
            steps("case 3 of 16 checked", 11.0)
        assert shown.line().endswith("running level1/b.py: case 3 of 16 checked at 11 s (and 1 more)")
        steps.done("/sols/level1/b.py")
        assert shown.line().endswith("; running level1/a.py: worker ready at 5 s"), shown.line()
        steps.done("/sols/level1/a.py")
        assert "running" not in shown.line()


def progress_item(item: str):
    from kernelproof.evaluate import phase_progress as evaluation_progress

    return evaluation_progress.about(item)


def test_evaluations_in_the_pool_report_their_phases_named_by_their_solution():
    """bench's evaluations run in the pool's threads: the sink set around them still hears each
    phase, with the solution it belongs to (kernelproof/executors/local.py copies the context)."""
    from kernelproof import EvalOptions, evaluate_many
    from kernelproof.evaluate import phase_progress as evaluation_progress

    heard: list[tuple[str, str]] = []
    solution = str(DATA / "solutions" / "plain_torch.py")
    options = EvalOptions(device="cpu", db="", seed=1, correctness_only=True, seeds_per_case=1)
    with evaluation_progress.reporting(
        lambda phase, s: heard.append((evaluation_progress.current_item(), phase))
    ):
        (v,) = list(evaluate_many([(TASK, solution)], options))
    assert v.passed, v.reasons
    assert (solution, "setup") in heard and (solution, "correctness_done") in heard, heard
