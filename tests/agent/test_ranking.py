from __future__ import annotations

import dataclasses
import hashlib

from agent_fakes import make_verdict, solution

from kernelproof.agent.call_records import Candidate, Rejection
from kernelproof.agent.ranking import best, rank, score, speedup_text
from kernelproof.verdict import Speedup


def cand(cid: str, marker: str, **kw) -> Candidate:
    src = solution(marker, cid)
    return Candidate(
        cid,
        0,
        0,
        "draft",
        (),
        "",
        "",
        f"{cid}.py",
        src,
        hashlib.sha256(src.encode()).hexdigest(),
        verdict=make_verdict(src, f"{cid}.py"),
        **kw,
    )


def with_speedup(c: Candidate, median: float, ci: tuple[float, float]) -> Candidate:
    sp = {"best": Speedup("best", median, ci)}
    return Candidate(
        **{**c.__dict__, "verdict": c.verdict.__class__(**{**c.verdict.__dict__, "speedup": sp})}
    )


def test_never_selects_a_rejected_candidate_however_fast_it_claims_to_be():
    cheats = [
        cand(f"c{i}", f"CHEAT: {code}\n# SPEED: 500")
        for i, code in enumerate(
            ["stale_output", "timing_tamper", "below_physical_floor", "output_aliases_input"]
        )
    ]
    honest = cand("h", "SPEED: 1.1")
    assert best(cheats + [honest]).id == "h"
    assert best(cheats) is None


def test_a_malformed_answer_is_never_selected_even_with_a_passing_verdict_attached():
    c = cand("m", "SPEED: 9", rejection=Rejection("malformed_answer", "x"))
    assert best([c]) is None


def test_ranks_by_the_lower_confidence_bound_not_the_median():
    noisy = with_speedup(cand("noisy", "SPEED: 1"), 3.0, (0.9, 6.0))
    steady = with_speedup(cand("steady", "SPEED: 1"), 2.0, (1.9, 2.1))
    assert [c.id for c in rank([noisy, steady])] == ["steady", "noisy"]


def test_ties_keep_the_earlier_candidate():
    a, b = cand("a", "SPEED: 2.0"), cand("b", "SPEED: 2.0")
    assert best([a, b]).id == "a"


def test_score_is_none_unless_pass():
    assert score(make_verdict(solution("WRONG"), "x.py")) is None
    assert score(None) is None
    assert score(make_verdict(solution("SPEED: 2.0"), "x.py"))[1] == 2.0


def test_a_verdict_of_other_bytes_never_makes_a_candidate_the_best():
    wrong = cand("w", "WRONG")
    honest_verdict = cand("h", "SPEED: 3").verdict  # a pass judged on other bytes
    swapped = dataclasses.replace(wrong, verdict=honest_verdict)
    assert swapped.passed  # what a path-matched verdict would have claimed
    assert best([swapped]) is None


def test_without_a_speed_claim_candidates_rank_by_correctness_alone_earliest_first():
    a, b = cand("a", "SPEED: 1.1"), cand("b", "SPEED: 7")
    a, b = (dataclasses.replace(c, verdict=dataclasses.replace(c.verdict, speedup=None)) for c in (a, b))
    assert [c.id for c in rank([a, b])] == ["a", "b"]
    assert speedup_text(a) == "pass (no speed claim)"


def test_a_candidate_calling_the_reference_outside_its_kernels_is_never_chosen():
    decoy = cand("d", "SPEED: 1.12")
    decoy = dataclasses.replace(
        decoy, verdict=dataclasses.replace(decoy.verdict, flags=("reference_ops_outside_kernels",))
    )
    honest = cand("h", "SPEED: 0.02")
    assert best([decoy, honest]).id == "h"
    assert best([decoy]) is None
