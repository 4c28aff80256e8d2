"""Every option of the command line is declared once (kernelproof/commands/cli_options.py), and one
builder reads every verb's flags into the EvalOptions the api takes: a flag has one help text and
one default wherever it appears, and no verb can drift from another."""

from __future__ import annotations

import ast
import inspect
from collections import Counter

import pytest
import typer
from cli_support import DATA, REPO, make_verdict, run_here

from kernelproof import api
from kernelproof.commands.cli_options import FLAG_FIELDS, eval_options
from kernelproof.options import EvalOptions

TASK = str(DATA / "tasks" / "scale_relu.py")
GOOD = str(DATA / "solutions" / "scale_relu_triton.py")

# The flags whose meaning is the verb's own: the same spelling, another thing asked. Each says why;
# any other flag means one thing in every verb.
OWN_MEANING = {
    ("optimize", "--seed"): "the search strategies' random choices, not the evaluation's hidden seed",
    ("optimize", "--samples"): "answers per turn, not raw timing samples",
    ("optimize", "--max-rounds"): "rounds of candidates, not timing rounds",
    ("optimize", "--db"): "'' puts the store in the run's folder instead of none",
    (
        "optimize",
        "--shape-variants",
    ): "auto by default: a search must never choose a shape-specialised kernel",
    ("report", "--db"): "the store a report reads, and only without INPUTS",
    ("certify", "--seed"): "the seed the independent runs' seeds are derived from",
    ("ceilings", "--device"): "a CUDA device only (cuda by default): ceilings are measured on a GPU",
    ("results", "--task"): "a filter on the stored task paths, not a file",
    ("results", "--solution"): "a filter on the stored solution paths, not a file",
    ("verify", "--task"): "the task file a certificate is checked against",
    ("verify", "--solution"): "the solution file a certificate is checked against",
    ("certify", "--out"): "the certificate's path",
    ("optimize", "--out"): "the run's folder",
}
# --json writes what each verb produces (one verdict, a list, an audit, a run): its help says which.
VERB_OWN_FLAGS = {"--json", "--help"}
SOURCES = [REPO / "kernelproof" / "cli.py", *sorted((REPO / "kernelproof" / "commands").glob("*.py"))]


def verbs() -> dict:
    """Every verb of the command line as click sees it, a group's verbs as 'group verb'."""
    from kernelproof import cli

    cli._register_optional()
    root = typer.main.get_command(cli.app)
    out = {}
    for name, command in root.commands.items():
        if hasattr(command, "commands"):
            out |= {f"{name} {sub}": c for sub, c in command.commands.items()}
        else:
            out[name] = command
    return out


def options_of(command) -> dict:
    """The verb's options by their first spelling (typer's own click: told apart by their kind)."""
    return {p.opts[0]: p for p in command.params if p.param_type_name == "option"}


# The verbs that build their EvalOptions from all their parsed flags (eval_options(ctx.params)).
# optimize reads three evaluation flags into its candidates' options and keeps the rest its own.
BUILDERS = {"eval", "bench", "audit", "compare", "kernelbench", "serve", "certify"}


def builds_from_flags(verb: str, command) -> bool:
    """Whether the verb reads its parsed flags through eval_options (it takes a typer.Context)."""
    params = inspect.signature(command.callback).parameters.values()
    takes_context = any(p.annotation in (typer.Context, "typer.Context") for p in params)
    assert takes_context or verb not in BUILDERS, verb
    return verb in BUILDERS


def test_a_flag_in_several_verbs_has_one_help_and_one_default():
    seen: dict[str, dict[tuple[str | None, object], list[str]]] = {}
    for verb, command in verbs().items():
        for flag, option in options_of(command).items():
            if flag in VERB_OWN_FLAGS or (verb, flag) in OWN_MEANING:
                continue
            seen.setdefault(flag, {}).setdefault((option.help, option.default), []).append(verb)
    drift = {flag: forms for flag, forms in seen.items() if len(forms) > 1}
    assert not drift, drift
    shared = [flag for flag, forms in seen.items() if len(next(iter(forms.values()))) > 1]
    assert {"--device", "--time-budget", "--per-device", "--baselines", "--timeout"} <= set(shared)


def test_every_verb_of_its_own_meaning_is_still_there():
    """The exceptions above name flags that exist: a stale one would excuse nothing and hide drift."""
    found = {(verb, flag) for verb, command in verbs().items() for flag in options_of(command)}
    assert set(OWN_MEANING) <= found, sorted(set(OWN_MEANING) - found)


def declared_flags() -> Counter:
    """How often each --flag is declared (typer.Option or its alias Opt) across cli.py and commands/."""
    count: Counter = Counter()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in ("Option", "Opt"):
                continue
            for arg in node.args:
                if (
                    isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and arg.value.startswith("--")
                ):
                    count[arg.value.split("/")[0]] += 1
    return count


def test_no_flag_is_declared_twice_across_the_command_line():
    count = declared_flags()
    assert count["--time-budget"] == 1 and count["--device"] == 2  # the scan reads the sources
    allowed = Counter(flag for _, flag in OWN_MEANING)
    twice = {flag: n for flag, n in count.items() if flag not in VERB_OWN_FLAGS and n > 1 + allowed[flag]}
    assert not twice, twice


def test_every_evaluation_flag_of_a_verb_is_the_one_declaration_and_reaches_the_builder():
    by_flag = {"--" + name.replace("_", "-"): name for name in FLAG_FIELDS}
    wrong = []
    builders = 0
    for verb, command in verbs().items():
        if not builds_from_flags(verb, command):
            continue
        builders += 1
        for flag, option in options_of(command).items():
            if flag in by_flag and option.name != by_flag[flag]:
                wrong.append(f"{verb} {flag}: read as {option.name!r}, which the builder does not know")
    assert builders == len(BUILDERS), builders
    assert not wrong, wrong


def test_a_verb_given_no_flags_evaluates_as_the_api_does_by_default():
    """Every default of every verb that builds EvalOptions is the api's own."""
    differ = {}
    for verb, command in verbs().items():
        if not builds_from_flags(verb, command):
            continue
        defaults = {p.name: p.default for p in options_of(command).values()}
        built = eval_options(defaults)
        if built != EvalOptions():
            differ[verb] = {
                k: v for k, v in built.cache_key_fields().items() if EvalOptions().cache_key_fields()[k] != v
            }
    assert not differ, differ


# A value other than the default for every flag the builder reads.
ASKED = [
    ("device", "cpu"),
    ("baselines", "eager,compile"),
    ("seed", 7),
    ("correctness_only", True),
    ("cpu_threads", 2),
    ("time_when_busy", True),
    ("time_interpreted", True),
    ("kernelbench_compat", True),
    ("eval_mode", True),
    ("refuse_random_reference", True),
    ("shape_variants", "task"),
    ("policy", "library-ok"),
    ("precision", "bf16"),
    ("seeds_per_case", 3),
    ("time_budget", 1.5),
    ("max_rounds", 3),
    ("samples", True),
    ("steady", True),
    ("sanitize", True),
    ("fresh", True),
    ("db", ""),
    ("timeout", 9.0),
    ("import_timeout", 8.0),
    ("case_timeout", 7.0),
    ("timing_timeout", 6.0),
    ("evaluation_timeout", 5.0),
    ("build_cache", "/tmp/builds"),
    ("build_workers", 2),
    ("per_device", 2),
    ("require_sandbox", True),
]


@pytest.mark.parametrize(("name", "value"), ASKED)
def test_each_evaluation_flag_sets_its_field(name, value):
    field = FLAG_FIELDS[name]
    built = eval_options({name: value, "only": ["ignored"], "executor": "ray"})
    expected = tuple(value.split(",")) if name == "baselines" else value
    assert getattr(built, field) == expected != getattr(EvalOptions(), field)


def test_every_flag_the_builder_reads_is_tried_above():
    assert {name for name, _ in ASKED} == set(FLAG_FIELDS)


def test_a_timing_cap_under_the_floor_lowers_the_floor():
    built = eval_options({"max_rounds": 3})
    assert (built.min_rounds, built.max_rounds) == (3, 3)
    assert eval_options({"max_rounds": 50}).min_rounds == EvalOptions().min_rounds


def test_the_flags_eval_takes_reach_the_api_as_asked(capsys, monkeypatch):
    seen = []

    def fake(task, solution, options):
        seen.append(options)
        return make_verdict()

    monkeypatch.setattr(api, "evaluate", fake)
    flags = [
        "--device", "cpu", "--db", "", "--time-budget", "1.5", "--samples", "--steady", "--fresh",
        "--seeds-per-case", "3", "--import-timeout", "8", "--evaluation-timeout", "5", "--cpu-threads", "2",
    ]  # fmt: skip
    ran = run_here(capsys, "eval", TASK, GOOD, *flags)
    assert ran.code == 0, ran.err
    (o,) = seen
    assert (o.time_budget_s, o.keep_samples, o.steady, o.fresh, o.seeds_per_case) == (
        1.5,
        True,
        True,
        True,
        3,
    )
    assert (o.import_timeout_s, o.evaluation_timeout_s, o.cpu_threads, o.db) == (8.0, 5.0, 2, "")
