"""Search strategies: which prompts to send next, given every candidate so far and its verdict.

- ``refine``: one conversation; each turn answers the feedback on the previous answer (the strong
  serial default reported by Kevin and "greedy is a strong default").
- ``best-of-n``: independent samples of the first prompt, n per turn.
- ``tree``: the model proposes optimisation ideas in words for the best verified solutions, then
  several implementations per idea are written and verified; the best become the next nodes
  to expand (CRFM's idea branching, METR/PIKE-style parallel tree search).
- ``evolve``: an archive of verified solutions; each sample mutates a tournament-chosen parent or
  crosses two over (Sakana's crossover prompts, AlphaEvolve/OpenEvolve's archive).

A strategy only plans: the loop runs its requests, evaluates the answers and appends the
candidates to the state. Plans depend only on the state and a seed, so a resumed or replayed run
plans the same turns again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kernelproof.agent.call_records import Candidate, Request
from kernelproof.agent.extract import extract_ideas
from kernelproof.agent.prompts import (
    PromptContext,
    crossover_prompt,
    draft_prompt,
    ideas_prompt,
    implement_prompt,
    mutate_prompt,
    refine_prompt,
)
from kernelproof.agent.ranking import rank

STRATEGIES = ("refine", "best-of-n", "tree", "evolve")


@dataclass(frozen=True)
class SearchSettings:
    samples: int = 4  # answers per turn (best-of-n, evolve)
    ideas: int = 3  # ideas asked per expanded node (tree)
    impls: int = 2  # implementations per idea (tree)
    beam: int = 2  # nodes expanded per round (tree)
    archive_size: int = 8  # verified solutions kept as parents (evolve)
    crossover_rate: float = 0.3  # share of evolve samples that cross two parents over
    window: int = 3  # earlier exchanges kept in the refine conversation
    seed: int = 0  # of the strategies' random choices


@dataclass
class SearchState:
    ctx: PromptContext  # the problem
    candidates: list[Candidate] = field(default_factory=list)  # every candidate so far, in order
    turn: int = 0  # the turn being planned

    def best(self) -> Candidate | None:
        ranked = rank(self.candidates)
        return ranked[0] if ranked else None

    def by_id(self, cid: str) -> Candidate:
        return next(c for c in self.candidates if c.id == cid)


class Strategy:
    name = ""

    def __init__(self, settings: SearchSettings):
        self.s = settings

    def plan(self, state: SearchState) -> list[Request]:
        """The requests of the next turn (all ideas, or all solutions); [] when there is nothing to do."""
        raise NotImplementedError

    def take_ideas(self, requests: list[Request], answers: list[str | None]) -> None:
        """Receive the answers of an ideas turn (only strategies that plan ideas)."""

    def round_open(self) -> bool:
        """Whether the last turn left work for the same round (ideas to implement).

        An ideas turn that yields no idea ends its round: the loop counts it towards the rounds
        and the patience, so a model that answers ideas requests with nothing cannot be asked
        forever.
        """
        return False


class Refine(Strategy):
    name = "refine"

    def plan(self, state: SearchState) -> list[Request]:
        lineage = state.candidates
        if not lineage:
            return [Request("draft", draft_prompt(state.ctx))]
        recent = lineage[-self.s.window :] if self.s.window > 0 else []
        prompt = refine_prompt(state.ctx, recent, state.best())
        return [Request("refine", prompt, parents=(lineage[-1].id,))]


class BestOfN(Strategy):
    name = "best-of-n"

    def plan(self, state: SearchState) -> list[Request]:
        prompt = draft_prompt(state.ctx)
        return [Request("draft", prompt) for _ in range(self.s.samples)]


class Tree(Strategy):
    name = "tree"

    def __init__(self, settings: SearchSettings):
        super().__init__(settings)
        self._pending: list[tuple[str, str]] = []  # (parent id or "", idea) awaiting implementation
        self._expanded: set[str] = set()  # node ids whose ideas were asked for ("" is the root)

    def plan(self, state: SearchState) -> list[Request]:
        if self._pending:
            todo, self._pending = self._pending, []
            return [
                Request(
                    "implement",
                    implement_prompt(state.ctx, state.by_id(pid) if pid else None, idea),
                    parents=(pid,) if pid else (),
                    idea=idea,
                )
                for pid, idea in todo
                for _ in range(self.s.impls)
            ]
        requests = []
        for node in self._frontier(state):
            tried = [c for c in state.candidates if c.parents == ((node.id,) if node else ())]
            prompt = ideas_prompt(state.ctx, node, self.s.ideas, tried)
            requests.append(Request("ideas", prompt, parents=(node.id,) if node else ()))
        return requests

    def take_ideas(self, requests: list[Request], answers: list[str | None]) -> None:
        for req, text in zip(requests, answers):
            if text is None:
                continue
            pid = req.parents[0] if req.parents else ""
            self._expanded.add(pid)
            self._pending += [(pid, idea) for idea in extract_ideas(text, self.s.ideas)]

    def round_open(self) -> bool:
        return bool(self._pending)

    def _frontier(self, state: SearchState) -> list[Candidate | None]:
        ranked = rank(state.candidates)
        fresh = [c for c in ranked if c.id not in self._expanded]
        nodes: list[Candidate | None] = list(fresh[: self.s.beam])
        if not nodes:  # every verified node expanded already: the best again, or the root
            nodes = [ranked[0] if ranked else None]
        return nodes


class Evolve(Strategy):
    name = "evolve"

    def plan(self, state: SearchState) -> list[Request]:
        rng = random.Random(f"evolve:{self.s.seed}:{state.turn}")
        archive = rank(state.candidates)[: self.s.archive_size]
        best = archive[0] if archive else None
        if not archive:  # nothing verified yet: repair recent failures, and fresh drafts for diversity
            failed = [c for c in reversed(state.candidates) if c.source or c.response][: self.s.samples]
            requests = []
            for i in range(self.s.samples):
                if i % 2 == 0 and i // 2 < len(failed):
                    parent = failed[i // 2]
                    requests.append(Request("mutate", mutate_prompt(state.ctx, parent, None), (parent.id,)))
                else:
                    requests.append(Request("draft", draft_prompt(state.ctx)))
            return requests
        requests = []
        for _ in range(self.s.samples):
            if len(archive) >= 2 and rng.random() < self.s.crossover_rate:
                a = _tournament(archive, rng)
                b = _tournament([c for c in archive if c.id != a.id], rng)
                requests.append(Request("crossover", crossover_prompt(state.ctx, a, b), (a.id, b.id)))
            else:
                parent = _tournament(archive, rng)
                requests.append(Request("mutate", mutate_prompt(state.ctx, parent, best), (parent.id,)))
        return requests


def _tournament(ranked: list[Candidate], rng: random.Random, size: int = 2) -> Candidate:
    """The better of ``size`` random picks (ranked is best first)."""
    picks = sorted(rng.sample(range(len(ranked)), min(size, len(ranked))))
    return ranked[picks[0]]


def make_strategy(name: str, settings: SearchSettings) -> Strategy:
    kinds = {cls.name: cls for cls in (Refine, BestOfN, Tree, Evolve)}
    if name not in kinds:
        from kernelproof.agent.agent_errors import ConfigError

        raise ConfigError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}")
    return kinds[name](settings)
