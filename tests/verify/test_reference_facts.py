"""A task's reference is asked its own questions (in-place writes, randomness) once per task in a
process, and every candidate of the task is served the answers (issue 48)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from kernelproof.api import evaluate
from kernelproof.evaluate import setup
from kernelproof.options import EvalOptions
from kernelproof.task import load_task
from kernelproof.verify import reference_facts
from kernelproof.verify.case_plan import build_variant

TESTS = Path(__file__).resolve().parents[1]
INPLACE_TASK = TESTS / "legit" / "tasks" / "scale_shift_inplace.py"
SOLUTION = TESTS / "data" / "solutions" / "inplace_skipped.py"
FAST = EvalOptions(device="cpu", db="", seed=11, correctness_only=True, seeds_per_case=1, timeout_s=60)


@pytest.fixture
def asked(monkeypatch) -> dict[str, int]:
    """How often setup's reference questions were computed, nothing kept from earlier tests."""
    monkeypatch.setattr(reference_facts, "_KEPT", {})
    counts = {"inplace": 0, "randomness": 0}
    for name, question in (("inplace_findings", "inplace"), ("reference_randomness", "randomness")):
        real = getattr(setup, name)

        def counted(*args, _real=real, _question=question):
            counts[_question] += 1
            return _real(*args)

        monkeypatch.setattr(setup, name, counted)
    return counts


def test_a_second_candidate_of_a_task_is_served_its_references_answers(tmp_path, asked):
    """The second evaluation runs neither question again, and its verdict carries the same finding
    (the task does not declare the in-place write its reference makes)."""
    undeclared = tmp_path / "undeclared.py"
    undeclared.write_text(INPLACE_TASK.read_text().replace('    "inplace": [0],', ""))
    first = evaluate(str(undeclared), str(SOLUTION), FAST)
    second = evaluate(str(undeclared), str(SOLUTION), FAST)
    assert asked == {"inplace": 1, "randomness": 1}, asked
    for v in (first, second):
        assert v.passed, v.reasons
        assert any(f.startswith("inplace_undeclared: ") and "argument 0" in f for f in v.flags), v.flags
    # another task's content is asked afresh
    changed = tmp_path / "changed.py"
    changed.write_text(undeclared.read_text() + "\n# another task\n")
    evaluate(str(changed), str(SOLUTION), FAST)
    assert asked == {"inplace": 2, "randomness": 2}, asked


def test_candidates_arriving_together_wait_for_one_answer(monkeypatch):
    monkeypatch.setattr(reference_facts, "_KEPT", {})
    task = load_task(str(INPLACE_TASK))
    contexts = [build_variant(task, "default", torch.device("cpu"), "train", 3 + i) for i in range(4)]
    computed: list[int] = []

    def answer(i: int) -> str:
        computed.append(i)
        time.sleep(0.05)  # still computing when the others arrive
        return f"answer {i}"

    start = threading.Barrier(len(contexts))
    got: list[str | None] = [None] * len(contexts)

    def candidate(i: int) -> None:
        start.wait()
        got[i] = reference_facts.once("q", task, contexts[i], lambda: answer(i))

    threads = [threading.Thread(target=candidate, args=(i,)) for i in range(len(contexts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(computed) == 1 and got == [f"answer {computed[0]}"] * len(contexts)
    assert len(reference_facts._IN_FLIGHT) == 0


def test_an_answer_that_raised_is_not_kept(monkeypatch):
    monkeypatch.setattr(reference_facts, "_KEPT", {})
    task = load_task(str(INPLACE_TASK))
    ctx = build_variant(task, "default", torch.device("cpu"), "train", 3)

    def out_of_memory() -> str:
        raise torch.OutOfMemoryError("no room")

    with pytest.raises(torch.OutOfMemoryError):
        reference_facts.once("q", task, ctx, out_of_memory)
    assert reference_facts.once("q", task, ctx, lambda: "asked again") == "asked again"
    other_mode = build_variant(task, "default", torch.device("cpu"), "eval", 3)
    assert reference_facts.once("q", task, other_mode, lambda: "eval's own") == "eval's own"
