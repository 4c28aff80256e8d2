"""What an optimisation run is asked to do: one typed options object (docs/architecture.md, house rule 1)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kernelproof.agent.agent_errors import ConfigError
from kernelproof.agent.budget import DEFAULT_MAX_CALLS, Limits, Price
from kernelproof.agent.strategies import STRATEGIES, SearchSettings
from kernelproof.options import EvalOptions

# How optimize evaluates candidates unless told otherwise: the probed shapes (the task's size
# constants made odd and about half) are part of the contract, so a candidate written only for the
# published shapes fails (shape_specialized) and is never chosen as the best. The prompt gives the
# numbers (kernelproof/agent/sizes.py).
SHAPE_VARIANTS = "auto"


def evaluation(**fields: Any) -> EvalOptions:
    """EvalOptions as optimize uses them: ``shape_variants`` is :data:`SHAPE_VARIANTS` unless given."""
    return EvalOptions(**{"shape_variants": SHAPE_VARIANTS, **fields})


@dataclass(frozen=True)
class AgentOptions:
    strategy: str = "refine"  # refine | best-of-n | tree | evolve
    # candidates, calls, tokens, dollars, GPU seconds; without a bound on calls, tokens or dollars a
    # run gets max_calls=DEFAULT_MAX_CALLS (a provider answering with nothing must not run forever)
    limits: Limits = field(default_factory=Limits)
    search: SearchSettings = field(default_factory=SearchSettings)  # the strategies' knobs
    eval: EvalOptions = field(default_factory=evaluation)  # how each candidate is evaluated
    max_output_tokens: int = 16384  # cap of one answer (shrunk to fit the token and dollar budgets)
    min_output_tokens: int = 1024  # a call whose cap would shrink below this is not made
    patience: int = 4  # stop after this many rounds without a better verified candidate
    sol_target: float | None = None  # stop once the best reaches this speed-of-light fraction
    max_rounds: int = 50  # rounds of candidates (a tree round has an ideas turn and an implement turn)
    max_failed_turns: int = 3  # stop after this many consecutive turns whose calls all failed
    language: str = "triton"  # triton | cuda | any
    workers: int = 8  # concurrent LLM calls
    eval_reserve_s: float | None = None  # GPU seconds reserved per evaluation; None: estimated (see budget)
    price: Price | None = None  # USD per Mtok; None: the price table's entry for the model
    ceilings: str | None = None  # a ceilings JSON file describing the device; None: shipped or datasheet
    plot: bool = True  # draw summary.png at the end (needs matplotlib)
    out_dir: str | None = None  # the run's folder; None: ./kernelproof-runs/<task>-<run id>
    db: str | None = None  # SQLite file shared with the verdict store; None: the default; "": in out_dir

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy {self.strategy!r}; choose from {', '.join(STRATEGIES)}")
        if self.language not in ("triton", "cuda", "any"):
            raise ConfigError(f"unknown language {self.language!r}; choose triton, cuda or any")
        if self.min_output_tokens > self.max_output_tokens:
            raise ConfigError("min_output_tokens is larger than max_output_tokens")
        if self.workers < 1 or self.patience < 1 or self.max_rounds < 1:
            raise ConfigError("workers, patience and max_rounds must be at least 1")
        if not self.limits.bounds_spending():  # a run a user forgot to bound still ends
            object.__setattr__(self, "limits", dataclasses.replace(self.limits, max_calls=DEFAULT_MAX_CALLS))
        for name in ("max_calls", "max_tokens", "max_dollars"):
            value = getattr(self.limits, name)
            if value is not None and not value > 0:
                raise ConfigError(f"{name} must be more than 0, not {value}: a run needs a bound to end")

    def replace(self, **changes: Any) -> AgentOptions:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["eval"]["baselines"] = list(self.eval.baselines)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> AgentOptions:
        doc = dict(doc)
        ev = dict(doc.pop("eval"))
        for key in ("baselines", "distributions"):
            if ev.get(key) is not None:
                ev[key] = tuple(ev[key])
        price = doc.pop("price")
        return cls(
            limits=Limits(**doc.pop("limits")),
            search=SearchSettings(**doc.pop("search")),
            eval=EvalOptions(**ev),
            price=Price(**price) if price else None,
            **doc,
        )
