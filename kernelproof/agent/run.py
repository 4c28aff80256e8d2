"""A run's setup and its ending: ids, folders, store rows, the replay log, and the files it leaves.

A run folder holds ``run.json`` (what the run is: id, task, model, options, database), the
candidates it wrote, ``replay.jsonl``, and at the end ``best.py``, ``best.verdict.json`` and the
summary (``summary.md``, ``summary.json``, ``summary.png``). ``--resume`` takes the folder or the
run id; ``--replay`` the folder, its ``replay.jsonl`` or a run id in the store.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelproof.agent import ranking
from kernelproof.agent.agent_errors import ConfigError, ReplayError
from kernelproof.agent.agent_options import AgentOptions
from kernelproof.agent.budget import Budget, price_for
from kernelproof.agent.call_records import Candidate, Completion, Prompt
from kernelproof.agent.caller import Caller
from kernelproof.agent.context import TaskInfo, describe_device, read_task
from kernelproof.agent.llm_backends import Backend, BackendConfig, make_backend, parse_model
from kernelproof.agent.memory import Memory, now
from kernelproof.agent.prompts import PromptContext
from kernelproof.agent.replay import ReplayLog, ReplayWriter
from kernelproof.agent.sizes import sizes_tested
from kernelproof.agent.summary import plot, render_markdown, summarize
from kernelproof.verdict import Verdict


@dataclass(frozen=True)
class Spend:
    input_tokens: int  # over every answered call of the run (resumed and replayed ones included)
    output_tokens: int
    dollars: float  # at the price table's rates
    gpu_seconds: float  # sum of the evaluations' elapsed_s (a verdict served from the store costs 0)
    evaluated: int  # candidates judged by the evaluator
    repeats: int  # answers that repeated an earlier one: not judged again, counted against max_candidates
    calls: int  # LLM calls of the run, answered or failed (resumed and replayed ones included)
    live_calls: int  # calls this process sent to a provider
    failed_calls: int  # calls that got no answer
    retries: int  # extra HTTP attempts of answered live calls


@dataclass(frozen=True)
class RunResult:
    run_id: str  # the run's id in the store
    out_dir: str  # the run's folder
    stop_reason: str  # why the loop ended: max_candidates, no_improvement, sol_target, reply_over_cap, ...
    best: Candidate | None  # the fastest verified candidate (PASS only), None when none passed
    candidates: tuple[Candidate, ...]  # every candidate, in order
    spend: Spend  # what the run used
    diverged: int  # served answers whose prompt hash differs from the logged one
    summary: dict[str, Any]  # as written to summary.json
    files: dict[str, str] = field(
        default_factory=dict
    )  # best, verdict, summary_md, summary_json, plot, replay
    error: str = ""  # the backend's message when stop_reason is backend_error
    stop_detail: str = ""  # the figures behind the stop reason (which budget, spent, needed, left)
    warnings: tuple[str, ...] = ()  # what went wrong without ending in an exception (a reply over its cap)

    @property
    def best_verdict(self) -> Verdict | None:
        return self.best.verdict if self.best is not None else None


class _LazyBackend:
    """Builds the live backend (importing its SDK) on the first call a run really makes."""

    def __init__(self, config: BackendConfig):
        self.config = config
        self.name = config.name
        self._backend: Backend | None = None
        self._lock = threading.Lock()

    def complete(self, prompt: Prompt, max_output_tokens: int) -> Completion:
        with self._lock:
            if self._backend is None:
                self._backend = make_backend(self.config)
        return self._backend.complete(prompt, max_output_tokens)


@dataclass
class Session:
    run_id: str
    model: str
    options: AgentOptions
    task: TaskInfo
    ctx: PromptContext
    memory: Memory
    budget: Budget
    caller: Caller
    out_dir: Path
    stored: dict[str, Candidate]  # a resumed run's judged candidates, by id
    error: str = ""

    @property
    def candidates_dir(self) -> Path:
        return self.out_dir / "candidates"

    def fail(self, reason: str) -> None:
        self.memory.update_run(self.run_id, status="failed", stop_reason=reason, finished_at=now())

    def finish(
        self,
        candidates: list[Candidate],
        stop: str,
        caller: Caller,
        *,
        stop_detail: str = "",
        warnings: list[str] | tuple[str, ...] = (),
        causes: list[str] | tuple[str, ...] = (),
    ) -> RunResult:
        best = ranking.best(candidates)
        files = {"replay": str(self.out_dir / "replay.jsonl")}
        for stale in ("best.py", "best.verdict.json"):  # only this run's best is ever left here
            (self.out_dir / stale).unlink(missing_ok=True)
        if best is not None and best.verdict is not None:
            data = best.source.encode()
            if hashlib.sha256(data).hexdigest() != best.verdict.solution.sha256:  # ranking rules it out
                raise AssertionError(f"the verdict of {best.id} judged other bytes than its source")
            (self.out_dir / "best.py").write_bytes(data)  # the bytes whose verdict is shown beside them
            (self.out_dir / "best.verdict.json").write_text(best.verdict.dumps() + "\n")
            files.update(best=str(self.out_dir / "best.py"), verdict=str(self.out_dir / "best.verdict.json"))
        calls = self.memory.calls(self.run_id)
        answered = [c for c in calls if c["response"] is not None]
        spend = Spend(
            input_tokens=sum(c["input_tokens"] for c in answered),
            output_tokens=sum(c["output_tokens"] for c in answered),
            dollars=self.budget.dollars,
            gpu_seconds=self.budget.gpu_seconds,
            evaluated=self.budget.candidates,
            repeats=self.budget.repeats,
            calls=self.budget.calls,
            live_calls=caller.live_calls,
            failed_calls=len(calls) - len(answered),
            retries=sum(max(0, c["attempts"] - 1) for c in answered),
        )
        summary = summarize(
            candidates,
            calls,
            run_id=self.run_id,
            task=self.task.name,
            model=self.model,
            strategy=self.options.strategy,
            device=f"{self.ctx.device.name} ({self.ctx.device.kind})",
            device_kind=self.ctx.device.kind,
            stop_reason=stop,
            stop_detail=stop_detail or (self.error if stop == "backend_error" else ""),
            budgets_held=self.budget.within_limits(),
            budgets_exceeded=[o.__dict__ for o in self.budget.overruns()],
            limits=self.budget.limits.given(),
            warnings=list(warnings),
            overrun_causes=list(causes),
            price=None if self.budget.price is None else list(self.budget.price.__dict__.values()),
            diverged=caller.diverged,
            spend=spend.__dict__,
        )
        (self.out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (self.out_dir / "summary.md").write_text(render_markdown(summary))
        files.update(
            summary_json=str(self.out_dir / "summary.json"), summary_md=str(self.out_dir / "summary.md")
        )
        png = plot(summary, self.out_dir / "summary.png") if self.options.plot else None
        if png is not None:
            files["plot"] = str(png)
        self.memory.update_run(
            self.run_id,
            status="finished",
            stop_reason=stop,
            best_id=best.id if best else "",
            finished_at=now(),
            summary_json=json.dumps(summary),
        )
        return RunResult(
            self.run_id,
            str(self.out_dir),
            stop,
            best,
            tuple(candidates),
            spend,
            caller.diverged,
            summary,
            files,
            self.error,
            summary["stop_detail"],
            tuple(warnings),
        )


def open_session(
    task: str | Path,
    model: str | BackendConfig,
    options: AgentOptions,
    *,
    backend: Backend | None,
    resume: str | None,
    replay: str | Path | None,
) -> Session:
    if resume and replay:
        raise ReplayError(
            "--resume and --replay do not go together: resume continues a run, replay re-runs one"
        )
    info = read_task(task, options.eval.precision)
    config = model if isinstance(model, BackendConfig) else None
    model = config.name if config is not None else str(model or "")
    live: Backend | None = None  # checked before anything is written: a bad spec or budget leaves no trace
    if not replay:
        config = config or parse_model(model)
        # a fresh run needs the provider at once: a missing SDK or key fails here, before any work;
        # a resumed one may be served entirely from its log, so its SDK is imported only when needed
        live = backend or (_LazyBackend(config) if resume else make_backend(config))
    name = live.name if live is not None else model
    price = price_for(name.partition(":")[2] or name, options.price)
    budget = Budget(options.limits, price, require_price=not replay)
    stored: dict[str, Candidate] = {}
    log: ReplayLog | None = None
    if resume:
        found = load_run(resume, options.db)
        run_id, out_dir, memory = found["run_id"], Path(found["out_dir"]), found["memory"]
        if found["task_sha256"] != info.sha256:
            raise ReplayError(f"run {run_id} was made on another version of {info.name} (its hash differs)")
        log = ReplayLog(run_id, memory.logged_calls(run_id), failed=memory.failed_calls(run_id))
        stored = memory.stored_candidates(run_id)
        memory.update_run(
            run_id, status="running", stop_reason="", options_json=json.dumps(options.to_json())
        )
    else:
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
        out_dir = Path(options.out_dir or Path("kernelproof-runs") / f"{info.name}-{run_id}").resolve()
        _refuse_used_folder(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        memory = Memory(_db_path(options.db, out_dir))
        if replay:
            log = _load_replay(replay, memory, info)
            model = model or str(log.header.get("model", ""))
        memory.create_run(
            run_id=run_id,
            task_path=info.path,
            task_sha256=info.sha256,
            model=model,
            base_url=(config.base_url or "") if config is not None else "",
            strategy=options.strategy,
            out_dir=str(out_dir),
            options_json=json.dumps(options.to_json()),
            replay_of=log.run_id if log else "",
        )
        doc = {
            "run_id": run_id,
            "db": memory.path,
            "task": info.path,
            "task_sha256": info.sha256,
            "model": model,
        }
        (out_dir / "run.json").write_text(json.dumps({**doc, "options": options.to_json()}, indent=2) + "\n")
    (out_dir / "candidates").mkdir(parents=True, exist_ok=True)
    header = {
        "run_id": run_id,
        "task": info.name,
        "task_sha256": info.sha256,
        "model": model,
        "options": {**options.to_json(), "out_dir": None, "db": None},  # where it ran is not carried
    }
    writer = ReplayWriter(out_dir / "replay.jsonl", header)
    caller = Caller(
        run_id,
        memory,
        writer,
        live,
        log,
        log_origin="resumed" if resume else "replayed",
        workers=options.workers,
        cost=budget.cost_of,
    )
    device = describe_device(options.eval.device, options.ceilings)
    sizes = sizes_tested(info.path, device.kind, options.eval.shape_variants)
    ctx = PromptContext(info, device, options.language, sizes)
    return Session(run_id, model, options, info, ctx, memory, budget, caller, out_dir, stored)


RUN_FILES = (
    "run.json",
    "replay.jsonl",
    "candidates",
    "best.py",
    "best.verdict.json",
    "summary.md",
    "summary.json",
    "summary.png",
)


def _refuse_used_folder(out_dir: Path) -> None:
    """One run per folder: a new run refuses a folder that holds another run's files.

    Why: two runs in one folder mix their stories: the second run's candidates overwrite the
    first's at the same names, its answers are appended under the first run's replay header, and
    a first run's best.py would sit beside a summary that says none verified. ``--resume`` takes
    the run that is there.
    """
    if not out_dir.is_dir():
        return
    found = [name for name in RUN_FILES if (out_dir / name).exists()]
    if not found:
        return
    held = ""
    try:
        held = str(json.loads((out_dir / "run.json").read_text()).get("run_id", ""))
    except (OSError, ValueError, AttributeError):
        pass
    which = f"run {held}" if held else f"another run's files ({', '.join(found)})"
    raise ConfigError(
        f"{out_dir} holds {which}: one folder holds one run. Continue it with --resume {out_dir}, "
        "or give a new or empty folder with --out"
    )


def load_run(run: str, db: str | None = None) -> dict[str, Any]:
    """Find a run by folder or id: its row in the store, plus the open store (``memory``)."""
    folder = Path(run)
    if (folder / "run.json").is_file():
        doc = json.loads((folder / "run.json").read_text())
        memory = Memory(doc["db"])
        run_id = doc["run_id"]
    else:
        memory = Memory(_db_path(db, None))
        run_id = run
    row = memory.run(run_id)
    if row is None:
        raise ReplayError(f"no run {run_id!r} in {memory.path}")
    return {**row, "memory": memory, "options": AgentOptions.from_json(json.loads(row["options_json"]))}


def recorded_options(replay: str | Path, db: str | None = None) -> AgentOptions | None:
    """The options a replay log's run was made with (None for a log that does not record them).

    A faithful replay plans the same turns, so it needs the recorded strategy, search settings
    and budgets; only how candidates are evaluated (device, baselines) should change.
    """
    p = Path(replay)
    if p.exists():
        doc = ReplayLog.load(p).header.get("options")
    else:
        row = Memory(_db_path(db, None)).run(str(replay))
        doc = json.loads(row["options_json"]) if row else None
    return AgentOptions.from_json(doc) if doc else None


def _load_replay(replay: str | Path, memory: Memory, info: TaskInfo) -> ReplayLog:
    p = Path(replay)
    if p.exists():
        log = ReplayLog.load(p)
    else:
        row = memory.run(str(replay))
        if row is None:
            raise ReplayError(f"{replay} is neither a replay log, a run folder nor a run id in {memory.path}")
        log = ReplayLog(
            str(replay), memory.logged_calls(str(replay)), {**row}, memory.failed_calls(str(replay))
        )
    logged_sha = log.header.get("task_sha256")
    if logged_sha and logged_sha != info.sha256:
        raise ReplayError(
            f"the replay log {replay} was recorded on another task (its hash differs from {info.name})"
        )
    return log


def _db_path(db: str | None, out_dir: Path | None) -> str:
    """The store: the given file; "" means a file in the run's folder; None the store every verb
    uses when none is named ($KERNELPROOF_DB, else the default: kernelproof.store.db_path)."""
    if db:
        return db
    if db == "" and out_dir is not None:
        return str(out_dir / "agent.db")
    from kernelproof.store import db_path

    return db_path(None) or ""  # never "": db_path(None) always names a file
