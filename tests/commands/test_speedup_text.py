"""One speedup story: the text says the speedup is the median of paired per-round ratios, shows
those rounds next to the medians, and says so when the medians over all calls tell another story;
the JSON carries every round's ratio."""

from __future__ import annotations

import statistics
import sys

from cli_support import make_verdict
from rich.console import Console

from kernelproof.console import print_verdict
from kernelproof.measure.stats import paired_speedup

# The shape of the README example that confused a reader (issue 19): the candidate 41.384 ms and
# eager 3.137 ms over all calls, yet a speedup of 0.00574x, because the candidate was slow in most
# rounds and fast in the rest (its fast calls make its overall median small).
ROUNDS = (0.00307, 0.00574, 0.0055, 0.207, 0.18)


def text_of(verdict) -> str:
    console = Console(width=400, file=sys.stdout, record=True, force_terminal=False)
    with console.capture() as captured:
        print_verdict(verdict, console)
    return captured.get()


def test_the_speedup_line_says_what_statistic_it_is():
    v = make_verdict(candidate_ms=41.384, baselines_ms={"eager": 3.137}, round_ratios={"eager": ROUNDS})
    text = text_of(v)
    assert "candidate: 41.384 ms median of 25 calls" in text and "eager: 3.137 ms median of 25 calls" in text
    assert "eager / candidate, per round: 0.00307x 0.00574x 0.0055x 0.207x 0.18x" in text
    assert (
        "speedup over eager 0.00574x [0.00307, 0.207], median of 5 paired rounds"
        " (each round: eager's mean / the candidate's mean of its calls; 95% CI by bootstrap over rounds)"
    ) in text
    assert "speedup (median, 95% CI)" not in text


def test_when_the_medians_disagree_with_the_rounds_the_text_says_so():
    rounds = (0.01, 0.011, 0.012, 0.013, 0.014)
    v = make_verdict(candidate_ms=41.384, baselines_ms={"eager": 3.137}, round_ratios={"eager": rounds})
    assert "the medians over all calls give 0.0758x, outside that interval: the rounds disagree" in text_of(v)
    agree = make_verdict(
        candidate_ms=2.0, baselines_ms={"eager": 1.0}, round_ratios={"eager": (0.45, 0.5, 0.55)}
    )
    assert "the rounds disagree" not in text_of(agree)


def test_many_rounds_are_summarised_and_best_is_shown_beside_two_baselines():
    eager = tuple(0.5 + 0.01 * i for i in range(20))
    compiled = tuple(1.5 + 0.01 * i for i in range(20))
    v = make_verdict(
        candidate_ms=2.0,
        baselines_ms={"eager": 1.0, "compile:default": 3.0},
        round_ratios={"eager": eager, "compile:default": compiled},
    )
    text = text_of(v)
    assert "eager / candidate, per round: 0.5x to 0.69x over 20 rounds (middle half 0.55x to 0.65x)" in text
    assert text.index("speedup over eager") < text.index("speedup over compile:default")  # as asked
    assert "speedup over the best baseline (the faster one in each round)" in text
    assert "each round: the faster baseline's mean / the candidate's mean of its calls" in text


def test_one_baseline_has_no_separate_best_line():
    assert "best baseline" not in text_of(make_verdict(baselines_ms={"eager": 1.0}))


def test_the_json_carries_every_rounds_ratio_and_the_speedup_is_their_median():
    s = paired_speedup([3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 3.0, 6.0], "eager")
    assert s.round_ratios == (3.0, 1.5, 1.0, 0.5)
    assert s.median == statistics.median(s.round_ratios)
    v = make_verdict(candidate_ms=2.0, baselines_ms={"eager": 1.0}, round_ratios={"eager": ROUNDS})
    assert v.to_json()["speedup"]["eager"]["round_ratios"] == list(ROUNDS)
    too_few = paired_speedup([1.0, 1.0], [2.0, 4.0], "eager")
    assert too_few.round_ratios == (0.5, 0.25) and too_few.ci95 is None


def test_a_rejection_where_nothing_ran_prints_no_case_line():
    nothing = make_verdict("fail", ("compile_error",), cases_run=0)
    assert "cases:" not in text_of(nothing)
    ran = make_verdict("fail", ("mismatch",), cases_run=4)
    assert "cases: 0/4 passed" in text_of(ran)


def test_on_the_cpu_the_text_gives_the_launch_count_and_the_aten_ops_outside_it():
    import dataclasses

    from kernelproof.verdict import Coverage

    cov = Coverage(None, (), "strict", "", custom_launches=1, aten_outside=("aten::mul", "aten::add"))
    v = dataclasses.replace(make_verdict(candidate_ms=2.0, baselines_ms={"eager": 1.0}), coverage=cov)
    text = text_of(v)
    assert (
        "kernel launches: 1 of the solution's per forward; ATen ops outside them: aten::mul, aten::add"
        in text
    )
    assert "kernel coverage" not in text
