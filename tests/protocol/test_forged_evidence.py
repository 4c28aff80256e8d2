"""What the candidate's worker reports is evidence, never the verdict (I10): forged replies and a
forged launch record, end to end on the CPU.

The candidate shares its process with the harness. It can write the worker's socket (a plain
descriptor) and reach the harness's CPU launch record (a closure cell). A forged reply without
the nonce of the request in flight ends the worker as protocol_violation; with the reply checks
off (a test-only switch) the same solution once passed launch accounting with no kernel of its
own, and now gains nothing: an extension launch is the solution's only where the parent built an
extension for it. A forged launch record is not a reply and cannot be told from a real one: the
verdict lists coverage as worker-reported, never as checked by the parent, and the same rule
leaves the forgery no launch of its own.
"""

from __future__ import annotations

from pathlib import Path

from kernelproof.api import evaluate
from kernelproof.evaluate.provenance import provenance_of
from kernelproof.host import process
from kernelproof.options import EvalOptions
from kernelproof.verdict import Coverage

HERE = Path(__file__).resolve().parent
SCALE_RELU = str(HERE.parent / "data" / "tasks" / "scale_relu.py")
SOLUTIONS = HERE / "solutions"


def _timed(solution: str):
    options = EvalOptions(
        device="cpu", db="", seed=3, seeds_per_case=1, time_budget_s=1.0, min_rounds=2, max_rounds=4
    )
    return evaluate(SCALE_RELU, str(SOLUTIONS / solution), options)


def test_a_forged_profile_reply_is_a_protocol_violation(monkeypatch):
    monkeypatch.setattr(process, "REPLY_CHECKS", False)  # the reply check off: the reply is taken
    taken = _timed("forged_profile_reply.py")
    # ... and gains nothing: the parent built no extension, so an "extension" launch is never the
    # solution's (kernelproof/measure/attribution.py), and the harness's own reply, left in the
    # stream behind the forged one, desynchronises the timing that follows: no pass either way
    assert not taken.passed, taken.reasons
    assert taken.coverage is None or taken.coverage.custom_launches == 0
    monkeypatch.setattr(process, "REPLY_CHECKS", True)
    v = _timed("forged_profile_reply.py")
    assert v.verdict.value == "fail" and v.codes == ["protocol_violation"], v.reasons
    assert "profile reply does not carry the nonce" in v.reasons[0].message


def test_a_forged_cpu_launch_record_is_reported_never_checked():
    """A plain PyTorch forward adds a launch to the harness's record: the count cannot tell, so the
    verdict must not present it as the parent's fact."""
    v = _timed("forged_launch_record.py")
    # the record took, and counts for nothing: the parent built no extension for the solution
    assert v.coverage is not None and v.coverage.custom_launches == 0 and "extension:" in v.coverage.note
    assert v.provenance is not None
    assert "coverage" in v.provenance.reported
    assert not any(f.startswith("coverage") for f in v.provenance.checked)
    assert any(f.startswith("plain_torch") for f in v.flags)  # the parent's own reading of the source


def test_provenance_lists_what_the_worker_reported_for_what_was_measured():
    assert provenance_of(False, None, None, False) is None  # the candidate never ran
    only_cases = provenance_of(True, None, None, False)
    assert only_cases.checked == ("correctness",) and only_cases.reported == ()
    with_coverage = provenance_of(True, None, Coverage(None), True)
    assert with_coverage.reported == ("coverage", "build.worker_compiled")
