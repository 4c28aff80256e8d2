"""The command line: documented exit codes, JSON output, the audit verb, the store listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_child, run_on_terminal, run_piped

DATA = Path(__file__).resolve().parents[1] / "data"
TASK = str(DATA / "tasks" / "scale_relu.py")


def test_eval_pass_exits_0_and_writes_the_verdict_json(tmp_path):
    out = tmp_path / "v.json"
    r = run_piped(
        "eval",
        TASK,
        str(DATA / "solutions" / "scale_relu_triton.py"),
        "--device",
        "cpu",
        "--db",
        "",
        "--correctness-only",
        "--json",
        str(out),
    )
    assert r.code == 0, r.out + r.err
    doc = json.loads(out.read_text())
    assert doc["schema"] == "kernelproof.verdict/2" and doc["verdict"] == "pass"


def test_eval_rejection_exits_1_with_the_reason_printed():
    r = run_piped(
        "eval",
        TASK,
        str(DATA / "solutions" / "wrong_shape.py"),
        "--device",
        "cpu",
        "--db",
        "",
        "--correctness-only",
    )
    assert r.code == 1
    assert "wrong_shape" in r.out


def test_missing_file_and_bad_option_exit_2():
    assert run_piped("eval", "nope.py", "nope2.py").code == 2
    assert run_piped("eval", TASK, TASK, "--baselines", "turbo").code == 2
    assert run_piped("eval", TASK, TASK, "--no-such-flag").code == 2


def test_broken_task_exits_2():
    r = run_piped(
        "eval",
        str(DATA / "tasks" / "reference_raises.py"),
        str(DATA / "solutions" / "plain_torch.py"),
        "--device",
        "cpu",
        "--db",
        "",
        "--correctness-only",
    )
    assert r.code == 2 and "task_error" in r.out


def test_audit_json_names_every_control(tmp_path):
    out = tmp_path / "a.json"
    r = run_piped("audit", TASK, "--device", "cpu", "--json", str(out), "--seed", "3")
    assert r.code == 0, r.out + r.err
    doc = json.loads(out.read_text())
    assert doc["task"].endswith("scale_relu.py") and doc["degenerate"] is False
    names = {c["name"] for c in doc["controls"]}
    assert {"zeros", "mean", "other_seed", "other_weights", "bf16_reference"} <= names
    assert all(c["failed_as_it_should"] for c in doc["controls"])


def test_a_constant_output_task_fails_its_audit(tmp_path):
    # softmax rows sum to one whatever the input: the mean and another seed's output both pass.
    t = tmp_path / "tiny.py"
    t.write_text(
        "import torch\nimport torch.nn as nn\nn = 64\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=-1).sum(dim=-1)\n"
        "def get_inputs():\n    return [torch.rand(8, n)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    r = run_piped("audit", str(t), "--device", "cpu", "--json", "-", "--seed", "1")
    assert r.code == 1
    assert json.loads(r.out)["degenerate"] is True


def test_audit_json_of_a_task_with_infinite_errors_is_written(tmp_path):
    # The output is all zeros: any control that is not zero is infinitely wrong, relatively.
    t = tmp_path / "zero.py"
    t.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x * 0\n"
        "def get_inputs():\n    return [torch.rand(8, 16)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    out = tmp_path / "a.json"
    r = run_piped("audit", str(t), "--device", "cpu", "--json", str(out), "--seed", "1")
    assert r.code == 1, r.out + r.err  # degenerate, and said so: not an internal error
    doc = json.loads(out.read_text(), parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    assert "inf" in {c["rel_norm_err"] for c in doc["controls"]}
    assert doc["shapes"][0]["schema"] == "kernelproof.audit/1"


def test_results_lists_what_eval_stored(tmp_path):
    db = str(tmp_path / "r.sqlite")
    run_piped(
        "eval",
        TASK,
        str(DATA / "solutions" / "wrong_dtype.py"),
        "--device",
        "cpu",
        "--db",
        db,
        "--correctness-only",
    )
    r = run_piped("results", "--db", db, "--json", "-", "--code", "wrong_dtype")
    docs = json.loads(r.out)
    assert len(docs) == 1 and docs[0]["reasons"][0]["code"] == "wrong_dtype"


def test_build_cache_and_build_workers_flags(tmp_path):
    cache = tmp_path / "builds"
    r = run_piped(
        "eval",
        TASK,
        str(DATA / "solutions" / "plain_torch.py"),
        "--device",
        "cpu",
        "--db",
        "",
        "--correctness-only",
        "--build-cache",
        str(cache),
        "--build-workers",
        "1",
    )
    assert r.code == 0, r.out + r.err
    assert not cache.exists()  # a plain torch solution has no build step
    assert run_piped("eval", TASK, TASK, "--build-workers", "-1").code == 2


def test_bench_evaluates_a_suite_folder_and_reports_fast_p_only_when_it_timed(tmp_path):
    import shutil

    (tmp_path / "suite" / "level1").mkdir(parents=True)
    (tmp_path / "sols" / "level1").mkdir(parents=True)
    shutil.copy(TASK, tmp_path / "suite" / "level1" / "scale_relu.py")
    shutil.copy(DATA / "solutions" / "scale_relu_triton.py", tmp_path / "sols" / "level1" / "scale_relu.py")
    common = ["bench", str(tmp_path / "suite"), "--solutions", str(tmp_path / "sols"), "--device", "cpu"]
    r = run_piped(*common, "--db", "", "--correctness-only", "--seeds-per-case", "1")
    assert r.code == 0, r.out + r.err
    assert "correct: 1/1" in r.out and "fast_p: not measured" in r.out, r.out
    out = tmp_path / "bench.json"
    r = run_piped(*common, "--db", "", "--seeds-per-case", "1", "--time-budget", "0.5", "--json", str(out))
    assert r.code == 0, r.out + r.err
    assert "vs eager: fast_0=" in r.out, r.out
    assert "fast_p leaves out 1 verdict of tasks solved at a speed that is not a claim" in " ".join(
        r.out.split()
    )
    (verdict,) = json.loads(out.read_text())
    assert verdict["verdict"] == "pass" and verdict["speedup"]["eager"]["median"] is None
    assert verdict["claims"]["speed_withheld"] == "triton_interpreter"


HOSTILE = str(DATA / "solutions" / "raises_escapes.py")  # forward raises OSC, CSI, CR and markup


def _assert_inert(out: bytes) -> str:
    """The output decoded; it holds no ESC, no C1 control and no bidi override, in any encoding."""
    text = out.decode("utf-8")
    assert "\x1b" not in text, text
    assert not [c for c in text if 0x80 <= ord(c) <= 0x9F], text
    assert "\u202e" not in text, text
    return text


EVAL_HOSTILE = ("eval", TASK, HOSTILE, "--device", "cpu", "--db", "", "--correctness-only")


def test_eval_piped_shows_a_candidates_escape_sequences_as_text():
    r = run_child(*EVAL_HOSTILE, columns=400)  # lines wide enough that Rich does not wrap them
    assert r.code == 1
    text = _assert_inert(r.raw)
    assert "\\x1b]0;pwned title\\x07" in text and "\\x1b[1A\\x1b[2K" in text
    assert "\\x1b[32mPASS  forged line" in text and "\r" not in text
    assert "[bold red]markup[/]" in text  # Rich markup printed as written, not applied


def test_eval_on_a_terminal_writes_no_escape_sequence_of_the_candidates():
    ran = run_on_terminal(*EVAL_HOSTILE, term="dumb", columns=400)  # Rich itself styles nothing
    assert ran.code == 1
    text = _assert_inert(ran.raw)
    assert "runtime_error" in text and "\\x1b]8;;https://evil.example/" in text
    ran = run_on_terminal(*EVAL_HOSTILE, term="xterm-256color", columns=400)  # Rich colours its words
    assert ran.code == 1
    out = ran.raw
    assert b"\x1b]" not in out and b"\x1b[32mPASS" not in out and b"\x1b[1A\x1b[2K\r" not in out
    assert b"\\x1b[1A\\x1b[2K" in out and b"\\x1b[32mPASS  forged line" in out


def test_paths_and_messages_stay_inert_in_results_audit_and_compare(tmp_path):
    """Piped, in this process (the raw bytes of a child's output are checked above, for eval)."""
    import shutil

    def kp_text(*args: str):
        ran = run_piped(*args, columns=400)
        return ran.code, _assert_inert((ran.out + ran.err).encode("utf-8"))

    task = tmp_path / "t\x1b]0;x\x07[bold]y\u202e.py"
    shutil.copy(TASK, task)
    db = str(tmp_path / "r.sqlite")
    code, _ = kp_text("eval", str(task), HOSTILE, "--device", "cpu", "--db", db, "--correctness-only")
    assert code == 1
    code, text = kp_text("results", "--db", db)
    assert code == 0 and "t\\x1b]0;x\\x07[bold]y\\u202e.py" in text
    code, text = kp_text("audit", str(task), "--device", "cpu", "--seed", "1")
    assert code == 0 and "[bold]y" in text
    plain = str(DATA / "solutions" / "plain_torch.py")
    code, text = kp_text("compare", str(task), plain, HOSTILE, "--device", "cpu", "--time-budget", "0.5")
    assert code == 1 and "\\x1b]0;pwned title" in text
