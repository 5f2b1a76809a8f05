"""What OpenAI's published OpenAPI spec (2.3.0, tests/fixtures/openai) asks of every answer: chat messages carry
`refusal: null`, answers and chunks a `system_fingerprint`, errors their shape; and every request parameter of the
spec is either served or refused with a 400 naming it, never silently ignored."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.model_runtime.openai_server.openai_spec import COMPLETION_CHUNK, assert_conforms, request_parameters
from tests.model_runtime.openai_server.servers import CHAT_MODEL, sse_chunks

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
COMPLETION = {"prompt": "def", "max_tokens": 3}

# Every parameter of the spec's requests, by what this server does with it.
SERVED = {
    "chat": {"messages", "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop", "n",
             "stream", "stream_options", "tools", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
             "logit_bias", "response_format", "tool_choice", "parallel_tool_calls"},
    "completions": {"prompt", "model", "max_tokens", "temperature", "top_p", "seed", "stop", "n", "stream",
                    "stream_options", "logprobs", "echo", "presence_penalty", "frequency_penalty", "logit_bias"},
}  # fmt: skip
CHANGE_NOTHING = {  # accepted and ignored: they change nothing in the answer (as vLLM)
    "chat": {"user", "metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key",
             "prompt_cache_retention"},
    "completions": {"user"},
}  # fmt: skip
REFUSED = {  # (parameter, a value asking for what is not built; null and the defaults are accepted: best_of = n)
    "chat": {"audio": {"voice": "alloy", "format": "wav"}, "modalities": ["text", "audio"],
             "prediction": {"type": "content", "content": "x"}, "web_search_options": {},
             "functions": [{"name": "f", "parameters": {}}], "function_call": "auto", "reasoning_effort": "low",
             "verbosity": "low", "moderation": {}, "prompt_cache_options": {}},
    "completions": {"suffix": "return x", "best_of": 3},
}  # fmt: skip
PATHS = {"chat": "chat/completions", "completions": "completions"}
BASE = {"chat": CHAT, "completions": COMPLETION}


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_every_parameter_of_the_spec_is_served_ignored_knowingly_or_refused(endpoint):
    groups = [SERVED, CHANGE_NOTHING, REFUSED]
    classified = [name for group in groups for name in group[endpoint]]
    assert len(classified) == len(set(classified)), "a parameter in two groups"
    assert set(classified) == set(request_parameters(endpoint))


CASES = [(endpoint, name, value) for endpoint, refused in REFUSED.items() for name, value in refused.items()]


@pytest.mark.parametrize(("endpoint", "name", "value"), CASES, ids=[f"{e}-{n}" for e, n, _ in CASES])
def test_a_parameter_not_built_is_a_400_naming_it(chat_url, endpoint, name, value):
    response = httpx.post(f"{chat_url}/{PATHS[endpoint]}", json={**BASE[endpoint], name: value}, timeout=60)
    assert response.status_code == 400, response.text
    assert_conforms(response.json(), "ErrorResponse")
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (name, "unsupported_parameter")
    assert error["message"].startswith(f"{name}: this server does not support")


def test_values_that_ask_for_nothing_more_and_parameters_that_change_nothing_are_accepted(chat_url):
    inert = {"audio": None, "suffix": None, "modalities": ["text"], "reasoning_effort": None}
    harmless = {"user": "u1", "metadata": {"k": "v"}, "store": False, "service_tier": "auto"}
    for body in ({**CHAT, **inert, **harmless}, {**COMPLETION, "suffix": None, "best_of": 2, "n": 2, "user": "u"}):
        path = "chat/completions" if "messages" in body else "completions"
        assert httpx.post(f"{chat_url}/{path}", json=body, timeout=60).status_code == 200


def test_the_official_client_hears_which_parameter_is_not_supported(chat_url):
    client = openai.OpenAI(base_url=chat_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(model=CHAT_MODEL, prompt="def", max_tokens=2, suffix="    return x")
    assert refused.value.param == "suffix" and refused.value.code == "unsupported_parameter"
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=CHAT_MODEL, messages=[{"role": "user", "content": [image]}], max_tokens=2)
    assert refused.value.param == "messages[0].content"
    assert "image_url content parts are not supported" in refused.value.message


def test_answers_and_chunks_conform_with_refusal_null_and_a_system_fingerprint(chat_url):
    chat = httpx.post(f"{chat_url}/chat/completions", json=CHAT, timeout=60).json()
    assert_conforms(chat, "CreateChatCompletionResponse")
    assert chat["choices"][0]["message"]["refusal"] is None
    fingerprint = chat["system_fingerprint"]
    assert fingerprint.startswith("fp_")
    completion = httpx.post(f"{chat_url}/completions", json=COMPLETION, timeout=60).json()
    assert_conforms(completion, "CreateCompletionResponse")
    assert completion["system_fingerprint"] == fingerprint  # the same server, the same fingerprint

    for path, body, schema in (("chat/completions", CHAT, "CreateChatCompletionStreamResponse"),
                               ("completions", COMPLETION, COMPLETION_CHUNK)):  # fmt: skip
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        with httpx.stream("POST", f"{chat_url}/{path}", json=body, timeout=60) as response:
            chunks = sse_chunks(response.iter_lines())
        for chunk in chunks[:-1]:
            assert_conforms(chunk, schema)
            assert chunk["system_fingerprint"] == fingerprint
        usage = chunks[-1]
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] > 0
        if path.startswith("chat"):  # the spec's chat chunk allows the usage chunk's empty choices
            assert_conforms(usage, schema)

    client = openai.OpenAI(base_url=chat_url, api_key="unused")
    reply = client.chat.completions.create(model=CHAT_MODEL, **CHAT)
    assert reply.system_fingerprint == fingerprint and reply.choices[0].message.refusal is None


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [("completions", {"prompt": ""}, 400), ("chat/completions", {**CHAT, "model": "gpt-9"}, 404),
     ("completions", {**COMPLETION, "n": 0}, 400), ("nowhere", {}, 404)],
)  # fmt: skip
def test_errors_conform(chat_url, path, body, status):
    response = httpx.post(f"{chat_url}/{path}", json=body, timeout=60)
    assert response.status_code == status
    assert_conforms(response.json(), "ErrorResponse")
