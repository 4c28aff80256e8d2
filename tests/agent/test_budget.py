from __future__ import annotations

import pytest

from kernelproof.agent.agent_errors import ConfigError
from kernelproof.agent.budget import Budget, Limits, Price, parse_price, price_for


def test_a_call_is_granted_a_smaller_output_cap_to_fit_the_token_budget():
    b = Budget(Limits(max_tokens=3000), None)
    grant = b.reserve_call(worst_input_tokens=1000, max_output_tokens=8000, min_output_tokens=500)
    assert grant.output_tokens == 2000
    assert b.reserve_call(100, 8000, 500) is None  # all 3000 tokens are held by the first call


def test_settling_charges_the_actual_use_and_frees_the_rest():
    b = Budget(Limits(max_tokens=3000), None)
    grant = b.reserve_call(1000, 2000, 100)
    b.settle_call(grant, input_tokens=400, output_tokens=100)
    assert b.tokens == 500
    assert b.reserve_call(100, 8000, 100).output_tokens == 2400


def test_the_dollar_budget_caps_output_at_the_models_price():
    b = Budget(Limits(max_dollars=0.01), Price(1.0, 10.0))
    grant = b.reserve_call(worst_input_tokens=2000, max_output_tokens=10**6, min_output_tokens=1)
    assert grant.output_tokens == 799  # (0.01 - 0.002) / 10e-6, rounded down
    assert grant.dollars <= 0.01
    assert b.reserve_call(1, 10**6, 1) is None


def test_a_dollar_budget_without_a_known_price_is_refused():
    with pytest.raises(ConfigError, match="--price"):
        Budget(Limits(max_dollars=1.0), None)


def test_evaluations_reserve_a_candidate_and_their_time_bound():
    b = Budget(Limits(max_candidates=2, max_gpu_seconds=100), None)
    g1 = b.reserve_eval(60)
    assert b.reserve_eval(60) is None  # 120 s would not fit
    b.settle_eval(g1, 5.0)
    g2 = b.reserve_eval(60)
    assert g2 is not None and b.reserve_eval(1) is None  # two candidates held or spent
    b.release_eval(g2)
    assert b.candidates == 1 and b.gpu_seconds == 5.0 and b.within_limits()


def test_exhausted_names_the_limit_that_leaves_no_room():
    b = Budget(Limits(max_candidates=1), None)
    assert b.exhausted(100, 10) is None
    b.charge_eval(1.0)
    assert b.exhausted(100, 10).limit == "max_candidates"
    assert Budget(Limits(max_gpu_seconds=5), None).exhausted(100, 10).limit == "max_gpu_seconds"
    assert Budget(Limits(max_tokens=50), None).exhausted(100, 10).limit == "max_tokens"
    assert Budget(Limits(max_calls=0), None).exhausted(100, 10).limit == "max_calls"


def test_a_refused_call_says_which_budget_and_the_figures():
    b = Budget(Limits(max_dollars=0.5), Price(1.0, 10.0))
    b.charge_call(10_000, 48_000, 0.49)
    assert b.reserve_call(worst_input_tokens=2000, max_output_tokens=16384, min_output_tokens=1024) is None
    assert b.refused.limit == "max_dollars"
    assert b.refused.detail == (
        "the next call could cost $0.0122 (2000 input + 1024 output tokens at least, at $1/$10 per Mtok), "
        "and $0.0100 of the $0.5 is left ($0.4900 spent, $0.0000 held)"
    )
    t = Budget(Limits(max_tokens=3000), None)
    assert t.reserve_call(2500, 8000, 1000) is None
    assert "2500 input tokens" in t.refused.detail and "3000 of the 3000 tokens are left" in t.refused.detail


def test_calls_are_a_budget_of_their_own_and_a_failed_call_counts():
    b = Budget(Limits(max_calls=2), None)
    g1 = b.reserve_call(10, 100, 10)
    g2 = b.reserve_call(10, 100, 10)
    assert b.reserve_call(10, 100, 10) is None and b.refused.limit == "max_calls"
    b.settle_call(g1, 5, 5)
    b.settle_failed_call(g2)
    assert b.calls == 2 and b.tokens == 10 and b.within_limits()
    assert b.exhausted(10, 0).detail == "2 of the 2 calls allowed are made"


def test_a_repeat_counts_as_a_candidate_without_an_evaluation():
    b = Budget(Limits(max_candidates=2), None)
    b.settle_eval(b.reserve_eval(1.0), 1.0)
    b.settle_repeat(b.reserve_eval(1.0))
    assert b.candidates == 1 and b.repeats == 1 and b.gpu_seconds == 1.0
    assert b.reserve_eval(1.0) is None
    assert (
        b.refused.detail
        == "2 of the 2 candidates allowed are counted (1 evaluated, 1 repeats of an earlier answer)"
    )


def test_use_reported_beyond_the_reservation_is_charged_and_shows_as_an_overrun():
    b = Budget(Limits(max_dollars=0.5), Price(0.0, 100.0))
    grant = b.reserve_call(worst_input_tokens=100, max_output_tokens=1000, min_output_tokens=10)
    assert grant.output_tokens == 1000 and grant.dollars == 0.1
    cost = b.settle_call(grant, input_tokens=100, output_tokens=9000)  # the provider reports 9x the cap
    assert cost == 0.9 and b.dollars == 0.9
    over = b.overruns()
    assert [(o.limit, o.spent, o.allowed) for o in over] == [("max_dollars", 0.9, 0.5)]
    assert not b.within_limits()


def test_prices_match_the_longest_model_prefix_and_can_be_overridden():
    assert price_for("gpt-5-mini-2025-08-07") == Price(0.25, 2.0)
    assert price_for("gpt-5") == Price(1.25, 10.0)
    assert price_for("anthropic/claude-sonnet-4.5") == Price(3.0, 15.0)
    assert price_for("Qwen/Qwen3-32B") is None
    assert price_for("gpt-5", Price(0, 0)) == Price(0, 0)
    assert parse_price("0.5,2") == Price(0.5, 2.0)
    with pytest.raises(ConfigError):
        parse_price("free")


def test_a_refusal_names_its_limit():
    b = Budget(Limits(max_tokens=100, max_candidates=0), None)
    assert b.reserve_call(90, 50, 20) is None and b.refused.limit == "max_tokens"
    assert b.reserve_eval(1) is None and b.refused.limit == "max_candidates"
