"""Records the agent passes between its modules: prompts, completions, requests and candidates.

Frozen dataclasses with a unit in every numeric name (docs/architecture.md, house rule 4). A candidate's judgement is
the evaluator's :class:`~kernelproof.verdict.Verdict`, never a score of the agent's own making;
the only judgement the agent makes itself is that an answer holds no usable solution file
(:class:`Rejection`), and such a candidate is never evaluated and never selected.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from kernelproof import jsonsafe
from kernelproof.verdict import Verdict

# A byte-level BPE token covers at least one byte of text, so a prompt's UTF-8 size bounds its
# token count; chat formatting adds a few tokens per message (OpenAI documents 3-4, Anthropic's
# system framing is of the same order). These margins make the bound hold with room to spare.
TOKENS_PER_MESSAGE = 8  # role markers and separators per message
TOKENS_PER_CALL = 64  # reply priming, system framing


@dataclass(frozen=True)
class Message:
    role: str  # "user" | "assistant"
    content: str  # the message text


@dataclass(frozen=True)
class Prompt:
    system: str  # system instructions
    messages: tuple[Message, ...]  # the conversation, starting and ending with a user message

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "messages": [[m.role, m.content] for m in self.messages]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Prompt:
        return cls(doc["system"], tuple(Message(role, content) for role, content in doc["messages"]))

    def digest(self) -> str:
        """SHA-256 of the prompt's canonical JSON: recorded beside each response in the replay log."""
        text = json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def worst_input_tokens(self) -> int:
        """An upper bound of the prompt's token count, used to reserve budget before a call."""
        size = len(self.system.encode()) + sum(len(m.content.encode()) for m in self.messages)
        return size + TOKENS_PER_MESSAGE * (len(self.messages) + 1) + TOKENS_PER_CALL


@dataclass(frozen=True)
class Completion:
    text: str  # the answer's text
    input_tokens: int  # prompt tokens the provider billed
    output_tokens: int  # completion tokens billed (reasoning tokens included)
    finish_reason: str  # "stop" | "length" | the provider's own value
    model: str  # model name the provider reported
    attempts: int = 1  # HTTP attempts made (1: no retry)
    latency_s: float = 0.0  # wall time of the call, retries and waits included
    usage_estimated: bool = False  # the provider reported no usage: tokens are the reserved upper bounds
    reported_output_tokens: int | None = None  # set when output_tokens was recounted from the text
    note: str = ""  # what kernelproof did to the reply (cut at the byte cap, recounted), in words


@dataclass(frozen=True)
class Request:
    """One LLM call a strategy asks for."""

    kind: str  # draft | refine | ideas | implement | mutate | crossover
    prompt: Prompt  # what is sent
    parents: tuple[str, ...] = ()  # ids of the candidates the prompt builds on
    idea: str = ""  # the optimisation idea the answer should implement (tree)

    @property
    def wants_candidate(self) -> bool:
        """Every kind but ``ideas`` answers with a solution file that is evaluated."""
        return self.kind != "ideas"


@dataclass(frozen=True)
class Rejection:
    """Why an answer became a candidate that was never evaluated."""

    code: str  # malformed_answer | call_failed | not_evaluated
    message: str  # one sentence the model (or a person) can act on
    detail: str = ""  # evidence: the parser's message, the backend's error


@dataclass(frozen=True)
class Candidate:
    id: str  # "t003s01": turn 3, sample 1
    turn: int  # the turn (one batch of calls) that produced it
    sample: int  # index of the call within its turn
    kind: str  # the request kind that produced it
    parents: tuple[str, ...]  # candidate ids its prompt built on
    idea: str  # the idea it implements, when it implements one
    response: str  # the model's full answer (refine replays it as the assistant's turn)
    path: str  # the solution file written under the run's folder ("" when there is none)
    source: str  # the solution file's text ("" when there is none)
    source_sha256: str  # of the solution file's bytes ("" when there is none)
    rejection: Rejection | None = None  # set when it was never evaluated
    verdict: Verdict | None = None  # the evaluator's judgement
    duplicate_of: str = ""  # id of an earlier candidate this answer repeats (same file, or same text
    # without a file, whitespace aside); it is not evaluated again and shares that candidate's judgement
    gpu_s: float = 0.0  # GPU seconds charged: its verdict's elapsed_s, 0 when the store served an earlier one
    note: str = ""  # how the answer was read (code blocks dropped), told to the model with the verdict

    @property
    def passed(self) -> bool:
        return self.rejection is None and self.verdict is not None and self.verdict.passed

    @property
    def evaluated(self) -> bool:
        """Judged by the evaluator in this run (duplicates share a verdict but cost nothing)."""
        return self.verdict is not None and not self.duplicate_of


# A reply's bytes are bounded by its token cap: no tokenizer spends more than a few bytes a token
# on text a program reads (4 on average for English and code), so 16 bytes a token leaves ample
# room, and a reply beyond that is cut (MAX_REPLY_BYTES_PER_TOKEN). A reply whose text is more
# than that many bytes a reported token is counted at its true length instead: one token per
# TYPICAL_BYTES_PER_TOKEN bytes received.
MAX_REPLY_BYTES_PER_TOKEN = 16
TYPICAL_BYTES_PER_TOKEN = 4
RECOUNT_FLOOR_BYTES = 4096  # shorter replies are never recounted (a few long tokens of whitespace)


def bounded_reply(done: Completion, max_output_tokens: int) -> Completion:
    """``done`` with its text cut to the byte cap of ``max_output_tokens`` and, when the text is
    far longer than the output tokens the provider reported, those counted at the text's length.

    Why: the loop reads every reply (extraction, the next prompt, the store); a provider that sends
    megabytes while reporting a thousand tokens must not cost unbounded time or pass uncounted.
    """
    data = done.text.encode()
    size, notes = len(data), []
    fields: dict[str, object] = {}
    if size > RECOUNT_FLOOR_BYTES and size > MAX_REPLY_BYTES_PER_TOKEN * max(done.output_tokens, 1):
        true_tokens = -(-size // TYPICAL_BYTES_PER_TOKEN)
        if true_tokens > done.output_tokens:
            fields.update(output_tokens=true_tokens, reported_output_tokens=done.output_tokens)
            notes.append(
                f"the reply held {size} bytes but reported {done.output_tokens} output tokens; it is counted "
                f"at its length, {true_tokens} tokens ({TYPICAL_BYTES_PER_TOKEN} bytes a token)"
            )
    cap = MAX_REPLY_BYTES_PER_TOKEN * max(max_output_tokens, 1)
    if size > cap:
        fields.update(text=data[:cap].decode(errors="ignore"), finish_reason="length")
        notes.append(
            f"the reply's {size} bytes were cut to {cap} ({MAX_REPLY_BYTES_PER_TOKEN} bytes for each of "
            f"the {max_output_tokens} output tokens it was allowed)"
        )
    if not notes:
        return done
    return dataclasses.replace(done, note="; ".join(notes), **fields)  # type: ignore[arg-type]


def candidate_id(turn: int, sample: int) -> str:
    return f"t{turn:03d}s{sample:02d}"


@dataclass(frozen=True)
class LoggedCall:
    """One answered call in the replay log, keyed by (run, turn, sample)."""

    turn: int  # the turn (one batch of calls)
    sample: int  # index of the call within its turn
    kind: str  # the request kind
    prompt_hash: str  # Prompt.digest() of what was sent; a replay may send a different prompt
    text: str  # the answer
    input_tokens: int  # billed input tokens
    output_tokens: int  # billed output tokens
    cost_usd: float | None  # at the price table's rate when it was made (None: unknown price)
    finish_reason: str  # as the provider reported it
    model: str  # model name the provider reported

    def to_json(self) -> dict[str, Any]:
        """The replay log's line: a non-finite cost as "inf" or "nan" (kernelproof/jsonsafe.py)."""
        return jsonsafe.encode(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LoggedCall:
        """Read a replay log's line; TypeError for a cost that is not a number (or null)."""
        fields = {k: doc[k] for k in cls.__dataclass_fields__}
        try:
            cost = jsonsafe.number(fields["cost_usd"])
        except ValueError as exc:
            raise TypeError(f"cost_usd: {exc}") from None
        return cls(**{**fields, "cost_usd": cost})

    def completion(self) -> Completion:
        return Completion(
            self.text, self.input_tokens, self.output_tokens, self.finish_reason, self.model, attempts=0
        )
