from __future__ import annotations

import json

import pytest

from kernelproof.agent import AgentOptions, Limits, Price, SearchSettings
from kernelproof.agent.agent_errors import ConfigError
from kernelproof.options import EvalOptions


def test_options_survive_the_json_round_trip_a_resumed_run_relies_on():
    opts = AgentOptions(
        strategy="tree",
        limits=Limits(max_candidates=9, max_dollars=2.5),
        search=SearchSettings(ideas=5, seed=3),
        eval=EvalOptions(device="cpu", baselines=("eager", "compile:default")),
        price=Price(1, 2),
        sol_target=0.8,
    )
    back = AgentOptions.from_json(json.loads(json.dumps(opts.to_json())))
    assert back == opts


@pytest.mark.parametrize(
    "fields",
    [{"strategy": "greedy"}, {"language": "cobol"}, {"min_output_tokens": 10, "max_output_tokens": 5}],
)
def test_bad_options_are_refused_with_a_sentence(fields):
    with pytest.raises(ConfigError):
        AgentOptions(**fields)


def test_candidates_are_evaluated_with_the_probed_shapes_in_the_contract_by_default():
    from kernelproof.agent.agent_options import evaluation

    assert AgentOptions().eval.shape_variants == "auto"  # a shape-specialised candidate is never the best
    assert evaluation(device="cpu") == EvalOptions(device="cpu", shape_variants="auto")
    assert evaluation(shape_variants="probe").shape_variants == "probe"
    back = AgentOptions.from_json(json.loads(json.dumps(AgentOptions().to_json())))
    assert back.eval.shape_variants == "auto"
