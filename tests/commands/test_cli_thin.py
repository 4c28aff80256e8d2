"""A thin CLI: every verb goes through the api, the store, the baselines and the device are
resolved in one place each, and every evaluation option that changes a verdict has a flag."""

from __future__ import annotations

import ast
import re

import pytest
import torch
from cli_support import DATA, REPO, make_verdict, run_here, run_piped

from kernelproof import api
from kernelproof.errors import UsageError
from kernelproof.options import EvalOptions

TASK = str(DATA / "tasks" / "scale_relu.py")
GOOD = str(DATA / "solutions" / "scale_relu_triton.py")

# What the command line may import from kernelproof: the api, its own printing and exit codes,
# the vocabulary, and the modules of the verbs it registers.
CLI_MAY_IMPORT = {
    "kernelproof",
    "kernelproof.api",
    "kernelproof.console",
    "kernelproof.errors",
    "kernelproof.exits",
    "kernelproof.options",
    "kernelproof.text",
    "kernelproof.verdict",
    "kernelproof.report.scores",  # fast_p of the bench's verdicts, as the report computes it
    "kernelproof.commands.evaluation",  # eval, compare
    "kernelproof.commands.bench",
    "kernelproof.commands.audit",
    "kernelproof.commands.results",
    "kernelproof.commands.ceilings",
    "kernelproof.commands.report",
    "kernelproof.commands.optimize",
    "kernelproof.commands.cache",
    "kernelproof.commands.kernelbench",
    "kernelproof.commands.serve",
    "kernelproof.commands.failures",  # an exception that reached the top, printed and mapped
    "kernelproof.commands.help",  # the verbs' lines in --help
    "kernelproof.commands.cli_options",  # the options the evaluating verbs share
    "kernelproof.commands.streams",  # stdout when its reader goes away
    "kernelproof.cli_progress",  # live lines, per-item lines and Ctrl-C
    "kernelproof.sandbox.identity",  # main() makes the parent process non-dumpable, never the api
    "kernelproof.preflight",  # require_files: a mistyped path refused before the api (and torch) loads
    "kernelproof._version",  # --version, without importing the api
}


def imported_modules(path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return {m for m in out if m.split(".")[0] == "kernelproof"}


def test_the_cli_imports_only_the_api_and_its_own_printing():
    found = imported_modules(REPO / "kernelproof" / "cli.py")
    assert found <= CLI_MAY_IMPORT, sorted(found - CLI_MAY_IMPORT)


def test_the_store_rule_is_written_once():
    from kernelproof.store import db_path

    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "kernelproof").rglob("*.py")
        if p.name != "store.py" and re.search(r"environ\S*KERNELPROOF_DB|default_db_path\(", p.read_text())
    ]
    assert not offenders, offenders
    assert db_path("") is None and db_path("x.sqlite") == "x.sqlite"


def test_kernelproof_db_names_the_store_when_no_db_is_given(monkeypatch, tmp_path):
    from kernelproof.executors.ray_executor import open_store as ray_store
    from kernelproof.store import db_path, default_db_path

    monkeypatch.delenv("KERNELPROOF_DB", raising=False)
    assert db_path(None) == default_db_path()
    monkeypatch.setenv("KERNELPROOF_DB", str(tmp_path / "env.sqlite"))
    assert db_path(None) == str(tmp_path / "env.sqlite")
    assert db_path(str(tmp_path / "given.sqlite")) == str(tmp_path / "given.sqlite")
    assert ray_store(None).path == str(tmp_path / "env.sqlite")
    assert api._open_store(EvalOptions()).path == str(tmp_path / "env.sqlite")
    from kernelproof.agent.run import _db_path

    assert _db_path(None, None) == str(tmp_path / "env.sqlite")


def test_eval_and_results_honour_kernelproof_db(tmp_path):
    env = {"KERNELPROOF_DB": str(tmp_path / "env.sqlite")}
    wrong = str(DATA / "solutions" / "wrong_dtype.py")
    ran = run_piped(
        "eval", TASK, wrong, "--device", "cpu", "--correctness-only", "--seeds-per-case", "1", env=env
    )
    assert ran.code == 1, ran.err
    assert (tmp_path / "env.sqlite").exists()
    ran = run_piped("results", "--json", "-", env=env)
    assert ran.code == 0, ran.err
    assert "wrong_dtype" in ran.out and str(tmp_path / "env.sqlite") in ran.err


def test_every_verdict_changing_option_reaches_the_api(capsys, monkeypatch):
    seen = []

    def fake(task, solution, options):
        seen.append(api.checked_options(options))
        return make_verdict()

    monkeypatch.setattr(api, "evaluate", fake)
    flags = [
        "--policy",
        "library-ok",
        "--refuse-random-reference",
        "--shape-variants",
        "task",
        "--require-sandbox",
    ]
    ran = run_here(capsys, "eval", TASK, GOOD, "--device", "cpu", "--baselines", "eager,compile", *flags)
    assert ran.code == 0, ran.err
    (o,) = seen
    assert (o.policy, o.refuse_random_reference, o.shape_variants, o.require_sandbox) == (
        "library-ok",
        True,
        "task",
        True,
    )
    assert o.baselines == ("eager", "compile:default")
    assert EvalOptions().policy is None and EvalOptions().shape_variants == "probe"
    assert "policy" in EvalOptions().cache_key_fields()  # a different policy is a different evaluation


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--policy", "lax", "--policy must be strict | library-ok, not 'lax'"),
        ("--shape-variants", "some", "--shape-variants must be probe | auto | task, not 'some'"),
        ("--baselines", "turbo", "unknown baseline 'turbo'"),
        ("--device", "gpu0", "--device must be auto, cpu, cuda or cuda:N, not 'gpu0'"),
        ("--build-workers", "-1", "--build-workers must be 0 (automatic) or more"),
        ("--timeout", "0", "--timeout must be more than 0 s"),
    ],
)
def test_a_bad_choice_is_refused_in_the_one_place_that_checks_options(capsys, flag, value, message):
    ran = run_here(capsys, "eval", TASK, GOOD, flag, value)
    assert ran.code == 2 and ran.out == ""
    assert ran.err.startswith(f"error: {message}"), ran.err
    with pytest.raises(UsageError, match=re.escape(message)):
        api.checked_options(EvalOptions(**{_field(flag): _typed(flag, value)}))


def _field(flag: str) -> str:
    return {"--build-workers": "build_workers", "--timeout": "timeout_s"}.get(
        flag, flag[2:].replace("-", "_")
    )


def _typed(flag: str, value: str):
    if flag == "--baselines":
        return (value,)
    return {"--build-workers": int, "--timeout": float}.get(flag, str)(value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_a_gpu_asked_for_where_there_is_none_is_refused_before_anything_runs(capsys):
    for device in ("cuda", "cuda:1"):
        ran = run_here(capsys, "eval", TASK, GOOD, "--device", device)
        assert ran.code == 2 and f"--device {device} was asked for, but no CUDA device is visible" in ran.err
    ran = run_here(capsys, "ceilings")
    assert ran.code == 2 and "ceilings are measured on a CUDA device" in ran.err


def test_refuse_random_reference_turns_a_dropout_task_into_a_task_error():
    task = str(DATA / "tasks" / "dropout_train.py")
    sol = str(DATA / "solutions" / "identity_dropout_train.py")
    common = ["eval", task, sol, "--device", "cpu", "--db", "", "--correctness-only", "--seed", "5"]
    assert run_piped(*common).code == 0
    ran = run_piped(*common, "--refuse-random-reference")
    assert ran.code == 2 and "task_error" in ran.out and "random" in ran.out


def test_audit_goes_through_the_api_and_reports_a_task_that_does_not_load(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\n")
    found = list(api.audit(tmp_path, EvalOptions(device="cpu", seed=1)))
    assert [a.task for a in found] == [str(tmp_path / "broken.py")]
    assert found[0].error and not found[0].degenerate and found[0].to_json()["error"]
    (good,) = api.audit(TASK, EvalOptions(device="cpu", seed=3))
    assert not good.error and not good.degenerate and good.shapes
    with pytest.raises(UsageError, match="task file not found"):
        list(api.audit(tmp_path / "none.py", EvalOptions(device="cpu")))
