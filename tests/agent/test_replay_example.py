"""The shipped replay log (examples/replay/09_gelu.replay.jsonl): `optimize` tried without a key.

`kernelproof optimize suite/level1/09_gelu.py --model replay:examples/replay/09_gelu.replay.jsonl`
replays a recorded run's answers: no provider, no network, every candidate judged here for real."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_support import run_child

ROOT = Path(__file__).resolve().parents[2]
LOG = "examples/replay/09_gelu.replay.jsonl"
TASK = "suite/level1/09_gelu.py"


def test_the_shipped_replay_log_was_recorded_on_the_built_in_task_it_names():
    from kernelproof.agent.run import recorded_options

    recorded = recorded_options(ROOT / LOG)  # raises where the task's bytes differ from the recording's
    assert recorded is not None and recorded.limits.max_candidates == 2
    header = json.loads((ROOT / LOG).read_text().splitlines()[0])
    assert header["task"] == Path(TASK).stem


@pytest.mark.slow
def test_optimize_runs_the_shipped_replay_without_a_key_and_makes_no_call(tmp_path):
    no_keys = {k: None for k in os.environ if k.endswith("_API_KEY")}
    ran = run_child(
        *("optimize", TASK, "--model", f"replay:{LOG}"),
        *("--device", "cpu", "--db", "", "--no-plot", "--out", str(tmp_path / "run")),
        cwd=ROOT,
        env=no_keys,
        timeout=550,
    )
    assert ran.code == 0, ran.output
    text = " ".join(ran.out.split())
    assert "0 live calls" in text and "2 evaluated" in text, ran.out
    assert (tmp_path / "run" / "best.py").is_file()
    assert "External init callback" not in ran.err


def test_replay_as_a_model_and_replay_as_an_option_are_not_given_together(tmp_path):
    ran = run_child("optimize", TASK, "--model", f"replay:{LOG}", "--replay", LOG, cwd=ROOT, timeout=120)
    assert ran.code == 2 and "once" in ran.output
