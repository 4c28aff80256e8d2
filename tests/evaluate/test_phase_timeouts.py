"""Each phase has its own time limit, and a verdict that timed out names the phase that did.

An import-time infinite loop took 10 min 16 s under the single 600 s limit, with no output when
piped. Now the import has 60 s by default (--import-timeout), a case 300 s, a timing request 600 s,
the whole evaluation an hour; every step is also capped by --timeout. Piped, `eval` prints a line
per phase on stderr. The limits here are small: the assertions are on what the verdict says, not
on how long anything took.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelproof.api import evaluate
from kernelproof.errors import UsageError
from kernelproof.options import EvalOptions

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")
OPTS = EvalOptions(device="cpu", db="", seed=11, correctness_only=True, seeds_per_case=1)


def sol(name: str) -> str:
    return str(DATA / "solutions" / f"{name}.py")


def test_an_import_that_never_ends_is_cut_by_the_import_limit_and_named():
    v = evaluate(TASK, sol("import_hang"), OPTS.replace(import_timeout_s=5))
    assert v.codes == ["timeout"], v.reasons
    assert "importing the solution" in v.reasons[0].message and "--import-timeout" in v.reasons[0].message


def test_a_forward_that_never_ends_is_cut_by_the_case_limit_and_named():
    v = evaluate(TASK, sol("forward_sleeps_forever"), OPTS.replace(case_timeout_s=5))
    assert v.codes == ["timeout"], v.reasons
    message = v.reasons[0].message
    assert message.startswith("case ") and "--case-timeout" in message, message


def test_the_whole_evaluation_has_a_limit_of_its_own():
    v = evaluate(TASK, sol("slow_forward"), OPTS.replace(seeds_per_case=2, evaluation_timeout_s=12))
    assert v.codes == ["timeout"], v.reasons
    assert "the evaluation did not finish within 12 s (--evaluation-timeout)" in v.reasons[0].message


def test_every_limit_must_be_positive():
    with pytest.raises(UsageError, match="--case-timeout"):
        evaluate(TASK, sol("slow_forward"), OPTS.replace(case_timeout_s=0))


def test_piped_eval_prints_a_line_per_phase_on_stderr_and_only_the_verdict_on_stdout(tmp_path):
    from cli_support import run_piped

    args = ["eval", TASK, sol("scale_relu_triton"), "--device", "cpu", "--correctness-only"]
    done = run_piped(*args, "--seeds-per-case", "1", "--db", "")
    assert done.code == 0, done.out + done.err
    lines = [ln for ln in done.err.splitlines() if ln.startswith("kernelproof: ")]
    assert any("task set up" in ln for ln in lines) and any("correctness checked" in ln for ln in lines), (
        lines
    )
    assert "kernelproof: " not in done.out
