"""Run one turn of LLM calls: from the replay log where it has the answer, else live, concurrently.

The log is consulted first for every (turn, sample), so a resumed run never repeats a paid call
and a replayed run makes none; with ``live=None`` (replay) nothing is ever sent and no SDK is
imported. Each answer is written to the store and appended to the run's ``replay.jsonl`` the
moment it arrives, so an interruption loses at most the calls still in flight.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kernelproof.agent.agent_errors import BackendError
from kernelproof.agent.call_records import Completion, LoggedCall, Request, bounded_reply
from kernelproof.agent.llm_backends import Backend
from kernelproof.agent.memory import Memory
from kernelproof.agent.replay import ReplayLog, ReplayWriter


@dataclass(frozen=True)
class Slot:
    """One admitted call of a turn."""

    sample: int  # index within the turn
    request: Request  # what to send
    max_output_tokens: int  # the granted output cap
    logged: LoggedCall | None = None  # the answer already on record, if any
    failed_before: str = ""  # the recorded run's error, when this call failed there and the run went on


@dataclass(frozen=True)
class Outcome:
    slot: Slot
    completion: Completion | None  # None: the call failed
    origin: str  # live | resumed | replayed | missing (a replay log without this call)
    error: BackendError | None = None  # why it failed


class Caller:
    def __init__(
        self,
        run_id: str,
        memory: Memory,
        writer: ReplayWriter,
        live: Backend | None,
        log: ReplayLog | None,
        *,
        log_origin: str,
        workers: int,
        cost: Callable[[int, int], float | None],
    ):
        self.run_id = run_id
        self.memory = memory
        self.writer = writer
        self.live = live  # None: replay only, never a network call
        self.log = log
        self.log_origin = log_origin  # "resumed": the log is this run's own; "replayed": another run's
        self.workers = workers
        self.cost = cost
        self.live_calls = 0  # calls sent to the backend in this process
        self.diverged = 0  # answers served for a prompt whose hash differs from the logged one

    def logged(self, turn: int, sample: int) -> LoggedCall | None:
        return self.log.get(turn, sample) if self.log is not None else None

    def failed_before(self, turn: int, sample: int) -> str:
        """The recorded error of a call that failed in the recorded run, if that run went on past it.

        Failing it again keeps the resumed or replayed run on the recorded path; a failure in the
        recorded run's last turn (where it was interrupted) is asked for again instead.
        """
        if self.log is None or (turn, sample) not in self.log.failed:
            return ""
        if self.live is not None and self.log.last_turn <= turn:
            return ""
        return self.log.failed[(turn, sample)] or "failed in the recorded run"

    def run(self, turn: int, slots: list[Slot]) -> list[Outcome]:
        """Answer every slot; outcomes come back in slot order."""
        results: dict[int, Outcome] = {}
        for s in slots:
            if s.logged is not None:
                results[s.sample] = self._serve(turn, s)
            elif s.failed_before:
                results[s.sample] = self._fail_again(turn, s)
        live = [s for s in slots if s.sample not in results]
        if live and self.live is None:
            for s in live:
                error = BackendError("not in the replay log", retryable=False)
                results[s.sample] = Outcome(s, None, "missing", error)
        elif live:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(live))) as pool:
                futures = {s.sample: pool.submit(self._call, turn, s) for s in live}
                for sample, fut in futures.items():
                    results[sample] = fut.result()
        return [results[s.sample] for s in slots]

    def _serve(self, turn: int, slot: Slot) -> Outcome:
        entry = slot.logged
        assert entry is not None
        if entry.prompt_hash != slot.request.prompt.digest():
            self.diverged += 1
        done = entry.completion()
        if self.log_origin == "replayed":  # a new run: its own record of what it was served
            self._record(turn, slot, done, entry.cost_usd, "replayed")
        return Outcome(slot, done, self.log_origin)

    def _fail_again(self, turn: int, slot: Slot) -> Outcome:
        if self.log_origin == "replayed":
            self._record_failure(turn, slot, slot.failed_before, "replayed")
        return Outcome(slot, None, self.log_origin, BackendError(slot.failed_before, retryable=True))

    def _call(self, turn: int, slot: Slot) -> Outcome:
        assert self.live is not None
        self.live_calls += 1
        try:
            done = bounded_reply(
                self.live.complete(slot.request.prompt, slot.max_output_tokens), slot.max_output_tokens
            )
        except BackendError as exc:
            self._record_failure(turn, slot, str(exc), "live")
            return Outcome(slot, None, "live", exc)
        self._record(turn, slot, done, self.cost(done.input_tokens, done.output_tokens), "live")
        return Outcome(slot, done, "live")

    def _record_failure(self, turn: int, slot: Slot, error: str, origin: str) -> None:
        req = slot.request
        self.memory.record_call(
            self.run_id,
            turn,
            slot.sample,
            req.kind,
            req.prompt,
            None,
            cost_usd=None,
            origin=origin,
            error=error,
        )
        self.writer.append_failure(turn, slot.sample, req.kind, req.prompt.digest(), error)

    def _record(self, turn: int, slot: Slot, done: Completion, cost: float | None, origin: str) -> None:
        req = slot.request
        self.memory.record_call(
            self.run_id, turn, slot.sample, req.kind, req.prompt, done, cost_usd=cost, origin=origin
        )
        self.writer.append(
            LoggedCall(
                turn,
                slot.sample,
                req.kind,
                req.prompt.digest(),
                done.text,
                done.input_tokens,
                done.output_tokens,
                cost,
                done.finish_reason,
                done.model,
            )
        )
