"""Budgets: candidates, calls, tokens, dollars and GPU seconds, checked before every step.

Why reservations: calls and evaluations of a turn run concurrently, and their cost is known only
afterwards. So before each step the loop reserves that step's worst case (a call: the prompt's
token bound plus its output cap; an evaluation: one candidate and the evaluation's time bound),
admits the step only if spent + reserved + worst case fits every limit, and settles the actual
cost when the step ends. Actual cost never exceeds the reservation, so the sum never exceeds the
limit. A call's output cap shrinks to fit what is left rather than being refused outright, as
long as at least ``min_output_tokens`` fit.

Tokens, dollars, calls and candidates are bounded exactly as long as the provider keeps to the
output cap it is sent: a call's worst case is known before it is sent. Spending is what the
provider reports (the usage in its reply is what it bills), so a reply that reports more tokens
than were reserved is charged in full; the loop then warns and stops, ``overruns`` lists the
limits crossed, and the loop says which reply or evaluation went past its reservation.

GPU seconds are bounded exactly only when the reservation per evaluation (``--eval-reserve``)
is at least what one evaluation can take; the evaluator has no overall deadline per evaluation
(its timeout applies to each worker step), so by default the loop reserves an estimate, the
longest evaluation seen in the run (the timing budget of one shape before the first), and the
summary says whether the GPU budget held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelproof.agent.agent_errors import ConfigError

# The bound a run gets when it is given none on calls, tokens or dollars: rounds and patience end
# a search that goes nowhere, but only a bound on spending ends one whatever the provider answers.
DEFAULT_MAX_CALLS = 100


@dataclass(frozen=True)
class Limits:
    max_candidates: int | None = None  # candidates sent to the evaluator, plus repeats of earlier answers
    max_tokens: int | None = None  # input + output tokens over every call
    max_dollars: float | None = None  # USD over every call, at the price table's rates
    max_gpu_seconds: float | None = None  # sum of the evaluations' elapsed_s (store hits cost 0)
    max_calls: int | None = None  # LLM calls, answered or failed (the retries of one call are one call)

    def bounds_spending(self) -> bool:
        """Whether calls, tokens or dollars are bounded (what ends a run whose answers yield nothing)."""
        return any(v is not None for v in (self.max_calls, self.max_tokens, self.max_dollars))

    def given(self) -> dict[str, float]:
        """The limits that are set, by option name."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Price:
    input_per_mtok: float  # USD per million input tokens
    output_per_mtok: float  # USD per million output tokens (reasoning tokens included)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


# List prices in USD per million tokens as published by the providers (openai.com/api/pricing,
# anthropic.com/pricing), standard tier, no batch or cache discounts. Prices change: check
# them, and override with --price IN,OUT (local servers: --price 0,0). Matched by the longest
# model-name prefix.
PRICES: dict[str, Price] = {
    "gpt-5-nano": Price(0.05, 0.40),
    "gpt-5-mini": Price(0.25, 2.00),
    "gpt-5": Price(1.25, 10.00),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4o": Price(2.50, 10.00),
    "o4-mini": Price(1.10, 4.40),
    "o3-mini": Price(1.10, 4.40),
    "o3": Price(2.00, 8.00),
    "o1": Price(15.00, 60.00),
    "claude-opus-4-5": Price(5.00, 25.00),
    "claude-opus-4": Price(15.00, 75.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
}


def price_for(model: str, override: Price | None = None) -> Price | None:
    """The price of a model: the override, else the longest matching prefix, else None (unknown)."""
    if override is not None:
        return override
    name = model.rsplit("/", 1)[-1]  # "openai/gpt-5" on OpenRouter
    matches = [p for p in PRICES if name.startswith(p)]
    return PRICES[max(matches, key=len)] if matches else None


def parse_price(text: str) -> Price:
    """'1.25,10' -> Price(1.25, 10.0), USD per million input and output tokens."""
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError as exc:
        raise ConfigError(f"price {text!r} is not IN,OUT in USD per million tokens") from exc
    if a < 0 or b < 0:
        raise ConfigError(f"price {text!r} is negative")
    return Price(a, b)


@dataclass(frozen=True)
class Refusal:
    """Why the budget admits no more: the limit, and the figures that decided it."""

    limit: str  # max_candidates | max_calls | max_tokens | max_dollars | max_gpu_seconds
    detail: str  # what the next step would need and what is left, in words


@dataclass(frozen=True)
class Overrun:
    """A limit that spending crossed, with the figures."""

    limit: str  # the option's name
    spent: float  # what was spent
    allowed: float  # the limit


@dataclass(frozen=True)
class CallGrant:
    input_tokens: int  # reserved: the prompt's token bound
    output_tokens: int  # reserved and granted: the call's output cap
    dollars: float  # reserved: cost of both at the price


@dataclass(frozen=True)
class EvalGrant:
    gpu_seconds: float  # reserved: the evaluation's time bound


class Budget:
    """Spending against limits, with reservations for steps in flight (used from one thread)."""

    def __init__(self, limits: Limits, price: Price | None, *, require_price: bool = True):
        if limits.max_dollars is not None and price is None and require_price:
            raise ConfigError("a dollar budget needs the model's price: pass --price IN,OUT (USD per Mtok)")
        self.limits = limits
        self.price = price
        self.tokens = 0  # spent
        self.dollars = 0.0
        self.gpu_seconds = 0.0
        self.candidates = 0  # judged by the evaluator
        self.repeats = 0  # answers equal to an earlier one: not judged again, but counted as candidates
        self.calls = 0  # LLM calls made, answered or failed
        self._tokens_held = 0  # reserved, not yet settled
        self._dollars_held = 0.0
        self._gpu_held = 0.0
        self._candidates_held = 0
        self._calls_held = 0
        self.refused: Refusal | None = None  # why the last refused reservation was refused

    # --- calls -----------------------------------------------------------------------------
    def reserve_call(
        self, worst_input_tokens: int, max_output_tokens: int, min_output_tokens: int
    ) -> CallGrant | None:
        """Reserve a call's worst case; the granted output cap may be smaller than asked. None: no room."""
        lim = self.limits
        if lim.max_calls is not None and self.calls + self._calls_held + 1 > lim.max_calls:
            return self._refuse("max_calls", f"{self.calls} of the {lim.max_calls} calls allowed are made")
        out = max_output_tokens
        if lim.max_tokens is not None:
            left = lim.max_tokens - self.tokens - self._tokens_held
            out = min(out, left - worst_input_tokens)
            if out < min_output_tokens:
                return self._refuse(
                    "max_tokens",
                    f"the next call could use {worst_input_tokens} input tokens (its prompt's UTF-8 bytes "
                    f"bound them) + {min_output_tokens} output tokens at least, and {max(left, 0)} of the "
                    f"{lim.max_tokens} tokens are left ({self.tokens} spent, {self._tokens_held} held)",
                )
        if lim.max_dollars is not None and self.price is not None:
            left_usd = lim.max_dollars - self.dollars - self._dollars_held
            room = left_usd - worst_input_tokens * self.price.input_per_mtok / 1e6
            if self.price.output_per_mtok > 0:
                out = min(out, math.floor(room * 1e6 / self.price.output_per_mtok * (1 - 1e-9)))
            elif room < 0:
                out = -1
            if out < min_output_tokens:
                worst = self.price.cost(worst_input_tokens, min_output_tokens)
                return self._refuse(
                    "max_dollars",
                    f"the next call could cost ${worst:.4f} ({worst_input_tokens} input + "
                    f"{min_output_tokens} output tokens at least, at ${self.price.input_per_mtok:g}/"
                    f"${self.price.output_per_mtok:g} per Mtok), and ${max(left_usd, 0.0):.4f} of the "
                    f"${lim.max_dollars:g} is left (${self.dollars:.4f} spent, ${self._dollars_held:.4f} held)",
                )
        dollars = self.price.cost(worst_input_tokens, out) if self.price else 0.0
        self._tokens_held += worst_input_tokens + out
        self._dollars_held += dollars
        self._calls_held += 1
        return CallGrant(worst_input_tokens, out, dollars)

    def settle_call(self, grant: CallGrant, input_tokens: int, output_tokens: int) -> float:
        """Release the reservation and charge the use the provider reported; returns its cost in USD.

        The reported use is charged even when it is more than was reserved (that is what the
        provider bills); the caller is told by comparing it with the grant.
        """
        self.release_call(grant)
        cost = self.price.cost(input_tokens, output_tokens) if self.price else 0.0
        self.charge_call(input_tokens, output_tokens, cost)
        return cost

    def settle_failed_call(self, grant: CallGrant) -> None:
        """A call that got no answer: nothing reported, nothing billed, but it was a call."""
        self.release_call(grant)
        self.calls += 1

    def release_call(self, grant: CallGrant) -> None:
        self._tokens_held -= grant.input_tokens + grant.output_tokens
        self._dollars_held -= grant.dollars
        self._calls_held -= 1

    def charge_call(self, input_tokens: int, output_tokens: int, dollars: float) -> None:
        """Charge one answered call (also a resumed run's logged calls)."""
        self.tokens += input_tokens + output_tokens
        self.dollars += dollars
        self.calls += 1

    def charge_failed_call(self) -> None:
        """Count a call that failed in the recorded run (a resumed or replayed run fails it again)."""
        self.calls += 1

    def cost_of(self, input_tokens: int, output_tokens: int) -> float | None:
        return self.price.cost(input_tokens, output_tokens) if self.price else None

    # --- evaluations -----------------------------------------------------------------------
    def reserve_eval(self, worst_gpu_seconds: float) -> EvalGrant | None:
        """Reserve one candidate and its evaluation's time bound. None: no room."""
        lim = self.limits
        if (
            lim.max_candidates is not None
            and self._counted() + self._candidates_held + 1 > lim.max_candidates
        ):
            return self._refuse("max_candidates", self._candidates_text())
        if lim.max_gpu_seconds is not None and (
            self.gpu_seconds + self._gpu_held + worst_gpu_seconds > lim.max_gpu_seconds
        ):
            return self._refuse("max_gpu_seconds", self._gpu_text(worst_gpu_seconds))
        self._candidates_held += 1
        self._gpu_held += worst_gpu_seconds
        return EvalGrant(worst_gpu_seconds)

    def settle_eval(self, grant: EvalGrant, gpu_seconds: float) -> None:
        self.release_eval(grant)
        self.charge_eval(gpu_seconds)

    def settle_repeat(self, grant: EvalGrant) -> None:
        """The answer repeats an earlier one: no evaluation, but it counts as a candidate."""
        self.release_eval(grant)
        self.repeats += 1

    def release_eval(self, grant: EvalGrant) -> None:
        """Give back a reservation that was not used (the answer was malformed or the call failed)."""
        self._candidates_held -= 1
        self._gpu_held -= grant.gpu_seconds

    def charge_eval(self, gpu_seconds: float) -> None:
        self.candidates += 1
        self.gpu_seconds += gpu_seconds

    # --- state -----------------------------------------------------------------------------
    def exhausted(self, min_call_tokens: int, worst_gpu_seconds: float) -> Refusal | None:
        """The limit that leaves no room for one more candidate (with the figures), or None."""
        lim = self.limits
        if lim.max_candidates is not None and self._counted() + self._candidates_held >= lim.max_candidates:
            return Refusal("max_candidates", self._candidates_text())
        if lim.max_calls is not None and self.calls + self._calls_held >= lim.max_calls:
            return Refusal("max_calls", f"{self.calls} of the {lim.max_calls} calls allowed are made")
        if lim.max_tokens is not None and self.tokens + self._tokens_held + min_call_tokens > lim.max_tokens:
            return Refusal(
                "max_tokens",
                f"{self.tokens} of the {lim.max_tokens} tokens are spent: fewer than the "
                f"{min_call_tokens} output tokens a call needs at least are left",
            )
        if lim.max_dollars is not None and self.price is not None:
            least = self.price.cost(min_call_tokens, 0)
            if self.dollars + self._dollars_held + least > lim.max_dollars:
                return Refusal(
                    "max_dollars",
                    f"${self.dollars:.4f} of the ${lim.max_dollars:g} is spent: less than the "
                    f"${least:.4f} the smallest call costs is left",
                )
        if lim.max_gpu_seconds is not None:
            if self.gpu_seconds + self._gpu_held + worst_gpu_seconds > lim.max_gpu_seconds:
                return Refusal("max_gpu_seconds", self._gpu_text(worst_gpu_seconds))
        return None

    def overruns(self) -> list[Overrun]:
        """Every limit that spending crossed (empty: the budgets held)."""
        lim = self.limits
        spent = {
            "max_candidates": (self._counted(), lim.max_candidates, 0.0),
            "max_calls": (self.calls, lim.max_calls, 0.0),
            "max_tokens": (self.tokens, lim.max_tokens, 0.0),
            "max_dollars": (self.dollars, lim.max_dollars, 1e-12),
            "max_gpu_seconds": (self.gpu_seconds, lim.max_gpu_seconds, 1e-9),
        }
        return [
            Overrun(k, used, cap)
            for k, (used, cap, eps) in spent.items()
            if cap is not None and used > cap + eps
        ]

    def within_limits(self) -> bool:
        """True when nothing spent is over its limit (the invariant the tests check)."""
        return not self.overruns()

    def _counted(self) -> int:
        return self.candidates + self.repeats

    def _candidates_text(self) -> str:
        return (
            f"{self._counted()} of the {self.limits.max_candidates} candidates allowed are counted "
            f"({self.candidates} evaluated, {self.repeats} repeats of an earlier answer)"
        )

    def _gpu_text(self, worst_gpu_seconds: float) -> str:
        lim = self.limits.max_gpu_seconds
        left = max(0.0, (lim or 0.0) - self.gpu_seconds - self._gpu_held)
        return (
            f"the next evaluation is reserved {worst_gpu_seconds:.1f} GPU s, and {left:.1f} of the "
            f"{lim:g} GPU s are left ({self.gpu_seconds:.1f} spent, {self._gpu_held:.1f} held)"
        )

    def _refuse(self, limit: str, detail: str) -> None:
        self.refused = Refusal(limit, detail)
        return None
