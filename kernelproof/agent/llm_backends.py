"""LLM backends: one chat call through the official OpenAI or Anthropic SDK, with retries and usage.

``openai`` covers OpenAI and every OpenAI-compatible server by base URL (vLLM, SGLang, Ollama,
OpenRouter); ``anthropic`` the Messages API. The SDKs are imported when a backend is built, never
at import, so the core installs without them and a replayed run never needs them.

Why a retry loop of our own (the SDK clients are built with ``max_retries=0``): each attempt and
wait is counted in the call's record, rate limits honour the server's ``Retry-After``, and a
call that fails for good comes back as one :class:`BackendError` whose ``retryable`` flag tells
the loop whether to carry on (the provider is flaky) or stop (the key or model is wrong).

A reply with status 200 whose body is not the provider's format (not JSON, no choices, no usage
numbers) is the provider's failure, not the user's: it is retried like a 5xx.
"""

from __future__ import annotations

import email.utils
import importlib
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kernelproof.agent.agent_errors import BackendError, ConfigError, MissingDependencyError
from kernelproof.agent.call_records import Completion, Prompt

INSTALL_HINT = 'pip install -e ".[agent]" (from the kernelproof checkout)'

# provider prefix -> (SDK, default base URL, environment variable holding the key).
# Local servers take any key; the SDK's own variables (OPENAI_API_KEY, OPENAI_BASE_URL,
# ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL) apply when nothing here overrides them.
PROVIDERS: dict[str, tuple[str, str | None, str | None]] = {
    "openai": ("openai", None, None),
    "anthropic": ("anthropic", None, None),
    "vllm": ("openai", "http://localhost:8000/v1", None),  # `vllm serve` default port
    "sglang": ("openai", "http://localhost:30000/v1", None),  # sglang.launch_server default port
    "ollama": ("openai", "http://localhost:11434/v1", None),  # Ollama's OpenAI-compatible route
    "openrouter": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
}

# HTTP statuses worth retrying: request timeout, lock conflict, rate limit, server errors
# (the same set the SDKs retry themselves; 529 is Anthropic's "overloaded").
RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_RETRY_AFTER_S = 120.0  # a server asking for a longer wait is treated as a permanent refusal


class MalformedReply(Exception):
    """A 200 reply whose body is not what the provider's API returns (invalid JSON, fields missing)."""


@dataclass(frozen=True)
class BackendConfig:
    provider: str  # the prefix the user wrote: openai | anthropic | vllm | sglang | ollama | openrouter
    sdk: str  # the SDK that serves it: openai | anthropic
    model: str  # model name sent to the server
    base_url: str | None = None  # None: the SDK's default (or its *_BASE_URL variable)
    api_key: str | None = None  # None: the SDK's variable
    timeout_s: float = 600.0  # one HTTP attempt
    max_retries: int = 5  # retries after the first attempt, for transient failures only
    backoff_s: float = 1.0  # first wait between attempts, doubled each retry
    max_backoff_s: float = 60.0  # cap of one wait
    temperature: float | None = None  # None: the server's default (reasoning models accept no other)
    token_param: str = "max_completion_tokens"  # OpenAI output cap's name; local servers use max_tokens

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model(
    spec: str, *, base_url: str | None = None, temperature: float | None = None, **overrides: Any
) -> BackendConfig:
    """Turn ``PROVIDER:MODEL`` into a backend configuration (``vllm:Qwen/Qwen3-32B``, ``openai:gpt-5``)."""
    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise ConfigError(f"model {spec!r} is not PROVIDER:MODEL; providers: {', '.join(PROVIDERS)}")
    if provider not in PROVIDERS:
        raise ConfigError(f"unknown provider {provider!r}; choose from {', '.join(PROVIDERS)}")
    sdk, default_url, key_var = PROVIDERS[provider]
    url = base_url or default_url
    api_key = os.environ.get(key_var) if key_var else None
    if sdk == "openai" and url and not api_key and not os.environ.get("OPENAI_API_KEY"):
        api_key = "unused"  # local servers accept any key, but the SDK insists on one
    token_param = "max_completion_tokens" if sdk == "openai" and url is None else "max_tokens"
    fields = dict(
        provider=provider,
        sdk=sdk,
        model=model,
        base_url=url,
        api_key=api_key,
        temperature=temperature,
        token_param=token_param,
    )
    fields.update(overrides)
    return BackendConfig(**fields)


class Backend(Protocol):
    name: str  # "provider:model"

    def complete(self, prompt: Prompt, max_output_tokens: int) -> Completion:
        """One answer to ``prompt``, at most ``max_output_tokens`` long; raises BackendError."""
        ...


def import_sdk(name: str) -> Any:
    """Import an LLM SDK, or say how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingDependencyError(
            f"the {name!r} package is needed for this backend: {INSTALL_HINT}"
        ) from exc


class _SdkBackend:
    """The retry loop shared by both SDKs; subclasses send one attempt."""

    def __init__(self, config: BackendConfig, *, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self.name = config.name
        self._sleep = sleep
        self._rng = random.Random()
        self._sdk = import_sdk(config.sdk)
        base_error = self._sdk.OpenAIError if config.sdk == "openai" else self._sdk.AnthropicError
        try:
            self._client = self._make_client()
        except base_error as exc:  # a missing key, above all
            raise ConfigError(f"{self.name}: the client cannot be made: {_one_line(exc)}") from exc

    def _make_client(self) -> Any:
        raise NotImplementedError

    def _send(self, prompt: Prompt, max_output_tokens: int) -> Completion:
        raise NotImplementedError

    def complete(self, prompt: Prompt, max_output_tokens: int) -> Completion:
        start = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                done = self._attempt(prompt, max_output_tokens)
            except Exception as exc:
                retryable, status, wait_s = self._classify(exc, attempt)
                if not retryable or attempt > self.config.max_retries:
                    raise BackendError(
                        f"{self.name}: {type(exc).__name__}: {_one_line(exc)}",
                        retryable=retryable,
                        status=status,
                        attempts=attempt,
                    ) from exc
                self._sleep(wait_s)
                continue
            elapsed = time.monotonic() - start
            return Completion(
                text=done.text,
                input_tokens=done.input_tokens,
                output_tokens=done.output_tokens,
                finish_reason=done.finish_reason,
                model=done.model,
                attempts=attempt,
                latency_s=elapsed,
                usage_estimated=done.usage_estimated,
            )

    def _attempt(self, prompt: Prompt, max_output_tokens: int) -> Completion:
        """One HTTP attempt; a body the SDK cannot read becomes a MalformedReply."""
        try:
            return self._send(prompt, max_output_tokens)
        except (json.JSONDecodeError, self._sdk.APIResponseValidationError) as exc:
            raise MalformedReply(f"the body is not a valid reply: {_one_line(exc)}") from exc

    def _classify(self, exc: Exception, attempt: int) -> tuple[bool, int | None, float]:
        """(retryable, HTTP status, seconds to wait) for a failed attempt."""
        sdk = self._sdk
        backoff = min(self.config.max_backoff_s, self.config.backoff_s * 2 ** (attempt - 1))
        backoff *= 1 - 0.25 * self._rng.random()  # jitter, so parallel samples do not retry in step
        if isinstance(exc, sdk.APIConnectionError):  # refused, dropped, timed out
            return True, None, backoff
        if isinstance(exc, MalformedReply):  # a 200 with a body that is not a reply: the server's fault
            return True, 200, backoff
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            if status not in RETRYABLE_STATUS and status < 500:
                return False, status, 0.0
            asked = retry_after_s(exc.response.headers)
            if asked is not None and asked > MAX_RETRY_AFTER_S:
                return False, status, 0.0
            return True, status, min(asked, self.config.max_backoff_s) if asked is not None else backoff
        return False, None, 0.0


class OpenAIBackend(_SdkBackend):
    def _make_client(self) -> Any:
        c = self.config
        return self._sdk.OpenAI(api_key=c.api_key, base_url=c.base_url, timeout=c.timeout_s, max_retries=0)

    def _send(self, prompt: Prompt, max_output_tokens: int) -> Completion:
        messages = [{"role": "system", "content": prompt.system}]
        messages += [{"role": m.role, "content": m.content} for m in prompt.messages]
        kwargs: dict[str, Any] = {self.config.token_param: max_output_tokens}
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        resp = self._client.chat.completions.create(model=self.config.model, messages=messages, **kwargs)
        try:
            choice = resp.choices[0]
            text = _text(choice.message.content or "")
            finish, model, usage = str(choice.finish_reason), resp.model or "", resp.usage
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise MalformedReply(f"the body is not a chat completion ({type(exc).__name__}: {exc})") from exc
        if usage is None:  # some compatible servers omit it: charge the bounds that were reserved
            worst_in = prompt.worst_input_tokens()
            return Completion(text, worst_in, max_output_tokens, finish, model, usage_estimated=True)
        return Completion(
            text, _count(usage, "prompt_tokens"), _count(usage, "completion_tokens"), finish, model
        )


class AnthropicBackend(_SdkBackend):
    def _make_client(self) -> Any:
        c = self.config
        return self._sdk.Anthropic(api_key=c.api_key, base_url=c.base_url, timeout=c.timeout_s, max_retries=0)

    def _send(self, prompt: Prompt, max_output_tokens: int) -> Completion:
        kwargs: dict[str, Any] = {}
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        resp = self._client.messages.create(
            model=self.config.model,
            system=prompt.system,
            messages=[{"role": m.role, "content": m.content} for m in prompt.messages],
            max_tokens=max_output_tokens,
            **kwargs,
        )
        try:
            text = "".join(getattr(b, "text", "") for b in resp.content if getattr(b, "type", "") == "text")
            u = resp.usage
            cached = (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0)
        except (AttributeError, TypeError) as exc:
            raise MalformedReply(f"the body is not a message ({type(exc).__name__}: {exc})") from exc
        finish = "length" if resp.stop_reason == "max_tokens" else str(resp.stop_reason)
        inputs = _count(u, "input_tokens") + _count_value(cached, "cached input tokens")
        return Completion(text, inputs, _count(u, "output_tokens"), finish, resp.model or "")


def make_backend(config: BackendConfig, **kwargs: Any) -> Backend:
    """The live backend for a configuration (imports its SDK now)."""
    if config.sdk == "openai":
        return OpenAIBackend(config, **kwargs)
    if config.sdk == "anthropic":
        return AnthropicBackend(config, **kwargs)
    raise ConfigError(f"no SDK named {config.sdk!r}")


def retry_after_s(headers: Any) -> float | None:
    """Seconds a server asked us to wait: ``retry-after-ms``, ``retry-after`` seconds or HTTP date."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _count(usage: Any, name: str) -> int:
    """A token count from a reply's usage: a non-negative integer, else the reply is malformed."""
    return _count_value(getattr(usage, name, None), name)


def _count_value(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedReply(f"the reply's usage has no valid {name} ({value!r})")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise MalformedReply(f"the reply's text is a {type(value).__name__}, not a string")
    return value


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "")
