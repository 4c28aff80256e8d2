"""Consistent verbs: each misuse gets a message that names what is wrong, on stderr."""

from __future__ import annotations

import shutil

from cli_support import DATA, run_here, run_piped

TASK = str(DATA / "tasks" / "scale_relu.py")
GOOD = str(DATA / "solutions" / "scale_relu_triton.py")


def test_a_directory_given_as_a_task_is_reported_as_a_directory(capsys, tmp_path):
    for args in (("eval", tmp_path, GOOD), ("compare", tmp_path, GOOD, GOOD), ("certify", tmp_path, GOOD)):
        ran = run_here(capsys, *args)
        assert ran.code == 2 and ran.out == ""
        assert f"the task {tmp_path} is a directory, not a file" in ran.err, ran.err
        assert "not found" not in ran.err
    ran = run_here(capsys, "eval", TASK, tmp_path)
    assert ran.code == 2 and f"the solution {tmp_path} is a directory, not a file" in ran.err


def test_bench_says_which_filter_matched_nothing_and_does_not_blame_the_solutions(capsys, tmp_path):
    for folder in ("suite/level1", "sols/level1"):
        (tmp_path / folder).mkdir(parents=True)
    shutil.copy(TASK, tmp_path / "suite" / "level1" / "scale_relu.py")
    shutil.copy(GOOD, tmp_path / "sols" / "level1" / "scale_relu.py")
    common = ["bench", tmp_path / "suite", "--solutions", tmp_path / "sols", "--device", "cpu"]
    ran = run_here(capsys, *common, "--only", "nomatch", "--only", "gelu")
    assert ran.code == 2 and ran.out == ""
    assert ran.err.startswith(f"error: no task in {tmp_path / 'suite'} matches --only 'nomatch', 'gelu'"), (
        ran.err
    )
    assert "solution" not in ran.err
    ran = run_here(
        capsys, "bench", tmp_path / "suite", "--solutions", tmp_path / "suite" / "level1" / "scale_relu.py"
    )
    assert ran.code == 2 and "--solutions" in ran.err and "is not a folder" in ran.err
    (tmp_path / "sols" / "level1" / "scale_relu.py").unlink()
    ran = run_here(capsys, *common)
    assert ran.code == 2 and "none of the 1 task(s) has a solution at the same relative path" in ran.err


def test_bench_json_to_stdout_keeps_the_table_on_stderr(tmp_path):
    import json

    for folder in ("suite", "sols"):
        (tmp_path / folder).mkdir()
    shutil.copy(TASK, tmp_path / "suite" / "t.py")
    shutil.copy(GOOD, tmp_path / "sols" / "t.py")
    ran = run_piped(
        "bench", "suite", "--solutions", "sols", "--device", "cpu", "--db", "", "--correctness-only",
        "--seeds-per-case", "1", "--json", "-", cwd=tmp_path,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    (doc,) = json.loads(ran.out)
    assert doc["verdict"] == "pass" and "kernelproof bench: 1 task" in ran.err


def test_a_rejection_before_any_case_ran_prints_no_case_line():
    ran = run_piped("eval", TASK, DATA / "solutions" / "no_modelnew.py", "--device", "cpu", "--db", "")
    assert ran.code == 1 and "compile_error: the solution defines no class `ModelNew`" in ran.out
    assert "cases:" not in ran.out and "0/0" not in ran.out


def test_version_is_shown_and_exits_0(capsys):
    from kernelproof import __version__

    ran = run_here(capsys, "--version")
    assert ran.code == 0 and ran.out == f"kernelproof {__version__}\n", ran


def test_a_mistyped_path_is_refused_before_torch_is_imported(tmp_path):
    import subprocess
    import sys

    probe = (
        "import sys; from kernelproof.cli import run; "
        f"code = run(['eval', {TASK!r}, {str(tmp_path / 'sol_typo.py')!r}]); "
        "print(code, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False"], done
    assert f"error: solution file not found: {tmp_path / 'sol_typo.py'}" in done.stderr


def test_a_time_budget_of_zero_or_less_is_refused(capsys):
    for verb in (("eval", TASK, GOOD), ("compare", TASK, GOOD, GOOD)):
        ran = run_here(capsys, *verb, "--time-budget", "-1", "--device", "cpu")
        assert ran.code == 2 and "--time-budget must be more than 0 s, not -1.0" in ran.err, ran


def test_a_solution_that_does_not_parse_is_named_with_its_file_and_line():
    solution = DATA / "solutions" / "syntax_error.py"
    ran = run_piped("eval", TASK, solution, "--device", "cpu", "--db", "")
    assert ran.code == 1, ran
    line = next(i for i, text in enumerate(solution.read_text().splitlines(), 1) if "def forward" in text)
    assert f"compile_error: the solution does not parse: {solution}:{line}:" in " ".join(ran.out.split())


def test_an_audit_of_one_task_says_task_not_tasks(capsys, tmp_path):
    (tmp_path / "broken.py").write_text("import torch\n")  # no Model: does not load, nothing runs
    ran = run_here(capsys, "audit", tmp_path / "broken.py", "--device", "cpu")
    assert ran.code == 2 and "1 task audited, 0 degenerate, 1 did not load" in ran.out, ran


def test_a_task_without_get_init_inputs_is_told_what_to_write(tmp_path):
    task = tmp_path / "no_init.py"
    task.write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
        "def get_inputs():\n    return [torch.randn(8)]\n"
    )
    ran = run_piped("eval", task, GOOD, "--device", "cpu", "--db", "")
    assert ran.code == 2 and "defines no `get_init_inputs`" in ran.out, ran
    assert "`def get_init_inputs(): return []`" in " ".join(ran.out.split())


def test_a_task_whose_get_inputs_returns_a_bare_tensor_is_told_to_return_a_list(tmp_path):
    task = tmp_path / "bare.py"
    task.write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
        "def get_inputs():\n    return torch.randn(8, 8)\n\ndef get_init_inputs():\n    return []\n"
    )
    ran = run_piped("eval", task, GOOD, "--device", "cpu", "--db", "")
    text = " ".join(ran.out.split())
    assert ran.code == 2 and "task_error:" in text, ran
    assert "get_inputs() returned a Tensor, not a list of forward()'s arguments" in text, text
    assert "positional arguments" not in text  # not the reference's TypeError from iterating it


def test_a_reference_called_with_the_wrong_arguments_is_not_placed_in_kernelproofs_own_file(tmp_path):
    task = tmp_path / "two_args.py"
    task.write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x, y):\n        return x + y\n\n"
        "def get_inputs():\n    return [torch.randn(8)]\n\ndef get_init_inputs():\n    return []\n"
    )
    ran = run_piped("eval", task, GOOD, "--device", "cpu", "--db", "")
    text = " ".join(ran.out.split())
    assert ran.code == 2 and "task_error: the reference raised TypeError: " in text, ran
    assert "missing 1 required positional argument" in text and "kernelproof/" not in text


def test_a_json_path_that_cannot_be_written_is_refused_before_anything_runs(capsys, tmp_path):
    nowhere = tmp_path / "no-such-folder" / "v.json"
    for args in (("eval", TASK, GOOD), ("bench", tmp_path, "--solutions", tmp_path), ("results",)):
        ran = run_here(
            capsys, *args, "--json", nowhere, *(("--device", "cpu") if args[0] != "results" else ())
        )
        assert ran.code == 2 and ran.out == "", ran
        assert f"error: --json {nowhere}: the folder {nowhere.parent} does not exist" in ran.err, ran
        assert "Traceback" not in ran.err
    ran = run_here(capsys, "eval", TASK, GOOD, "--json", tmp_path)
    assert ran.code == 2 and f"--json {tmp_path} is a folder" in ran.err, ran
