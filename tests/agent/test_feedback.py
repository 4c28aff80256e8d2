from __future__ import annotations

from agent_fakes import make_verdict, solution

from kernelproof.agent.call_records import Candidate, Rejection
from kernelproof.agent.feedback import describe_candidate, describe_verdict, trim_log


def candidate(marker: str, **kw) -> Candidate:
    src = solution(marker)
    fields = dict(
        id="t001s00",
        turn=1,
        sample=0,
        kind="draft",
        parents=(),
        idea="",
        response="",
        path="c.py",
        source=src,
        source_sha256="x",
        verdict=make_verdict(src, "c.py"),
    )
    fields.update(kw)
    return Candidate(**fields)


def test_compile_errors_are_trimmed_to_the_error_lines():
    text = describe_verdict(make_verdict(solution("COMPILE_ERROR"), "c.py"))
    assert 'identifier "blockIdx_x" is undefined' in text
    assert "int i = blockIdx_x * 256;" in text  # the source line the compiler quoted
    assert "building step 3" not in text and "note 30" not in text


def test_correctness_failures_name_the_case_and_the_error_size():
    text = describe_verdict(make_verdict(solution("WRONG"), "c.py"))
    assert "1/3 cases passed" in text
    assert "case odd/large/1 (shape odd, large inputs): mismatch" in text
    assert "normwise error 2.50e-02 vs tolerance 1.00e-06" in text
    assert "small/normal/0" not in text  # passing cases are not listed


def test_a_pass_reports_times_speedups_with_ci_per_baseline_sol_and_coverage():
    src = solution("SPEED: 2.0\n# SOL: 0.42")
    text = describe_verdict(make_verdict(src, "c.py"))
    assert text.startswith("PASS")
    assert "yours 0.5 ms median" in text and "eager 1 ms" in text
    assert "vs eager 2.00x [95% CI 1.94-2.06]" in text
    assert "vs best 2.00x" in text
    assert "Speed-of-light: 42%" in text
    assert "Kernel coverage: 95%" in text
    assert "add_kernel [solution] 0.8 ms" in text


def test_a_cheat_gets_its_reason_code_and_evidence():
    text = describe_verdict(make_verdict(solution("CHEAT: timing_tamper\n# SPEED: 90"), "c.py"))
    assert "reason code timing_tamper:" in text and "\nRejected as timing_tamper.\n" in text
    assert "caught in timed call 3" in text
    assert "90" not in text


def test_a_rejected_answer_says_it_was_not_evaluated():
    c = candidate(
        "SPEED: 2", verdict=None, rejection=Rejection("malformed_answer", "No code.", "finish_reason=stop")
    )
    assert describe_candidate(c).startswith("Candidate t001s00: not evaluated (malformed_answer). No code.")


def test_a_duplicate_says_which_candidate_it_repeats():
    assert "(identical to t000s00, not evaluated again)" in describe_candidate(
        candidate("SPEED: 2", duplicate_of="t000s00")
    )


def test_traceback_keeps_the_last_frames_and_the_exception():
    tb = ["Traceback (most recent call last):"] + [
        f'  File "f{i}.py", line {i}, in g\n    call()' for i in range(50)
    ]
    tb.append("RuntimeError: CUDA error: an illegal memory access was encountered")
    text = trim_log("\n".join(tb), max_lines=10)
    assert text.splitlines()[0].startswith("Traceback")
    assert text.splitlines()[-1].startswith("RuntimeError: CUDA error")
    assert "outer frames omitted" in text and len(text.splitlines()) == 10


def test_short_logs_are_kept_whole():
    assert trim_log("error: x\nline 2\n") == "error: x\nline 2"


def test_a_log_without_error_lines_keeps_its_head_and_tail():
    text = trim_log("\n".join(f"line {i}" for i in range(200)), max_lines=20)
    assert "line 0" in text and "line 199" in text and "lines omitted" in text


def test_how_the_answer_was_read_follows_the_verdict():
    note = "Your answer held 2 code blocks. The solution file was taken from block 2 (python, lines 7-20)."
    text = describe_candidate(candidate("SPEED: 2", note=note))
    assert text.startswith("Candidate t001s00: PASS") and text.endswith("\n" + note)
    rejected = candidate("x", verdict=None, rejection=Rejection("malformed_answer", "No code."), note=note)
    assert describe_candidate(rejected).endswith(note)
