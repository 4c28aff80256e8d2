"""Scores: fast_p as KernelBench defines it, geometric means, degenerate tasks, ranking."""

from __future__ import annotations

import pytest

from kernelproof.report.scores import (
    baselines_of,
    fast_p,
    fast_p_note,
    format_speedup,
    geomean_speedup,
    results_from,
    score,
    summarize,
)
from kernelproof.verdict import Outcome, ReasonCode


def _results(make_verdict, *specs):
    """specs: (task, outcome, eager speedup or None)."""
    docs = []
    for i, (task, outcome, s) in enumerate(specs):
        codes = () if outcome is Outcome.PASS else (ReasonCode.MISMATCH,)
        speedups = {"eager": s} if s is not None else {}
        docs.append(make_verdict(task, f"sol{i}.py", outcome, speedups=speedups, codes=codes).to_json())
    return results_from(docs)


def test_fast_p_counts_correct_and_strictly_faster_over_all_tasks(make_verdict):
    results = _results(
        make_verdict,
        ("a", Outcome.PASS, 2.0),
        ("b", Outcome.PASS, 1.0),
        ("c", Outcome.FAIL, None),
        ("d", Outcome.PASS, 0.5),
    )
    assert fast_p(results, 0.0) == 0.75  # fast_0 is the correctness rate
    assert fast_p(results, 1.0) == 0.25  # 1.0 is not strictly above 1.0
    assert fast_p(results, 0.5) == 0.5
    assert fast_p(results, 2.0) == 0.0


def test_untimed_passing_result_is_correct_but_never_fast(make_verdict):
    results = _results(make_verdict, ("a", Outcome.PASS, None), ("b", Outcome.PASS, 3.0))
    assert fast_p(results, 0.0) == 0.5
    sc = score(results, "eager")
    assert (sc.tasks, sc.correct, sc.timed) == (2, 2, 1)


def test_each_task_is_scored_by_its_best_solution(make_verdict):
    results = _results(
        make_verdict, ("a", Outcome.FAIL, None), ("a", Outcome.PASS, 1.5), ("a", Outcome.PASS, 3.0)
    )
    assert fast_p(results, 2.0) == 1.0
    assert geomean_speedup(results) == pytest.approx(3.0)


def test_geomean_is_over_tasks_with_a_timed_passing_solution(make_verdict):
    results = _results(
        make_verdict, ("a", Outcome.PASS, 4.0), ("b", Outcome.PASS, 0.25), ("c", Outcome.FAIL, None)
    )
    assert geomean_speedup(results) == pytest.approx(1.0)


def test_degenerate_tasks_are_left_out_of_scores(make_verdict):
    docs = [
        make_verdict("a", "s1.py", speedups={"eager": 2.0}).to_json(),
        make_verdict("bad", "s2.py", Outcome.ERROR, codes=(ReasonCode.DEGENERATE_TASK,)).to_json(),
        make_verdict("bad", "s3.py", speedups={"eager": 5.0}).to_json(),
    ]
    results = results_from(docs)
    assert fast_p(results, 1.0) == 1.0
    summary = summarize(docs)
    assert len(summary.degenerate) == 1 and summary.scores[0].tasks == 1


def test_no_scored_task_gives_no_figure(make_verdict):
    assert fast_p([], 1.0) is None
    assert geomean_speedup([]) is None


def test_baselines_in_report_order(suite_docs):
    assert baselines_of(results_from(suite_docs)) == ["eager", "compile:default", "best"]


def test_fast_p_against_compile_and_best(suite_docs):
    summary = summarize(suite_docs)
    by_name = {s.baseline: dict(s.fast_p) for s in summary.scores}
    assert by_name["eager"][1.0] == pytest.approx(1 / 3)
    assert by_name["compile:default"][1.0] == pytest.approx(1 / 3)
    assert by_name["compile:default"][0.8] == pytest.approx(1 / 3)
    assert by_name["eager"][0.8] == pytest.approx(2 / 3)


def test_leaderboard_ranks_passes_by_speedup_then_failures(suite_docs):
    summary = summarize(suite_docs)
    relu = next(rs for rs in summary.tasks.values() if rs[0].task.endswith("relu.py"))
    assert [r.solution for r in relu] == ["solutions/relu_a.py", "solutions/relu_b.py", "solutions/relu_c.py"]


def test_h200_ceilings_are_matched_from_the_verdicts_device(suite_docs, make_verdict):
    assert summarize(suite_docs).ceilings["copy_bandwidth_TBps"] == pytest.approx(4.28)
    cpu = [make_verdict(device="cpu").to_json()]
    assert summarize(cpu).ceilings is None


def test_speedups_print_with_their_interval():
    from kernelproof.report.scores import Figure

    assert format_speedup(Figure(2.3456, (2.2, 2.5))) == "2.35x [2.20, 2.50]"
    assert format_speedup(Figure(None, None, "not timed")) == "—"


def test_fast_p_leaves_out_a_verdict_whose_speed_is_not_a_claim_and_says_so(make_verdict):

    results = _results(make_verdict, ("a", Outcome.PASS, 2.0), ("b", Outcome.PASS, 3.0))
    assert fast_p(results, 1.0) == 1.0 and fast_p_note(results) is None
    docs = [make_verdict("a", "sol0.py", Outcome.PASS, speedups={"eager": 2.0}).to_json()]
    interpreted = make_verdict("b", "sol1.py", Outcome.PASS, speedups={"eager": 3.0}).to_json()
    interpreted["claims"] = {"speed": False, "speed_withheld": "triton_interpreter"}
    results = results_from(docs + [interpreted])
    assert fast_p(results, 1.0) == 1.0  # task b is left out of the denominator, not counted slow
    assert geomean_speedup(results) == pytest.approx(2.0)
    assert "leaves out 1 verdict" in fast_p_note(results)


def test_fast_0_is_not_zero_for_tasks_solved_at_a_speed_that_is_no_claim(make_verdict):
    """Three tasks solved by interpreted kernels (untimed) beside failures of the same tasks: the
    tasks are solved at a speed unknown, left out of fast_p, never counted unsolved."""
    docs = []
    for task in ("a", "b", "c"):
        solved = make_verdict(task, f"{task}_triton.py", Outcome.PASS, speedups={}).to_json()
        solved["claims"] = {"speed": False, "speed_withheld": "triton_interpreter"}
        failed = make_verdict(task, f"{task}_wrong.py", Outcome.FAIL, codes=(ReasonCode.MISMATCH,)).to_json()
        docs += [solved, failed]
    timed = make_verdict("d", "d_torch.py", Outcome.PASS, speedups={"eager": 1.5}).to_json()
    results = results_from(docs + [timed])
    assert fast_p(results, 0.0) == 1.0  # task d, the one whose speed is a claim
    assert fast_p(results_from(docs), 0.0) is None  # no task to score: "-", not 0 %
    assert "leaves out 6 verdicts" in fast_p_note(results_from(docs))


def test_a_correctness_only_pass_claims_no_speed(make_verdict):
    doc = make_verdict("a", "a.py", Outcome.PASS, speedups={}).to_json()
    doc["settings"]["correctness_only"] = True
    (result,) = results_from([doc])
    assert not result.speed_claimed and fast_p([result], 0.0) is None
