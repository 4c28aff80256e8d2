"""The reward of a verdict for RL training: a number for what the parent established, ``None`` for
what it could not judge (docs/rewards.md).

Why a module of its own: every trainer integration (``kernelproof serve``, ``kernelproof.rl``,
the KernelGYM and OpenRLHF endpoints) must pay the same reward for the same verdict, and the rule
must be read from the verdict alone (house rule 3), never from anything the candidate said.

The rule:

- ``fail``: 0. Every refusal (a mismatch, an exploit caught, a timeout the candidate caused) earns
  nothing, so no hole in the judge is worth searching for.
- ``error``: ``None``, not judged. An error verdict is never the candidate's doing
  (``machine_busy``, ``internal_error``, ``too_large``, ``environment``, ``task_error``,
  ``degenerate_task``, a lost worker): paying 0 would punish the policy for the machine.
- ``pass``: ``correct + speed + coverage``, each a weight times a term in [0, 1]:

  * speed: from the *lower* 95 % bound of the speedup over the best baseline asked for (never the
    point estimate), ``ln(low) / ln(speed_cap)`` clipped to [0, 1]: a speedup the interval
    cannot show earns nothing. No term where the verdict withholds its speed claim (a CPU run, the
    Triton interpreter, an unconfirmed timing) or was not timed.
  * coverage: the share of the GPU work in the solution's own kernels, from the parent's profile
    (``coverage.custom_fraction``), where coverage was judged (a GPU run); no term elsewhere.
  * correct: paid only where the solution's own kernels did the work by the parent's account (a
    judged coverage above zero on the GPU; on the CPU, launches of its own kernels counted by
    the parent and no ``plain_torch`` flag): a plain-PyTorch rewrite that passes on the CPU, where
    coverage is not judged, earns nothing (the E1 class, docs/threat-model.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelproof.verdict import Outcome, Verdict

NOT_JUDGED = None  # the reward of an error verdict: drop the sample, do not punish it


@dataclass(frozen=True)
class RewardWeights:
    """How much each term of a pass is worth (each term lies in [0, 1])."""

    correct: float = 0.5  # a pass whose own kernels did the work
    speed: float = 1.0  # the speedup's lower 95 % bound, on a log scale up to speed_cap
    coverage: float = 0.5  # the share of GPU work in the solution's own kernels
    speed_cap: float = 4.0  # the lower bound that earns the whole speed term

    def __post_init__(self) -> None:
        for name in ("correct", "speed", "coverage"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"reward weight {name} must be a finite number >= 0, not {value!r}")
        if not (
            isinstance(self.speed_cap, (int, float)) and self.speed_cap > 1 and math.isfinite(self.speed_cap)
        ):
            raise ValueError(f"reward speed_cap must be a finite number > 1, not {self.speed_cap!r}")


@dataclass(frozen=True)
class RewardTerms:
    """A reward and how it was made, for logs (OpenRLHF's extra_logs, the service's answers)."""

    reward: float | None  # None: not judged (an error verdict)
    correct: float = 0.0  # each term before its weight, in [0, 1]
    speed: float = 0.0
    coverage: float = 0.0
    why: str = ""  # one sentence: why a term is missing, or why it is None


def reward(verdict: Verdict, weights: RewardWeights | None = None) -> float | None:
    """The reward of one verdict (module docstring); ``None`` when it was not judged."""
    return reward_terms(verdict, weights).reward


def reward_terms(verdict: Verdict, weights: RewardWeights | None = None) -> RewardTerms:
    w = weights or RewardWeights()
    if verdict.verdict is Outcome.ERROR:
        codes = ", ".join(verdict.codes) or "no code"
        return RewardTerms(None, why=f"not judged: an error that is not the solution's ({codes})")
    if verdict.verdict is not Outcome.PASS:
        return RewardTerms(0.0, why="the solution was refused: " + (", ".join(verdict.codes) or "fail"))
    own_work, why_not = _own_kernels_did_the_work(verdict)
    if not own_work:
        return RewardTerms(0.0, why=why_not)
    speed, why_speed = _speed_term(verdict, w.speed_cap)
    coverage = _coverage_term(verdict)
    total = w.correct + w.speed * speed + w.coverage * coverage
    why = why_speed if why_speed else ""
    return RewardTerms(total, correct=1.0, speed=speed, coverage=coverage, why=why)


def _own_kernels_did_the_work(v: Verdict) -> tuple[bool, str]:
    """Did the parent see the solution's own kernels do the work? (What the correct term pays for.)"""
    if any(f.startswith("plain_torch") for f in v.flags):
        return False, "a plain-PyTorch solution: no kernel of its own did the work"
    c = v.coverage
    judged = v.claims is None or v.claims.coverage_judged
    if c is not None and judged and c.custom_fraction is not None:
        return (c.custom_fraction > 0, "" if c.custom_fraction > 0 else "no GPU time in its own kernels")
    if c is not None and c.custom_launches is not None:
        return (
            c.custom_launches > 0,
            "" if c.custom_launches > 0 else "none of its own kernels was launched",
        )
    # Not profiled (a correctness-only run): the static reading above found kernels of its own.
    return True, ""


def _speed_term(v: Verdict, cap: float) -> tuple[float, str]:
    if v.claims is not None and not v.claims.speed:
        return 0.0, f"no speed term: speed is not a claim here ({v.claims.speed_withheld or 'withheld'})"
    best = v.speedup.get("best")
    if best is None or best.ci95 is None:
        return 0.0, "no speed term: not timed, or no 95 % interval"
    low = best.ci95[0]
    if low is None or not math.isfinite(low) or low <= 1.0:
        return 0.0, ""
    return min(1.0, math.log(low) / math.log(cap)), ""


def _coverage_term(v: Verdict) -> float:
    c = v.coverage
    if c is None or c.custom_fraction is None or (v.claims is not None and not v.claims.coverage_judged):
        return 0.0
    share = float(c.custom_fraction)
    return min(1.0, max(0.0, share)) if math.isfinite(share) else 0.0
