"""The optimisation loop: plan a turn, admit it within budget, call, extract, evaluate, repeat.

Each turn: the strategy plans requests; each is admitted only if its worst-case cost fits every
budget (a solution request also reserves its evaluation, so no answer is paid for that could not
be evaluated); the calls run concurrently (from the log where it has the answer); answers become
candidates (a malformed one is rejected before evaluation); the candidates of the turn are
evaluated concurrently through ``evaluate_many``; the verdicts go back to the strategy through
the state. Only a PASS verdict can make a candidate the best (see ranking).

The provider's reported usage is what is charged. A reply that reports more tokens than the call
reserved (more output than the cap it was sent, or more input than its prompt's byte bound) is
charged in full, warned about, and ends the run after its turn is judged (``reply_over_cap``):
a provider that does not keep to the cap it is sent leaves no budget that can be kept.

An answer that repeats an earlier one (the same file, or without a file the same text,
whitespace aside) is not evaluated again but counts against ``max_candidates``, so a model
that keeps repeating itself runs out of candidates instead of calls.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelproof.agent import ranking
from kernelproof.agent.agent_options import AgentOptions
from kernelproof.agent.budget import Budget, CallGrant, EvalGrant, Refusal
from kernelproof.agent.call_records import Candidate, Completion, LoggedCall, Rejection, candidate_id
from kernelproof.agent.caller import Caller, Outcome, Slot
from kernelproof.agent.extract import extract_solution
from kernelproof.agent.llm_backends import Backend, BackendConfig
from kernelproof.agent.run import RunResult, Session, open_session
from kernelproof.agent.strategies import SearchState, make_strategy
from kernelproof.options import EvalOptions
from kernelproof.verdict import Outcome as VerdictOutcome
from kernelproof.verdict import ReasonCode, Verdict

Evaluator = Callable[[Iterable[tuple[Any, Any]], EvalOptions], Iterator[Verdict]]
TASK_CODES = {ReasonCode.DEGENERATE_TASK, ReasonCode.TASK_ERROR}


def optimize(
    task: str | Path,
    model: str | BackendConfig,
    options: AgentOptions | None = None,
    *,
    evaluator: Evaluator,
    backend: Backend | None = None,
    resume: str | None = None,
    replay: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Search for a faster verified solution of ``task`` with ``model`` (``PROVIDER:MODEL`` or a config).

    ``resume``: a run id (or run folder) to continue; its answered calls are served from its log
    and its judged candidates reused, so no paid call is repeated. ``replay``: a replay log (a
    ``replay.jsonl`` file, a run folder or a run id) whose answers are served by position, with
    no network and no SDK; candidates are evaluated afresh. ``evaluator`` is
    :func:`kernelproof.api.evaluate_many` (``kernelproof.api.optimize`` passes it: the agent sits below the api); ``backend`` replaces the one built from ``model``.
    """
    options = options or AgentOptions()
    if not options.limits.bounds_spending():  # AgentOptions gives a default; nothing starts unbounded
        from kernelproof.agent.agent_errors import ConfigError

        raise ConfigError(
            "optimize needs a bound on calls, tokens or dollars (--max-calls, --max-tokens, --max-dollars)"
        )
    session = open_session(task, model, options, backend=backend, resume=resume, replay=replay)
    loop = _Loop(session, evaluator, progress or (lambda _msg: None))
    try:
        stop = loop.run()
    except BaseException:
        session.fail("interrupted by an exception; resume with --resume " + session.run_id)
        raise
    return session.finish(
        loop.state.candidates,
        stop,
        loop.caller,
        stop_detail=loop.stop_detail,
        warnings=loop.warnings,
        causes=loop.causes,
    )


class _Loop:
    def __init__(self, session: Session, evaluator: Evaluator, progress: Callable[[str], None]):
        self.s = session
        self.o = session.options
        self.evaluate = evaluator
        self.say = progress
        self.budget: Budget = session.budget
        self.caller: Caller = session.caller
        self.strategy = make_strategy(self.o.strategy, self.o.search)
        self.state = SearchState(session.ctx)
        self._known: dict[str, Candidate] = {}  # id -> latest version
        self._by_sha: dict[str, str] = {}  # source hash -> id of the first candidate with it
        self._by_text: dict[str, str] = {}  # an answer without a file, whitespace normalised -> first id
        self._call_grants: dict[int, CallGrant] = {}
        self._eval_grants: dict[int, EvalGrant] = {}
        self._task_error = False
        self._longest_eval_s = 0.0  # the longest evaluation so far: the default reservation
        self._over_cap = ""  # the first reply that reported more tokens than its call reserved
        self.stop_detail = ""  # the figures behind the stop reason, in words
        self.warnings: list[str] = []  # said as they happen, and kept in the summary
        self.causes: list[str] = []  # spending that went past its reservation: why a budget may not hold

    def run(self) -> str:
        rounds = since_improved = failed_turns = 0
        while True:
            stop = self._stop_reason(rounds, since_improved)
            if stop:
                return stop
            requests = self.strategy.plan(self.state)
            if not requests:
                return "strategy_done"
            turn = self.state.turn
            slots = self._admit(turn, requests)
            if not slots:
                refusal = (
                    self.budget.exhausted(self._min_call_tokens(), self._reserve_s()) or self.budget.refused
                )
                assert refusal is not None  # the first request was refused, so a refusal was recorded
                return self._stop_for(refusal)
            outcomes = self.caller.run(turn, slots)
            self._settle_calls(turn, outcomes)
            if self.caller.live is None and all(o.origin == "missing" for o in outcomes):
                for grant in self._eval_grants.values():
                    self.budget.release_eval(grant)
                return "replay_exhausted"
            answered = [o for o in outcomes if o.completion is not None]
            failed_turns = 0 if answered else failed_turns + 1
            fatal = next((o.error for o in outcomes if o.error is not None and not o.error.retryable), None)
            if requests[0].wants_candidate:
                before = self._best_score()
                new = self._judge(turn, outcomes)
                self.state.candidates += new
                rounds += 1
                after = self._best_score()
                since_improved = (
                    0 if after is not None and (before is None or after > before) else since_improved + 1
                )
                self.say(self._turn_line(turn, new))
            else:
                self.strategy.take_ideas(
                    [s.request for s in slots],
                    [o.completion.text if o.completion else None for o in outcomes],
                )
                self.say(f"turn {turn}: {len(answered)}/{len(slots)} idea lists")
                if not self.strategy.round_open():  # no idea to implement: the round ends here
                    rounds += 1
                    since_improved += 1
            self.state.turn += 1
            if self._task_error:
                return "task_error"
            if self._over_cap:
                self.stop_detail = self._over_cap
                return "reply_over_cap"
            if fatal is not None and self.caller.live is not None:
                self.s.error = str(fatal)
                return "backend_error"
            if failed_turns >= self.o.max_failed_turns:
                last = next((o.error for o in reversed(outcomes) if o.error is not None), None)
                self.stop_detail = f"the calls of {failed_turns} turns in a row failed" + (
                    f"; the last: {last}" if last is not None else ""
                )
                return "backend_unavailable"

    def _best_score(self) -> ranking.Score | None:
        best = ranking.best(self.state.candidates)
        return ranking.score(best.verdict) if best is not None else None

    # --- budgets ---------------------------------------------------------------------------
    def _stop_reason(self, rounds: int, since_improved: int) -> str:
        if rounds >= self.o.max_rounds:
            return "max_rounds"
        if since_improved >= self.o.patience:
            return "no_improvement"
        target = self.o.sol_target
        sol = ranking.sol_fraction(ranking.best(self.state.candidates))
        if target is not None and sol is not None and sol >= target:
            return "sol_target"
        refusal = self.budget.exhausted(self._min_call_tokens(), self._reserve_s())
        return self._stop_for(refusal) if refusal is not None else ""

    def _stop_for(self, refusal: Refusal) -> str:
        self.stop_detail = refusal.detail
        return refusal.limit

    def _min_call_tokens(self) -> int:
        return 0 if self.caller.live is None else self.o.min_output_tokens

    def _reserve_s(self) -> float:
        """GPU seconds to reserve for one evaluation (see budget: a bound only when given)."""
        if self.o.eval_reserve_s is not None:
            return self.o.eval_reserve_s
        return self._longest_eval_s or self.o.eval.time_budget_s

    def _admit(self, turn: int, requests: list) -> list[Slot]:
        """Slots for the requests that fit the budgets, in order; the first that does not fit ends the turn."""
        slots = []
        self._call_grants.clear()
        self._eval_grants.clear()
        for sample, req in enumerate(requests):
            logged = self.caller.logged(turn, sample)
            eval_grant = None
            if req.wants_candidate:
                eval_grant = self.budget.reserve_eval(self._reserve_s())
                if eval_grant is None:
                    break
            failed_before = "" if logged is not None else self.caller.failed_before(turn, sample)
            if failed_before:
                self.budget.charge_failed_call()
                slots.append(Slot(sample, req, 0, None, failed_before))
            elif logged is not None or self.caller.live is None:
                if logged is not None:
                    self._charge_logged(turn, sample, logged)
                slots.append(Slot(sample, req, 0, logged))
            else:
                grant = self.budget.reserve_call(
                    req.prompt.worst_input_tokens(), self.o.max_output_tokens, self.o.min_output_tokens
                )
                if grant is None:
                    if eval_grant is not None:
                        self.budget.release_eval(eval_grant)
                    break
                self._call_grants[sample] = grant
                slots.append(Slot(sample, req, grant.output_tokens))
            if eval_grant is not None:
                self._eval_grants[sample] = eval_grant
        return slots

    def _charge_logged(self, turn: int, sample: int, logged: LoggedCall) -> None:
        """Charge an answer on record (not asked again); say so if it alone crosses a limit."""
        before = {o.limit for o in self.budget.overruns()}
        cost = logged.cost_usd
        if cost is None:
            cost = self.budget.cost_of(logged.input_tokens, logged.output_tokens) or 0.0
        self.budget.charge_call(logged.input_tokens, logged.output_tokens, cost)
        for o in self.budget.overruns():
            if o.limit not in before:
                self.causes.append(
                    f"{o.limit}: the answers on record up to call {candidate_id(turn, sample)} (served from the "
                    f"log, not asked again) already spent {o.spent:g} of the {o.allowed:g} given now"
                )

    def _settle_calls(self, turn: int, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            grant = self._call_grants.pop(o.slot.sample, None)
            if grant is None:
                continue
            if o.completion is None:
                self.budget.settle_failed_call(grant)
                continue
            done = o.completion
            call = candidate_id(turn, o.slot.sample)
            cost = self.budget.settle_call(grant, done.input_tokens, done.output_tokens)
            if done.note:
                text = f"the reply to call {call}: {done.note}"
                self.warnings.append(text)
                self.say("warning: " + text)
                if done.output_tokens > grant.output_tokens:
                    self.causes.append(text)
            if not done.usage_estimated:
                reported = done
                if done.reported_output_tokens is not None:  # the over-cap rule is about what was reported
                    reported = dataclasses.replace(done, output_tokens=done.reported_output_tokens)
                self._check_reported_use(call, grant, reported, cost)

    def _check_reported_use(self, call: str, grant: CallGrant, done: Completion, cost: float) -> None:
        """Warn about, and stop after, a reply that reports more than its call reserved."""
        over = []
        if done.output_tokens > grant.output_tokens:
            over.append(
                f"{done.output_tokens} output tokens, over the cap of {grant.output_tokens} sent with it"
            )
        if done.input_tokens > grant.input_tokens:
            over.append(
                f"{done.input_tokens} input tokens, over the bound of {grant.input_tokens} its prompt's size gives"
            )
        if not over:
            return
        price = "" if self.budget.price is None else f" (${cost:.4f})"
        text = (
            f"the reply to call {call} reported {' and '.join(over)}; what it reported is counted{price}, "
            "and the run stops: a provider that does not keep to the cap it is sent leaves no budget that "
            "can be kept"
        )
        self.warnings.append(text)
        self.causes.append(text)
        self.say("warning: " + text)
        self._over_cap = self._over_cap or text

    # --- candidates ------------------------------------------------------------------------
    def _judge(self, turn: int, outcomes: list[Outcome]) -> list[Candidate]:
        made: list[Candidate] = []
        pending: list[tuple[Candidate, EvalGrant]] = []
        for o in outcomes:
            grant = self._eval_grants.pop(o.slot.sample)
            if o.completion is None:
                self.budget.release_eval(grant)
                continue
            c = self._candidate(turn, o)
            stored = self.s.stored.get(c.id)
            earlier = self._earlier(c)
            if earlier is not None:  # a repeat: counted as a candidate, not judged again
                self.budget.settle_repeat(grant)
                c = dataclasses.replace(c, duplicate_of=earlier)
            elif c.rejection is not None:
                self.budget.release_eval(grant)
            elif (
                stored is not None and stored.source_sha256 == c.source_sha256 and stored.verdict is not None
            ):
                self.budget.settle_eval(grant, stored.gpu_s)  # judged before the interruption
                self._longest_eval_s = max(self._longest_eval_s, stored.gpu_s)
                c = dataclasses.replace(c, verdict=stored.verdict, gpu_s=stored.gpu_s)
            else:
                pending.append((c, grant))
            if c.source_sha256:
                self._by_sha.setdefault(c.source_sha256, c.id)
            else:
                self._by_text.setdefault(_normalised(c.response), c.id)
            self._known[c.id] = c
            made.append(c)
        self._evaluate(pending)
        final = []
        for c in made:
            c = self._known[c.id]
            if c.duplicate_of:
                twin = self._known[c.duplicate_of]
                c = dataclasses.replace(c, verdict=twin.verdict, rejection=twin.rejection)
                self._known[c.id] = c
            self.s.memory.record_candidate(self.s.run_id, c)
            final.append(c)
        return final

    def _earlier(self, c: Candidate) -> str | None:
        """The id of an earlier candidate that ``c`` repeats, if any.

        With a file: the same bytes (a file that differs only in whitespace is a different program
        in Python, so it is evaluated). Without one: the same answer, whitespace aside.
        """
        if c.source_sha256:
            return self._by_sha.get(c.source_sha256)
        return self._by_text.get(_normalised(c.response))

    def _candidate(self, turn: int, o: Outcome) -> Candidate:
        req, done = o.slot.request, o.completion
        assert done is not None
        cid = candidate_id(turn, o.slot.sample)
        got = extract_solution(done.text, done.finish_reason)
        base = dict(
            id=cid,
            turn=turn,
            sample=o.slot.sample,
            kind=req.kind,
            parents=req.parents,
            idea=req.idea,
            note=got.note,
        )
        source = got.source
        if source is None:
            return Candidate(
                **base, response=done.text, path="", source="", source_sha256="", rejection=got.rejection
            )
        path = self.s.candidates_dir / f"{cid}.py"
        path.write_text(source)
        sha = hashlib.sha256(source.encode()).hexdigest()
        return Candidate(**base, response=done.text, path=str(path), source=source, source_sha256=sha)

    def _evaluate(self, pending: list[tuple[Candidate, EvalGrant]]) -> None:
        """Evaluate the turn's new candidates concurrently.

        A verdict is matched to its candidate by the solution's content hash and the task's, never
        by a path: a path names whatever bytes are there now (another run may have written the
        same name), and a served verdict may name the path its bytes were first judged at. A
        verdict for bytes that are not a pending candidate's is dropped, so each candidate's
        verdict is the judgement of its own source.
        """
        if not pending:
            return
        by_sha = {c.source_sha256: (c, g) for c, g in pending}  # unique: repeats never reach here
        pairs = [(self.s.task.path, c.path) for c, _ in pending]
        done: set[str] = set()
        started = datetime.now(timezone.utc).replace(microsecond=0)
        for v in self.evaluate(pairs, self.o.eval):
            hit = by_sha.get(v.solution.sha256)
            if hit is None or hit[0].id in done or not self._same_task(v):
                continue
            c, grant = hit
            gpu_s = 0.0 if v.stored is not None or not _decided_since(v, started) else v.elapsed_s
            self.budget.settle_eval(grant, gpu_s)
            if gpu_s > grant.gpu_seconds + 1e-9 and self.o.limits.max_gpu_seconds is not None:
                self.causes.append(
                    f"max_gpu_seconds: the evaluation of {c.id} took {gpu_s:.1f} GPU s, more than the "
                    f"{grant.gpu_seconds:.1f} reserved for it (--eval-reserve bounds each evaluation)"
                )
            self._longest_eval_s = max(self._longest_eval_s, gpu_s)
            c = dataclasses.replace(c, verdict=v, gpu_s=gpu_s)
            self._known[c.id] = c
            self.s.memory.record_candidate(self.s.run_id, c)
            done.add(c.id)
            if v.verdict is VerdictOutcome.ERROR and any(r.code in TASK_CODES for r in v.reasons):
                self._task_error = True
        for c, grant in pending:
            if c.id not in done:  # unknown cost: charge what was reserved
                self.budget.settle_eval(grant, grant.gpu_seconds)
                missing = Rejection("not_evaluated", "The evaluator returned no verdict for this candidate.")
                self._known[c.id] = dataclasses.replace(c, rejection=missing, gpu_s=grant.gpu_seconds)

    def _same_task(self, v: Verdict) -> bool:
        """Whether ``v`` judged this run's task (its hash, when the verdict names one)."""
        sha = v.task.sha256
        return not sha or sha == self.s.task.sha256

    def _turn_line(self, turn: int, new: list[Candidate]) -> str:
        passed = sum(c.passed for c in new)
        best = ranking.best(self.state.candidates)
        dollars = "$?" if self.budget.price is None else f"${self.budget.dollars:.4f}"
        return (
            f"turn {turn}: {len(new)} candidates, {passed} verified; best {best.id if best else '-'} "
            f"{ranking.speedup_text(best)}; spent {self.budget.tokens} tokens, {dollars}, "
            f"{self.budget.gpu_seconds:.1f} {'eval' if self.s.ctx.device.kind == 'cpu' else 'GPU'} s, "
            f"{self.budget.candidates} evaluated"
            + (f", {self.budget.repeats} repeats" if self.budget.repeats else "")
        )


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _decided_since(v: Verdict, started: datetime) -> bool:
    """Whether a verdict was decided by this evaluation, not served from the store's earlier one."""
    try:
        return datetime.fromisoformat(v.created_at) >= started
    except (TypeError, ValueError):
        return True  # no usable time: charge it
