from __future__ import annotations

from agent_fakes import make_verdict, sha, solution

from kernelproof.agent.call_records import Candidate
from kernelproof.agent.context import DeviceInfo, read_task
from kernelproof.agent.prompts import (
    MAX_HISTORY_CHARS,
    RULES,
    PromptContext,
    crossover_prompt,
    cut_middle,
    draft_prompt,
    earlier_answer,
    ideas_prompt,
    implement_prompt,
    mutate_prompt,
    refine_prompt,
)
from kernelproof.agent.sizes import sizes_tested
from kernelproof.verdict import ReasonCode

H200 = DeviceInfo("NVIDIA H200", "cuda", "sm_90", 132, 141.0, 60.0, {"bf16": 730.0}, 4.28, "measured (h200)")


def ctx(task_file, device=H200, language="triton") -> PromptContext:
    return PromptContext(read_task(task_file), device, language)


def cand(cid: str, marker: str, response: str = "") -> Candidate:
    src = solution(marker, cid)
    return Candidate(
        cid,
        0,
        0,
        "draft",
        (),
        "",
        response or f"answer {cid}",
        f"{cid}.py",
        src,
        sha(src),
        verdict=make_verdict(src, f"{cid}.py"),
    )


def test_every_reason_code_has_a_rule_or_is_marked_task_side():
    assert set(RULES) == set(ReasonCode)
    assert RULES[ReasonCode.TASK_ERROR] is None and RULES[ReasonCode.STALE_OUTPUT]


def test_system_text_states_the_rules_and_the_answer_format(task_file):
    system = draft_prompt(ctx(task_file)).system
    assert "- stale_output: Each call must compute its output from its own inputs" in system
    assert "- forbidden_construct:" in system and "degenerate_task" not in system
    assert "exactly one complete Python file in a single ```python fenced block" in system
    assert "@triton.jit" in system


def test_task_message_holds_source_contract_policy_and_device(task_file):
    text = draft_prompt(ctx(task_file)).messages[0].content
    assert "return x * 2.0 + 1.0" in text
    assert "Precision contract: fp32: float32 tensors" in text
    assert "Kernel policy: strict" in text
    assert "NVIDIA H200 (sm_90, 132 SMs, 141 GB, 60 MiB L2)" in text
    assert "bf16 730" in text and "4.28 TB/s" in text


def test_cpu_device_says_triton_runs_in_the_interpreter(task_file):
    cpu = DeviceInfo("CPU", "cpu", "cpu")
    assert "Triton interpreter" in draft_prompt(ctx(task_file, cpu)).messages[0].content


def test_the_task_message_states_the_sizes_a_candidate_is_tested_at(task_file):
    sizes = sizes_tested(str(task_file), "cuda", "auto")
    text = draft_prompt(PromptContext(read_task(task_file), H200, "triton", sizes)).messages[0].content
    assert "- the task's own: default (batch_size=64, features=96); small (batch_size=4, features=33)" in text
    assert "auto_half (batch_size=3, features=17). A candidate that fails one of them is rejected" in text


def test_without_sizes_the_task_message_still_says_other_sizes_are_tested(task_file):
    text = draft_prompt(ctx(task_file)).messages[0].content
    assert "Sizes tested: the task's own and others; derive every size from the tensors." in text


def test_same_state_gives_the_same_prompt_hash(task_file):
    a, b = draft_prompt(ctx(task_file)), draft_prompt(ctx(task_file))
    assert a.digest() == b.digest()
    assert a.digest() != draft_prompt(ctx(task_file, language="cuda")).digest()


def test_refine_replays_each_answer_then_its_feedback(task_file):
    lineage = [cand("t000s00", "COMPILE_ERROR", "first try"), cand("t001s00", "SPEED: 1.3", "second try")]
    p = refine_prompt(ctx(task_file), lineage, lineage[1])
    roles = [m.role for m in p.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert p.messages[1].content == "first try"
    assert (
        "compile_error" in p.messages[2].content
        and "Fix what the evaluation reports" in p.messages[2].content
    )
    assert "vs eager 1.30x" in p.messages[4].content and "Make it faster" in p.messages[4].content


def test_a_failed_candidate_is_pointed_back_to_the_best_verified_one(task_file):
    good, bad = cand("t000s00", "SPEED: 2"), cand("t001s00", "WRONG")
    text = mutate_prompt(ctx(task_file), bad, good).messages[0].content
    assert "The fastest verified solution so far is t000s00" in text
    assert "odd/large/1" in text


def test_ideas_prompt_lists_what_was_tried_from_the_node(task_file):
    parent = cand("t001s00", "SPEED: 2")
    tried = [cand("t003s00", "WRONG"), cand("t003s01", "SPEED: 2.2")]
    text = ideas_prompt(ctx(task_file), parent, 3, tried).messages[0].content
    assert "Propose 3 distinct optimisation ideas" in text
    assert "rejected: mismatch" in text and "verified, 2.20x" in text
    assert "```python" in text  # the parent's code is shown


def test_implement_and_crossover_show_their_inputs(task_file):
    a, b = cand("t001s00", "SPEED: 2"), cand("t001s01", "SPEED: 3")
    assert (
        "Implement this optimisation idea in a complete ModelNew:\nfuse"
        in implement_prompt(ctx(task_file), a, "fuse").messages[0].content
    )
    text = crossover_prompt(ctx(task_file), a, b).messages[0].content
    assert "Solution A (t001s00)" in text and "Solution B (t001s01)" in text


def test_a_long_earlier_answer_comes_back_as_its_file_with_a_marker(task_file):
    long = cand("t000s00", "SPEED: 1.1", "I thought hard. " * 10_000 + "```python\n...```")
    p = refine_prompt(ctx(task_file), [long], long)
    sent = p.messages[1].content
    assert sent.startswith(f"[This answer of {len(long.response)} characters is cut to the solution file")
    assert long.source.rstrip() in sent and len(sent) < MAX_HISTORY_CHARS


def test_a_long_answer_without_a_small_file_is_cut_in_the_middle_and_says_how_much(task_file):
    text = "a" * 50_000 + "b" * 50_000
    c = Candidate("t000s00", 0, 0, "draft", (), "", text, "", "", "", rejection=None)
    sent = earlier_answer(c)
    cut = len(text) - MAX_HISTORY_CHARS
    assert f"[... {cut} of this answer's {len(text)} characters cut here ...]" in sent
    assert sent.startswith("a" * 1000) and sent.endswith("b" * 1000)
    assert len(sent) < MAX_HISTORY_CHARS + 100
    assert cut_middle("short", 10, "file") == "short"


def test_a_huge_file_shown_to_mutate_is_bounded(task_file):
    big = cand("t000s00", "SPEED: 1.1")
    big = Candidate(**{**big.__dict__, "source": big.source + "# pad\n" * 20_000})
    text = mutate_prompt(ctx(task_file), big, big).messages[0].content
    assert (
        "characters cut here" in text
        and len(text) < len(draft_prompt(ctx(task_file)).messages[0].content) + 24_000
    )
