from __future__ import annotations

import sys

import pytest
from agent_loopback import Drop, Raw, Reply, Status

from kernelproof.agent.agent_errors import BackendError, ConfigError, MissingDependencyError
from kernelproof.agent.call_records import Message, Prompt
from kernelproof.agent.llm_backends import (
    AnthropicBackend,
    OpenAIBackend,
    make_backend,
    parse_model,
    retry_after_s,
)

PROMPT = Prompt("You write kernels.", (Message("user", "Write ModelNew."),))


def openai_backend(server, **kw):
    cfg = parse_model("openai:test-model", base_url=server.openai_url, timeout_s=5, backoff_s=0.01, **kw)
    return make_backend(cfg)


def anthropic_backend(server, **kw):
    cfg = parse_model(
        "anthropic:claude-test", base_url=server.anthropic_url, timeout_s=5, backoff_s=0.01, **kw
    )
    return make_backend(cfg.__class__(**{**cfg.__dict__, "api_key": "test-key"}))


def scripted(*actions):
    queue = list(actions)

    def respond(_req):
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return respond


def test_openai_backend_returns_text_usage_and_finish_reason(serve):
    server = serve(scripted(Reply("hello kernel")))
    done = openai_backend(server).complete(PROMPT, 100)
    assert done.text == "hello kernel"
    assert done.input_tokens > 0 and done.output_tokens == 3
    assert done.finish_reason == "stop" and done.attempts == 1
    body = server.requests[0].body
    assert body["messages"][0] == {"role": "system", "content": "You write kernels."}
    assert body["max_tokens"] == 100  # a server by base URL gets the classic parameter name


def test_anthropic_backend_returns_text_usage_and_maps_max_tokens_to_length(serve):
    server = serve(scripted(Reply("x" * 400)))
    done = anthropic_backend(server).complete(PROMPT, 10)
    assert done.output_tokens == 10 and done.finish_reason == "length"
    assert server.requests[0].path == "/v1/messages"
    assert server.requests[0].body["system"] == "You write kernels."


def test_rate_limit_is_retried_after_the_servers_retry_after(serve):
    server = serve(
        scripted(Status(429, {"retry-after-ms": "5"}), Status(429, {"retry-after": "0"}), Reply("ok"))
    )
    done = openai_backend(server).complete(PROMPT, 50)
    assert done.text == "ok" and done.attempts == 3
    assert server.count == 3


def test_dropped_connection_is_retried(serve):
    server = serve(scripted(Drop(), Reply("after the drop")))
    done = anthropic_backend(server).complete(PROMPT, 50)
    assert done.text == "after the drop" and done.attempts == 2


def test_server_error_retries_run_out_into_a_retryable_backend_error(serve):
    server = serve(scripted(Status(503)))
    with pytest.raises(BackendError) as err:
        openai_backend(server, max_retries=2).complete(PROMPT, 50)
    assert err.value.retryable and err.value.status == 503 and err.value.attempts == 3
    assert server.count == 3


MALFORMED = {
    "not json": "{not json",
    "empty": "",
    "another shape": '{"unexpected": true}',
    "no choices": '{"choices": [], "content": []}',
    "a list": "[1, 2]",
    "text usage": '{"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], '
    '"content": [{"type": "text", "text": "x"}], "usage": {"prompt_tokens": "many", "completion_tokens": 1, '
    '"input_tokens": "many", "output_tokens": 1}}',
}


@pytest.mark.parametrize("backend", [openai_backend, anthropic_backend])
@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_200_reply_whose_body_is_not_a_reply_is_retried(serve, backend, body):
    server = serve(scripted(Raw(body), Reply("after the bad body")))
    done = backend(server).complete(PROMPT, 50)
    assert done.text == "after the bad body" and done.attempts == 2


@pytest.mark.parametrize("backend", [openai_backend, anthropic_backend])
def test_malformed_replies_that_do_not_stop_are_a_retryable_backend_error(serve, backend):
    server = serve(scripted(Raw("{not json")))
    with pytest.raises(BackendError) as err:
        backend(server, max_retries=2).complete(PROMPT, 50)
    assert err.value.retryable and err.value.status == 200 and err.value.attempts == 3
    assert "MalformedReply: the body is not a valid reply" in str(err.value) and server.count == 3


def test_authentication_error_is_not_retried(serve):
    server = serve(scripted(Status(401)))
    with pytest.raises(BackendError) as err:
        anthropic_backend(server).complete(PROMPT, 50)
    assert not err.value.retryable and err.value.status == 401
    assert server.count == 1


def test_a_retry_after_beyond_two_minutes_is_a_permanent_refusal(serve):
    server = serve(scripted(Status(429, {"retry-after": "3600"})))
    with pytest.raises(BackendError) as err:
        openai_backend(server).complete(PROMPT, 50)
    assert not err.value.retryable and server.count == 1


def test_missing_sdk_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependencyError, match=r'pip install -e "\.\[agent\]"'):
        OpenAIBackend(parse_model("vllm:some-model"))


def test_temperature_is_sent_only_when_set(serve):
    server = serve(scripted(Reply("a")))
    openai_backend(server).complete(PROMPT, 5)
    openai_backend(server, temperature=0.7).complete(PROMPT, 5)
    assert "temperature" not in server.requests[0].body
    assert server.requests[1].body["temperature"] == 0.7


def test_parse_model_knows_local_server_presets():
    cfg = parse_model("vllm:Qwen/Qwen3-32B")
    assert (
        cfg.sdk == "openai" and cfg.base_url == "http://localhost:8000/v1" and cfg.model == "Qwen/Qwen3-32B"
    )
    assert cfg.token_param == "max_tokens" and cfg.api_key
    assert parse_model("openai:gpt-5").token_param == "max_completion_tokens"
    assert parse_model("ollama:llama3", base_url="http://box:1/v1").base_url == "http://box:1/v1"
    assert isinstance(AnthropicBackend, type)


@pytest.mark.parametrize("spec", ["gpt-5", "nope:model", "openai:"])
def test_parse_model_rejects_bad_specs(spec):
    with pytest.raises(ConfigError):
        parse_model(spec)


def test_retry_after_reads_milliseconds_seconds_and_dates():
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None


def test_a_missing_key_is_a_config_error_before_any_call(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_backend(parse_model("openai:gpt-5"))
