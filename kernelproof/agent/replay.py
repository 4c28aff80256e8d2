"""The replay log: answers keyed by (turn, sample), carried as JSON lines or read from the store.

Why positions rather than prompt hashes: a later turn's prompt holds fresh measurements (times,
confidence intervals), so a replayed run on another machine sends different prompts and a
hash-keyed cache would miss every time. Keyed by position, the answers come back in the same
order and the run takes the same path as long as the verdicts agree; the prompt hash stored
beside each answer shows where they did not (``diverged`` in the run's summary).

A run writes ``replay.jsonl`` in its folder as it goes: the first line names the run, each further
line is one answered call. Serving from it needs neither network nor SDK.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from kernelproof.agent.agent_errors import ReplayError
from kernelproof.agent.call_records import LoggedCall

FORMAT = "kernelproof.replay/1"


class ReplayLog:
    """Answered (and failed) calls of one earlier run, served by position."""

    def __init__(
        self,
        run_id: str,
        calls: dict[tuple[int, int], LoggedCall],
        header: dict[str, Any] | None = None,
        failed: dict[tuple[int, int], str] | None = None,
    ):
        self.run_id = run_id  # the run the answers came from
        self.calls = calls
        self.header = header or {}  # what the log says about its run (task hash, model, options)
        self.failed = failed or {}  # calls that got no answer, with the error: replayed as failures

    def get(self, turn: int, sample: int) -> LoggedCall | None:
        return self.calls.get((turn, sample))

    @property
    def last_turn(self) -> int:
        """The last turn the recorded run reached (-1 for an empty log)."""
        return max((t for t, _ in [*self.calls, *self.failed]), default=-1)

    def __len__(self) -> int:
        return len(self.calls)

    @classmethod
    def load(cls, path: str | Path) -> ReplayLog:
        """Read a ``replay.jsonl`` file (or a run folder holding one)."""
        p = Path(path)
        if p.is_dir():
            p = p / "replay.jsonl"
        try:
            lines = p.read_text().splitlines()
        except OSError as exc:
            raise ReplayError(f"cannot read replay log {p}: {exc.strerror}") from exc
        if not lines:
            raise ReplayError(f"replay log {p} is empty")
        try:
            header = json.loads(lines[0])
        except json.JSONDecodeError as exc:
            raise ReplayError(f"replay log {p} has no header line: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT or "run_id" not in header:
            raise ReplayError(f"{p} is not a {FORMAT} log")
        calls: dict[tuple[int, int], LoggedCall] = {}
        failed: dict[tuple[int, int], str] = {}
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                key = (doc["turn"], doc["sample"])
                if "text" not in doc:  # a call that got no answer
                    failed[key] = str(doc["error"])
                    continue
                calls[key] = LoggedCall.from_json(doc)  # a later line for the same key wins
                failed.pop(key, None)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ReplayError(f"replay log {p} line {number} is malformed: {exc}") from exc
        return cls(header["run_id"], calls, header, failed)


class ReplayWriter:
    """Appends answered calls to a run's ``replay.jsonl`` as they arrive (safe across threads)."""

    def __init__(self, path: str | Path, header: dict[str, Any]):
        self.path = Path(path)
        self._lock = threading.Lock()
        if not self.path.exists() or self.path.stat().st_size == 0:
            self.path.write_text(json.dumps({"format": FORMAT, **header}) + "\n")

    def append(self, entry: LoggedCall) -> None:
        self._write(entry.to_json())

    def append_failure(self, turn: int, sample: int, kind: str, prompt_hash: str, error: str) -> None:
        """A call that got no answer: a replay fails it again rather than asking anyone."""
        self._write(
            {"turn": turn, "sample": sample, "kind": kind, "prompt_hash": prompt_hash, "error": error}
        )

    def _write(self, doc: dict[str, Any]) -> None:
        line = json.dumps(doc, ensure_ascii=False) + "\n"
        with self._lock, self.path.open("a") as f:
            f.write(line)
            f.flush()
