from __future__ import annotations

import json

import pytest

from kernelproof.agent.agent_errors import ReplayError
from kernelproof.agent.call_records import LoggedCall
from kernelproof.agent.replay import ReplayLog, ReplayWriter


def entry(turn: int, sample: int, text: str = "t") -> LoggedCall:
    return LoggedCall(turn, sample, "draft", "h" * 64, text, 10, 5, None, "stop", "m")


def test_a_written_log_reads_back_by_turn_and_sample(tmp_path):
    w = ReplayWriter(tmp_path / "replay.jsonl", {"run_id": "r1", "task_sha256": "abc"})
    w.append(entry(0, 0, "first"))
    w.append(entry(0, 1, "second"))
    log = ReplayLog.load(tmp_path)  # a run folder works as well as the file
    assert log.run_id == "r1" and len(log) == 2
    assert log.get(0, 1).text == "second" and log.get(1, 0) is None
    assert log.header["task_sha256"] == "abc"


def test_a_resumed_writer_appends_without_a_second_header(tmp_path):
    path = tmp_path / "replay.jsonl"
    ReplayWriter(path, {"run_id": "r1"}).append(entry(0, 0))
    ReplayWriter(path, {"run_id": "r1"}).append(entry(1, 0))
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["format"] == "kernelproof.replay/1"


def test_unreadable_logs_are_replay_errors(tmp_path):
    with pytest.raises(ReplayError, match="cannot read"):
        ReplayLog.load(tmp_path / "none.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "other"}\n')
    with pytest.raises(ReplayError, match="not a kernelproof.replay/1 log"):
        ReplayLog.load(bad)
    bad.write_text('{"format": "kernelproof.replay/1", "run_id": "r"}\n{"turn": 0}\n')
    with pytest.raises(ReplayError, match="line 2 is malformed"):
        ReplayLog.load(bad)


def test_the_shipped_replay_log_belongs_to_the_shipped_task(task_file):
    from kernelproof.agent.context import read_task

    log = ReplayLog.load(task_file.parent / "scale_add.replay.jsonl")
    assert log.header["task_sha256"] == read_task(task_file).sha256  # re-record the log when the task changes
    assert [(k, e.kind) for k, e in sorted(log.calls.items())] == [((0, 0), "draft"), ((1, 0), "refine")]


def test_failed_calls_are_logged_and_read_back_as_failures(tmp_path):
    w = ReplayWriter(tmp_path / "replay.jsonl", {"run_id": "r1"})
    w.append(entry(0, 0))
    w.append_failure(1, 0, "refine", "h" * 64, "503 after 6 attempts")
    log = ReplayLog.load(tmp_path)
    assert log.failed == {(1, 0): "503 after 6 attempts"} and log.get(1, 0) is None and log.last_turn == 1
