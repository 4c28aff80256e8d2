"""Exit codes: one table for every verb (kernelproof/exits.py), in --help and the docs, a test per code.

0 and 1 and 2 for a missing file, a bad option or a broken task are run end to end in
tests/commands/test_cli.py; 4 (a provider that keeps failing) in tests/agent/test_cli.py. Here: the table
itself, 3 from an internal_error verdict, an unexpected exception and a store that cannot be
opened (2, like any bad input), the worst code of a verb over many items, and errors on stderr in one wording.
"""

from __future__ import annotations

import re

import pytest
from cli_support import DATA, REPO, make_verdict, run_here, run_piped

from kernelproof import api, exits

TASK = str(DATA / "tasks" / "scale_relu.py")
GOOD = str(DATA / "solutions" / "scale_relu_triton.py")
VERBS = (
    "eval",
    "bench",
    "kernelbench",
    "audit",
    "results",
    "compare",
    "ceilings",
    "report",
    "certify",
    "verify",
    "keys",
    "optimize",
    "serve",
)


def test_the_table_is_in_every_verbs_help(capsys):
    for verb in (None, *VERBS):
        ran = run_here(capsys, *([verb] if verb else []), "--help")
        text = " ".join((ran.out + ran.err).split())
        assert ran.code == 0, (verb, ran.err)
        for code, meaning in exits.TABLE:
            assert f"{code} {' '.join(meaning.split()[:3])}" in text, (verb, code)


def test_the_readme_and_the_architecture_page_state_the_same_codes():
    readme = " ".join((REPO / "README.md").read_text().split())
    for code, meaning in exits.TABLE:
        assert f"| {code} | {meaning} |" in readme, code
    page = (REPO / "docs" / "architecture.md").read_text()
    assert re.search(
        r"0 pass, 1 rejected.*2 a bad task or usage, 3 kernelproof's own failure", " ".join(page.split())
    )


@pytest.mark.parametrize(
    ("outcome", "codes", "exit_code"),
    [
        ("pass", (), 0),
        ("fail", ("mismatch",), 1),
        ("error", ("task_error",), 2),
        ("error", ("degenerate_task",), 2),
        ("error", ("too_large",), 2),
        ("error", ("internal_error",), 3),
        ("error", ("missing_result",), 3),  # a Ray worker lost for good: no judgement, not the task's fault
    ],
)
def test_a_verdict_maps_to_its_exit_code(outcome, codes, exit_code):
    assert exits.of_verdict(make_verdict(outcome, codes)) == exit_code
    assert exits.of_document(make_verdict(outcome, codes).to_json()) == exit_code


def test_an_internal_error_verdict_exits_3_not_2(capsys, monkeypatch):
    broken = api.internal_error_verdict(TASK, GOOD, "cpu", RuntimeError("a harness bug"))
    monkeypatch.setattr(api, "evaluate", lambda *a, **k: broken)
    ran = run_here(capsys, "eval", TASK, GOOD, "--device", "cpu", "--db", "")
    assert ran.code == 3
    assert "internal_error: kernelproof failed: RuntimeError: a harness bug" in ran.out


def test_an_unexpected_exception_exits_3_with_its_traceback_on_stderr(capsys, monkeypatch):
    def boom(*a, **k):
        raise ZeroDivisionError("nobody expected this")

    monkeypatch.setattr(api, "evaluate", boom)
    ran = run_here(capsys, "eval", TASK, GOOD, "--device", "cpu", "--db", "")
    assert ran.code == 3 and ran.out == ""
    assert "ZeroDivisionError: nobody expected this" in ran.err
    assert "error: kernelproof failed (internal error)" in ran.err


def test_a_store_that_cannot_be_opened_exits_2(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    ran = run_here(capsys, "eval", TASK, GOOD, "--device", "cpu", "--db", str(blocker / "results.sqlite"))
    assert ran.code == 2 and ran.out == ""
    assert ran.err.startswith("error: the folder ") and ran.err.count("\n") == 1
    assert f"{blocker} of the results database" in ran.err and "is not a folder" in ran.err


def test_usage_errors_go_to_stderr_in_one_wording_whatever_the_verb(capsys, tmp_path):
    cases = [
        ("eval", "nope.py", GOOD),
        ("eval", TASK, GOOD, "--no-such-flag"),
        ("bench", str(tmp_path / "none"), "--solutions", str(tmp_path)),
        ("audit", str(tmp_path / "none.py")),
        ("results", "--verdict", "bogus"),
        ("compare", TASK, GOOD, str(tmp_path / "none.py")),
        ("certify", TASK, str(tmp_path / "none.py")),
        ("verify", str(tmp_path / "none.json")),
        ("report", str(tmp_path / "absent.json"), "--md", str(tmp_path / "r.md")),
    ]
    for args in cases:
        ran = run_here(capsys, *args)
        assert ran.code == 2, (args, ran)
        assert ran.out == "", (args, ran.out)
        assert ran.err.startswith("error: "), (args, ran.err)


def _bench_of(monkeypatch, tmp_path, verdicts):
    for folder in ("suite", "sols"):
        (tmp_path / folder).mkdir(exist_ok=True)
        for name in ("a", "b"):
            (tmp_path / folder / f"{name}.py").write_text("")
    monkeypatch.setattr(api, "bench", lambda pairs, options, **k: iter(verdicts))
    return ["bench", str(tmp_path / "suite"), "--solutions", str(tmp_path / "sols"), "--db", ""]


@pytest.mark.parametrize(
    ("outcomes", "exit_code"),
    [
        ((("pass", ()), ("pass", ())), 0),
        ((("pass", ()), ("fail", ("mismatch",))), 1),
        ((("fail", ("mismatch",)), ("error", ("task_error",))), 2),
        ((("error", ("task_error",)), ("error", ("internal_error",))), 3),
    ],
)
def test_bench_exits_with_the_worst_code_among_its_verdicts(
    capsys, monkeypatch, tmp_path, outcomes, exit_code
):
    verdicts = [
        make_verdict(o, c, task=str(tmp_path / "suite" / f"{n}.py")) for n, (o, c) in zip("ab", outcomes)
    ]
    args = _bench_of(monkeypatch, tmp_path, verdicts)
    assert run_here(capsys, *args, "--correctness-only").code == exit_code


def test_bench_exit_zero_is_for_scripts_that_only_want_the_table(capsys, monkeypatch, tmp_path):
    verdicts = [make_verdict("error", ("internal_error",), task=str(tmp_path / "suite" / "a.py"))]
    args = _bench_of(monkeypatch, tmp_path, verdicts)
    ran = run_here(capsys, *args, "--correctness-only", "--exit-zero")
    assert ran.code == 0 and "kernelproof bench" in ran.out
    assert run_here(capsys, "bench", str(tmp_path / "none"), "--solutions", ".", "--exit-zero").code == 2


def test_bench_on_a_real_suite_with_a_rejected_solution_exits_1(tmp_path):
    import shutil

    for name, sol in (("good", GOOD), ("bad", DATA / "solutions" / "wrong_shape.py")):
        (tmp_path / "suite").mkdir(exist_ok=True)
        (tmp_path / "sols").mkdir(exist_ok=True)
        shutil.copy(TASK, tmp_path / "suite" / f"{name}.py")
        shutil.copy(sol, tmp_path / "sols" / f"{name}.py")
    args = ["bench", "suite", "--solutions", "sols", "--device", "cpu", "--db", "", "--correctness-only"]
    ran = run_piped(*args, "--seeds-per-case", "1", cwd=tmp_path)
    assert ran.code == 1, ran.out + ran.err
    assert "correct: 1/2" in ran.out and "wrong_shape" in ran.out


def test_audit_of_a_folder_exits_with_its_worst_task(capsys, tmp_path):
    import shutil

    shutil.copy(TASK, tmp_path / "fine.py")
    (tmp_path / "broken.py").write_text("import torch\n")  # no Model: does not load
    ran = run_here(capsys, "audit", str(tmp_path), "--device", "cpu", "--seed", "1")
    assert ran.code == 2, ran.out + ran.err
    assert re.search(r"ERROR \S*broken\.py: ", ran.out), ran.out
    assert "2 tasks audited, 0 degenerate, 1 did not load" in " ".join(ran.out.split())


def test_certify_of_a_rejected_solution_exits_1(tmp_path):
    key = tmp_path / "key.pem"
    ran = run_piped(
        "certify",
        TASK,
        str(DATA / "solutions" / "wrong_shape.py"),
        "--device",
        "cpu",
        "--key",
        str(key),
        "--out",
        str(tmp_path / "c.json"),
        "--time-budget",
        "0.5",
    )
    assert ran.code == 1, ran.out + ran.err
    assert (tmp_path / "c.json").exists()  # the certificate is written: a claim of failure
    assert "wrong_shape" in ran.out


def test_the_exit_codes_of_the_many_item_verbs_are_their_worst():
    assert exits.worst([0, 1, 0]) == 1 and exits.worst([1, 3, 2]) == 3 and exits.worst([]) == 0


def test_every_verb_is_in_the_list_this_test_checks(capsys):
    listed = set(re.findall(r"^  (\w+)  ", run_here(capsys, "--help").out, re.M))
    assert listed - {"cache"} == set(VERBS), listed


def test_ctrl_c_exits_130_without_a_traceback(capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "evaluate", interrupted)
    ran = run_here(capsys, "eval", TASK, GOOD, "--device", "cpu", "--db", "")
    assert ran.code == 130 and ran.out == "" and "Traceback" not in ran.err


def test_certify_on_a_busy_machine_writes_no_certificate_and_exits_2(capsys, monkeypatch, tmp_path):
    """Runs that ended machine_busy reached no verdict: nothing is signed, the reasons are shown."""
    monkeypatch.setattr(api, "evaluate", lambda *a, **k: make_verdict("error", ("machine_busy",)))
    out = tmp_path / "c.json"
    ran = run_here(
        capsys,
        "certify",
        TASK,
        GOOD,
        "--device",
        "cpu",
        "--key",
        str(tmp_path / "key.pem"),
        "--out",
        str(out),
    )
    assert ran.code == 2, ran.out + ran.err
    assert not out.exists()
    text = " ".join((ran.out + ran.err).split())
    assert "machine_busy" in text and "none was written" in text, text


BUSY_ADVICE = (
    "the machine was too busy to time: 6.0 other tasks runnable beside the timing worker on 2 cores, "
    "read while the candidate stood still, and the baselines' own rounds scattering by a factor of 1.31 "
    "(above 1.15), so no figure of this timing would say anything about the candidate; run again when it is quieter, time with --time-when-busy (flagged), or check correctness alone "
    "with --correctness-only"
)


def test_compare_exits_2_on_a_busy_machine_as_eval_does_and_prints_its_advice_whole(capsys, monkeypatch):
    from kernelproof.evaluate.head_to_head import exit_of, not_compared
    from kernelproof.verdict import Reason, ReasonCode

    busy = (Reason(ReasonCode.MACHINE_BUSY, BUSY_ADVICE),)
    monkeypatch.setattr(api, "compare", lambda *a, **k: not_compared(BUSY_ADVICE, exit_of(busy)))
    ran = run_here(capsys, "compare", TASK, GOOD, GOOD)
    assert ran.code == exits.for_outcome("error", ["machine_busy"]) == 2, ran
    assert len(BUSY_ADVICE) > 300  # longer than one line's cap (kernelproof/text.py)
    assert BUSY_ADVICE in " ".join(ran.out.split()) and "more characters]" not in ran.out, ran.out


def test_compare_exits_1_when_a_candidate_fails_and_2_when_the_task_or_machine_decided():
    from kernelproof.evaluate.head_to_head import exit_of
    from kernelproof.verdict import Reason, ReasonCode

    assert exit_of((Reason(ReasonCode.TIMING_TAMPER, "forged"),)) == 1
    assert exit_of((Reason(ReasonCode.MACHINE_BUSY, "busy"), Reason(ReasonCode.MISMATCH, "wrong"))) == 1
    assert exit_of((Reason(ReasonCode.ENVIRONMENT, "no driver"),)) == 2
    assert exit_of(()) == 1  # no reason given: never a pass


def test_a_missing_extra_is_a_usage_error_that_names_it(capsys, monkeypatch, tmp_path):
    """`kernelproof serve` without its extra installed: exit 2 and the pip command, not an internal
    error's traceback at the first import of starlette."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "starlette" else real(name, *a)
    )
    ran = run_here(capsys, "serve", "--tasks", str(DATA / "tasks"), "--db", str(tmp_path / "s.sqlite"))
    assert ran.code == 2, ran
    assert "starlette is not installed: pip install 'kernelproof[serve]'" in ran.err
    assert "Traceback" not in ran.err + ran.out
