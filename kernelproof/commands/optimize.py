"""``kernelproof optimize``: a thin layer over :func:`kernelproof.agent.optimize`.

Exit codes (the house table; the command's --help says the same):

- 0 a verified solution was found;
- 1 the run ended without one;
- 2 misuse: a bad option, model spec, task or replay log, a missing SDK (the message says how
  to install it), or a provider that refused the request as written (the key, the model, an
  option: ``backend_error``), since retrying as-is cannot help;
- 3 kernelproof's own failure;
- 4 the LLM provider failed: its calls kept failing after their retries (server errors, dropped
  connections, 200 replies whose body is not a reply: ``backend_unavailable``), or a reply
  reported more tokens than the cap it was sent (``reply_over_cap``). The run's files are
  written as usual, best.py included when a verified solution was found before.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kernelproof import exits
from kernelproof.agent.agent_errors import AgentError
from kernelproof.agent.budget import DEFAULT_MAX_CALLS
from kernelproof.commands.cli_options import Baselines, Device, Timeout, eval_options
from kernelproof.console import make_console, print_error, say

if TYPE_CHECKING:
    from rich.console import Console

    from kernelproof.agent.budget import Limits

EXIT_FOUND, EXIT_NONE = exits.EXIT_PASS, exits.EXIT_REJECTED
EXIT_USAGE, EXIT_INTERNAL, EXIT_PROVIDER = exits.EXIT_USAGE, exits.EXIT_INTERNAL, exits.EXIT_PROVIDER
PROVIDER_FAILURES = frozenset({"backend_unavailable", "reply_over_cap"})  # stop reasons that exit 4
REPLAY_PREFIX = (
    "replay:"  # --model replay:LOG: a recorded run's answers, no provider (kernelproof/agent/replay.py)
)

console = make_console(stderr=True)

Opt = typer.Option


# The verb's own options (the shared ones: commands/options.py), in the order --help lists them.
Task = Annotated[
    Path | None, typer.Argument(help="Task file (KernelBench format). Not needed with --resume.")
]
Model = Annotated[
    str | None,
    Opt(
        "--model",
        "-m",
        help="PROVIDER:MODEL: openai, anthropic, vllm, sglang, ollama, openrouter; or replay:LOG, a "
        "recorded run's answers (as --replay LOG: no key, no network).",
    ),
]
Strategy = Annotated[str, Opt("--strategy", help="refine | best-of-n | tree | evolve")]
MaxCandidates = Annotated[
    int | None,
    Opt(
        "--max-candidates",
        help="Candidates, at most: those evaluated plus repeats (an answer equal to an earlier one).",
    ),
]
MaxCalls = Annotated[
    int | None,
    Opt(
        "--max-calls",
        help="LLM calls over the run, answered or failed. A run always has a bound on calls, tokens or "
        f"dollars: without --max-calls, --max-tokens or --max-dollars it is --max-calls {DEFAULT_MAX_CALLS}.",
    ),
]
MaxTokens = Annotated[int | None, Opt("--max-tokens", help="Input+output tokens over the run.")]
MaxDollars = Annotated[float | None, Opt("--max-dollars", help="USD over the run (needs a price).")]
MaxGpuSeconds = Annotated[float | None, Opt("--max-gpu-seconds", help="Evaluation seconds over the run.")]
Out = Annotated[str | None, Opt("--out", help="The run's folder (default kernelproof-runs/<task>-<run>).")]
Resume = Annotated[str | None, Opt("--resume", help="Continue a run (its folder or id).")]
Replay = Annotated[
    str | None,
    Opt(
        "--replay",
        help="Re-run a recorded run from its replay log (replay.jsonl, folder or id): its strategy and budgets, "
        "evaluated here; no network.",
    ),
]
BaseUrl = Annotated[str | None, Opt("--base-url", help="OpenAI-compatible server URL (vLLM, SGLang...).")]
Price = Annotated[str | None, Opt("--price", help="IN,OUT USD per million tokens (overrides the table).")]
Temperature = Annotated[float | None, Opt("--temperature", help="Sampling temperature.")]
TurnSamples = Annotated[int, Opt("--samples", help="Answers per turn (best-of-n, evolve).")]
Ideas = Annotated[int, Opt("--ideas", help="Ideas per expanded node (tree).")]
Impls = Annotated[int, Opt("--impls", help="Implementations per idea (tree).")]
Beam = Annotated[int, Opt("--beam", help="Nodes expanded per round (tree).")]
Patience = Annotated[int, Opt("--patience", help="Stop after K rounds without improvement.")]
SolTarget = Annotated[float | None, Opt("--sol-target", help="Stop at this speed-of-light fraction (0-1).")]
SearchRounds = Annotated[int, Opt("--max-rounds", help="Rounds of candidates, at most.")]
MaxOutputTokens = Annotated[int, Opt("--max-output-tokens", help="Cap of one answer.")]
Language = Annotated[str, Opt("--language", help="triton | cuda | any")]
StrategySeed = Annotated[int, Opt("--seed", help="Seed of the strategies' random choices.")]
RunShapeVariants = Annotated[
    str,
    Opt(
        "--shape-variants",
        help="auto: the probed shapes (the task's sizes made odd and about half) are part of the "
        "contract, so a shape-specialised candidate is never chosen; probe: they only flag; task: none.",
    ),
]
EvalReserve = Annotated[
    float | None,
    Opt("--eval-reserve", help="GPU seconds reserved per evaluation (default: the longest one seen)."),
]
RunDb = Annotated[
    str | None, Opt("--db", help="SQLite store shared with the verdicts ('' : in the run folder).")
]
Retries = Annotated[int, Opt("--retries", help="Retries of a failed LLM call.")]
CallTimeout = Annotated[float, Opt("--call-timeout", help="Seconds one LLM request may take.")]
NoPlot = Annotated[bool, Opt("--no-plot", help="Do not draw summary.png.")]
JsonPath = Annotated[str | None, Opt("--json", help="Write the run's result as JSON here ('-': stdout).")]


def optimize_command(
    ctx: typer.Context,
    task: Task = None,
    model: Model = None,
    strategy: Strategy = "refine",
    max_candidates: MaxCandidates = None,
    max_calls: MaxCalls = None,
    max_tokens: MaxTokens = None,
    max_dollars: MaxDollars = None,
    max_gpu_seconds: MaxGpuSeconds = None,
    out: Out = None,
    resume: Resume = None,
    replay: Replay = None,
    base_url: BaseUrl = None,
    price: Price = None,
    temperature: Temperature = None,
    samples: TurnSamples = 4,
    ideas: Ideas = 3,
    impls: Impls = 2,
    beam: Beam = 2,
    patience: Patience = 4,
    sol_target: SolTarget = None,
    max_rounds: SearchRounds = 50,
    max_output_tokens: MaxOutputTokens = 16384,
    language: Language = "triton",
    seed: StrategySeed = 0,
    device: Device = "auto",
    baselines: Baselines = "eager",
    eval_timeout: Timeout = 600.0,
    shape_variants: RunShapeVariants = "auto",
    eval_reserve: EvalReserve = None,
    db: RunDb = None,
    retries: Retries = 5,
    call_timeout: CallTimeout = 600.0,
    no_plot: NoPlot = False,
    json_path: JsonPath = None,
) -> None:
    """Let an LLM write and improve kernels for TASK; kernelproof verifies every candidate.

    Exit codes: 0 a verified solution was found; 1 none was; 2 misuse (a bad option, task or
    log, a missing SDK, a provider that refused the key, model or an option); 3 kernelproof's
    own failure; 4 the LLM provider failed (calls still failing after their retries, replies
    that are not replies, a reply over the token cap it was sent).
    """
    from kernelproof.agent import Limits
    from kernelproof.api import optimize
    from kernelproof.cli_progress import Progress, keeping

    model, replay = _replay_in_model(model, replay)
    try:
        limits = Limits(max_candidates, max_tokens, max_dollars, max_gpu_seconds, max_calls)
        if resume:
            found = _resumed(resume, db, limits, no_plot)
            opts, resume = found["options"], found["run_id"]
            task = task or Path(found["task_path"])
            model = model or found["model"]
            base_url = base_url or found["base_url"] or None
        else:
            opts = _new_run(ctx.params, task, model, replay, limits)
            if replay:
                opts = _as_recorded(opts, replay, db, eval_reserve)
        spec = _model_spec(model, replay, base_url, temperature, retries, call_timeout)
        kept = "the run's folder keeps every candidate evaluated so far (continue with --resume RUN)"
        with Progress("optimize", console=console) as shown, keeping(lambda: kept):  # a live clock; Ctrl-C
            result = optimize(task, spec, opts, resume=resume, replay=replay, progress=shown.note)
    except (AgentError, ValueError) as exc:
        print_error(console, str(exc))
        raise typer.Exit(exits.of_error(exc) if isinstance(exc, AgentError) else EXIT_USAGE) from None
    _report(result, make_console(stderr=json_path == "-"))
    _write_json(json_path, result)
    raise typer.Exit(_exit_code(result))


def _replay_in_model(model: str | None, replay: str | None) -> tuple[str | None, str | None]:
    """--model replay:LOG is --replay LOG: a recorded run's answers stand in for a provider."""
    if not (model and model.startswith(REPLAY_PREFIX)):
        return model, replay
    if replay:
        raise typer.BadParameter("give the replay log once: --model replay:LOG or --replay LOG")
    log = model.removeprefix(REPLAY_PREFIX)
    if not log:
        raise typer.BadParameter(
            "--model replay:LOG needs the log: replay:examples/replay/09_gelu.replay.jsonl"
        )
    return None, log


def _new_run(flags: dict, task: Path | None, model: str | None, replay: str | None, limits: Limits):
    """The options of a new run, from its parsed flags: the search, its budgets and how each
    candidate is evaluated (read by the verbs' one builder, commands/cli_options.py)."""
    from kernelproof.agent import AgentOptions, SearchSettings
    from kernelproof.agent.budget import parse_price
    from kernelproof.api import SHAPE_VARIANTS
    from kernelproof.options import normalize_baselines

    if task is None:
        raise typer.BadParameter("TASK is needed (or --resume RUN)")
    if not model and not replay:
        raise typer.BadParameter("--model PROVIDER:MODEL is needed (or --replay LOG)")
    if flags["shape_variants"] not in SHAPE_VARIANTS:
        raise typer.BadParameter(f"--shape-variants must be {' | '.join(SHAPE_VARIANTS)}")
    evaluated_as = eval_options(
        {"device": flags["device"], "baselines": flags["baselines"], "timeout": flags["eval_timeout"]},
        shape_variants=flags["shape_variants"],
        db=flags["db"],
    )
    search = SearchSettings(**{k: flags[k] for k in ("samples", "ideas", "impls", "beam", "seed")})
    return AgentOptions(
        strategy=flags["strategy"],
        limits=limits,
        search=search,
        eval=evaluated_as.replace(baselines=normalize_baselines(evaluated_as.baselines)),
        max_output_tokens=flags["max_output_tokens"],
        min_output_tokens=min(1024, flags["max_output_tokens"]),
        patience=flags["patience"],
        sol_target=flags["sol_target"],
        max_rounds=flags["max_rounds"],
        language=flags["language"],
        eval_reserve_s=flags["eval_reserve"],
        price=parse_price(flags["price"]) if flags["price"] else None,
        plot=not flags["no_plot"],
        out_dir=flags["out"],
        db=flags["db"],
    )


def _as_recorded(opts, replay: str, db: str | None, eval_reserve: float | None):
    """A replayed run plans the recorded turns (strategy, budgets) and evaluates as asked here."""
    from kernelproof.agent.run import recorded_options

    recorded = recorded_options(replay, db)
    if recorded is None:
        return opts
    return recorded.replace(
        eval=opts.eval, eval_reserve_s=eval_reserve, plot=opts.plot, out_dir=opts.out_dir, db=opts.db
    )


def _model_spec(model, replay, base_url, temperature, retries: int, call_timeout: float):
    """The provider's model as asked (none for a replay: the log answers)."""
    from kernelproof.agent import parse_model

    if model and not replay:
        return parse_model(
            model, base_url=base_url, temperature=temperature, max_retries=retries, timeout_s=call_timeout
        )
    return model or ""


def _exit_code(result) -> int:
    """2 for a provider that refused the request as written, 4 for one that kept failing, else 0
    when a verified solution was found and 1 when none was."""
    if result.stop_reason == "backend_error":
        return EXIT_USAGE
    if result.stop_reason in PROVIDER_FAILURES:
        return EXIT_PROVIDER
    return EXIT_FOUND if result.best is not None else EXIT_NONE


def _resumed(run: str, db: str | None, limits: Limits, no_plot: bool) -> dict:
    """The run to resume, with its recorded options; budgets given on the command line replace its own."""
    from kernelproof.agent import Limits, load_run

    found = load_run(run, db)
    opts = found["options"]
    given = {k: v for k, v in limits.__dict__.items() if v is not None}
    opts = opts.replace(limits=Limits(**{**opts.limits.__dict__, **given}), db=found["memory"].path)
    found["options"] = opts.replace(plot=False) if no_plot else opts
    return found


def _say(line: str) -> None:
    say(console, line)


def _report(result, out: Console) -> None:
    from kernelproof.agent import ranking
    from kernelproof.agent.summary import rich_table

    out.print(rich_table(result.summary))
    s = result.spend
    for warning in result.warnings:
        say(out, ("warning:", "yellow"), f" {warning}")
    say(
        out,
        f"stopped: {result.stop_reason}"
        + (f" ({result.stop_detail})" if result.stop_detail else "")
        + f"; {len(result.candidates)} candidates, {s.evaluated} evaluated; "
        f"{s.input_tokens}+{s.output_tokens} tokens, {_dollars(result)}, {s.gpu_seconds:.1f} "
        f"{'eval' if result.summary.get('device_kind') == 'cpu' else 'GPU'} s, "
        f"{s.live_calls} live calls"
        + (f"; {s.repeats} repeats" if s.repeats else "")
        + (f"; {result.diverged} replayed answers met a different prompt" if result.diverged else ""),
    )
    ranking_rule = str(result.summary.get("ranking", ""))
    if ranking_rule.startswith("correctness"):
        say(out, f"ranked by {ranking_rule}")
    if result.best is None:
        say(out, ("no verified solution", "red"))
    else:
        best = f" {result.best.id}: {ranking.speedup_text(result.best)} -> {result.files['best']}"
        say(out, ("best", "green"), best)
    say(out, f"run {result.run_id} in {result.out_dir} (resume with --resume {result.out_dir})")


def _dollars(result) -> str:
    if result.summary.get("price") is None:
        return "$? (no price known for the model: --price IN,OUT)"
    return f"${result.spend.dollars:.4f}"


def _write_json(path: str | None, result) -> None:
    if not path:
        return
    doc = {
        "run_id": result.run_id,
        "out_dir": result.out_dir,
        "stop_reason": result.stop_reason,
        "best": result.files.get("best"),
        "verdict": result.best_verdict.to_json() if result.best_verdict is not None else None,
        "files": result.files,
        "summary": result.summary,
    }
    text = json.dumps(doc, indent=2)
    if path == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(path).write_text(text + "\n")


def register(app: typer.Typer) -> None:
    """Add ``optimize`` to a Typer app (what ``kernelproof.cli`` does)."""
    app.command("optimize")(optimize_command)
