from __future__ import annotations

from agent_fakes import make_verdict, sha, solution

from kernelproof.agent.call_records import Candidate
from kernelproof.agent.context import DeviceInfo, read_task
from kernelproof.agent.prompts import PromptContext
from kernelproof.agent.strategies import SearchSettings, SearchState, make_strategy


def state(task_file, candidates=(), turn=0) -> SearchState:
    return SearchState(
        PromptContext(read_task(task_file), DeviceInfo("CPU", "cpu", "cpu")), list(candidates), turn
    )


def cand(cid: str, marker: str, parents=(), kind="draft") -> Candidate:
    src = solution(marker, cid)
    return Candidate(
        cid,
        0,
        0,
        kind,
        parents,
        "",
        f"answer {cid}",
        f"{cid}.py",
        src,
        sha(src),
        verdict=make_verdict(src, f"{cid}.py"),
    )


def test_refine_starts_with_a_draft_then_continues_one_conversation(task_file):
    s = make_strategy("refine", SearchSettings(window=2))
    first = s.plan(state(task_file))
    assert [r.kind for r in first] == ["draft"]
    history = [cand("t000s00", "WRONG"), cand("t001s00", "SPEED: 1.2"), cand("t002s00", "COMPILE_ERROR")]
    [req] = s.plan(state(task_file, history, 3))
    assert req.kind == "refine" and req.parents == ("t002s00",)
    assert [m.content for m in req.prompt.messages if m.role == "assistant"] == [
        "answer t001s00",
        "answer t002s00",
    ]


def test_best_of_n_asks_for_n_independent_drafts(task_file):
    reqs = make_strategy("best-of-n", SearchSettings(samples=5)).plan(state(task_file))
    assert [r.kind for r in reqs] == ["draft"] * 5
    assert len({r.prompt.digest() for r in reqs}) == 1


def test_tree_asks_for_ideas_then_implements_each_several_times(task_file):
    s = make_strategy("tree", SearchSettings(ideas=2, impls=3, beam=2))
    [ideas] = s.plan(state(task_file))
    assert ideas.kind == "ideas" and not ideas.wants_candidate and ideas.parents == ()
    s.take_ideas([ideas], ["1. fuse the ops\n2. bigger blocks\n3. ignored third"])
    impl = s.plan(state(task_file, turn=1))
    assert [r.idea for r in impl] == ["fuse the ops"] * 3 + ["bigger blocks"] * 3
    assert all(r.kind == "implement" for r in impl)


def test_tree_expands_the_best_verified_nodes_not_yet_expanded(task_file):
    s = make_strategy("tree", SearchSettings(beam=2))
    pool = [cand("a", "SPEED: 1.5"), cand("b", "WRONG"), cand("c", "SPEED: 3.0"), cand("d", "SPEED: 2.0")]
    reqs = s.plan(state(task_file, pool, 2))
    assert [r.parents for r in reqs] == [("c",), ("d",)]
    s.take_ideas(reqs, ["1. x", None])  # the second ideas call failed: d stays unexpanded
    s.plan(state(task_file, pool, 3))  # the implementations of c's idea
    assert [r.parents for r in s.plan(state(task_file, pool, 4))] == [("d",), ("a",)]


def test_evolve_repairs_failures_until_something_verifies(task_file):
    s = make_strategy("evolve", SearchSettings(samples=4))
    assert [r.kind for r in s.plan(state(task_file))] == ["draft"] * 4
    failures = [cand("f1", "WRONG"), cand("f2", "COMPILE_ERROR")]
    kinds = [(r.kind, r.parents) for r in s.plan(state(task_file, failures, 1))]
    assert kinds == [("mutate", ("f2",)), ("draft", ()), ("mutate", ("f1",)), ("draft", ())]


def test_evolve_breeds_only_verified_parents_and_is_deterministic_per_seed(task_file):
    pool = [cand("a", "SPEED: 1.5"), cand("b", "CHEAT: stale_output\n# SPEED: 80"), cand("c", "SPEED: 3.0")]
    settings = SearchSettings(samples=8, crossover_rate=0.5, seed=7)
    plan1 = make_strategy("evolve", settings).plan(state(task_file, pool, 5))
    plan2 = make_strategy("evolve", settings).plan(state(task_file, pool, 5))
    assert [(r.kind, r.parents) for r in plan1] == [(r.kind, r.parents) for r in plan2]
    assert {r.kind for r in plan1} == {"mutate", "crossover"}
    assert all("b" not in r.parents for r in plan1)
    assert all(set(r.parents) == {"a", "c"} for r in plan1 if r.kind == "crossover")
