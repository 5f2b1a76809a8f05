"""Bad requests, keys and names: OpenAI's error body with the right status, and the server keeps serving."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.model_runtime.openai_server.servers import CHAT_MODEL, CONTEXT, serving, sse_chunks

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
COMPLETION = {"prompt": "def", "max_tokens": 2}
LONG = [7] * (CONTEXT + 1)

BAD_REQUESTS = [  # (path, body, param or None, what the message says)
    ("completions", b'{"prompt": "def", ', None, "not valid JSON"),
    ("completions", b"[1, 2]", None, "JSON object"),
    ("completions", {**COMPLETION, "max_tokens": "2"}, "max_tokens", "integer"),
    ("completions", {**COMPLETION, "max_tokens": 0}, "max_tokens", "greater than 0"),
    ("completions", {**COMPLETION, "max_tokens": -5}, "max_tokens", "greater than 0"),
    ("completions", {**COMPLETION, "n": 0}, "n", "greater than or equal to 1"),
    ("completions", {**COMPLETION, "n": 129}, "n", "less than or equal to 128"),
    ("completions", {**COMPLETION, "n": 2, "seed": 2**63 - 1}, "seed", "seed + n - 1"),
    ("completions", {**COMPLETION, "temperature": "hot"}, "temperature", "number"),
    ("completions", {**COMPLETION, "top_p": 0}, "top_p", "greater than 0"),
    ("completions", {**COMPLETION, "stream": "yes"}, "stream", "boolean"),
    ("completions", {"max_tokens": 2}, "prompt", "Field required"),
    ("completions", {"prompt": ["a", [1]]}, "prompt", "a list of token ids, or a non-empty list of strings"),
    ("completions", {"prompt": ["a", ""]}, "prompt", "empty"),
    ("completions", {**COMPLETION, "stop": 5}, "stop", "must be a string or a list of strings"),
    ("completions", {"prompt": ""}, "prompt", "empty"),
    ("completions", {"prompt": [1, 99999]}, "prompt", "token ids must be in [0, 320)"),
    ("completions", {"prompt": LONG}, "prompt", f"maximum context length is {CONTEXT}"),
    ("completions", {"prompt": [7] * 1000, "max_tokens": 100}, "prompt", "1100 (1000 in the prompt, 100 to generate)"),
    ("chat/completions", {**CHAT, "messages": []}, "messages", "at least 1"),
    ("chat/completions", {**CHAT, "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "'user'"),
    ("chat/completions", {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
     "messages[0].content", "image_url content parts are not supported"),
    ("chat/completions", {**CHAT, "messages": [{"role": "user", "content": [{"text": "x"}]}]},
     "messages[0].content", "list of text parts"),
    ("chat/completions", {**CHAT, "tool_choice": "required"}, "tool_choice", 'needs "tools"'),
    ("chat/completions", {**CHAT, "tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice",
     'needs "tools"'),
    ("chat/completions", {**CHAT, "tool_choice": "sometimes"}, "tool_choice", '"auto", "none", "required" or'),
    ("chat/completions", {**CHAT, "response_format": {"type": "json_schema"}}, "response_format",
     'needs "json_schema"'),
    ("chat/completions", {**CHAT, "messages": [{"role": "user", "content": "hi " * CONTEXT}]}, "messages",
     "maximum context length"),
    ("chat/completions", {**CHAT, "max_completion_tokens": 0}, "max_completion_tokens", "greater than 0"),
    ("chat/completions", {**CHAT, "messages": [{"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]},
     "messages[0].tool_calls[0].function.arguments", "not valid JSON"),
]  # fmt: skip


def assert_error(response: httpx.Response, status: int, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and isinstance(error["message"], str)
    assert error["param"] == param
    return error


def post(url: str, path: str, body: dict | bytes) -> httpx.Response:
    if isinstance(body, bytes):
        return httpx.post(f"{url}/{path}", content=body, headers={"content-type": "application/json"}, timeout=60)
    return httpx.post(f"{url}/{path}", json=body, timeout=60)


@pytest.mark.parametrize(("path", "body", "param", "says"), BAD_REQUESTS)
def test_bad_requests_are_400s_in_openais_shape(chat_url, path, body, param, says):
    error = assert_error(post(chat_url, path, body), 400, param)
    assert error["type"] == "invalid_request_error" and says in error["message"], error


@pytest.mark.slow
def test_the_server_keeps_serving_after_bad_requests(chat_url):
    for path, body, _, _ in BAD_REQUESTS:
        assert post(chat_url, path, body).status_code == 400
    assert post(chat_url, "completions", COMPLETION).status_code == 200
    with httpx.stream("POST", f"{chat_url}/chat/completions", json={**CHAT, "stream": True}, timeout=60) as response:
        assert response.status_code == 200
        assert sse_chunks(response.iter_lines())[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_unknown_models_and_routes_are_404s(chat_url):
    error = assert_error(httpx.post(f"{chat_url}/completions", json={**COMPLETION, "model": "gpt-9"}), 404, "model")
    assert error["code"] == "model_not_found" and "gpt-9" in error["message"]
    assert_error(httpx.get(f"{chat_url}/models/gpt-9"), 404, "model")
    assert_error(httpx.get(f"{chat_url}/engines"), 404)
    assert_error(httpx.get(f"{chat_url}/completions"), 405)
    with pytest.raises(openai.NotFoundError, match="gpt-9"):
        openai.OpenAI(base_url=chat_url, api_key="x").completions.create(model="gpt-9", prompt="a", max_tokens=1)


def test_random_weights_take_token_ids_only(random_url):
    error = assert_error(httpx.post(f"{random_url}/completions", json=COMPLETION), 400, "prompt")
    assert "list of token ids" in error["message"]
    error = assert_error(httpx.post(f"{random_url}/chat/completions", json=CHAT), 400, "messages")
    assert "no tokenizer" in error["message"]
    error = assert_error(httpx.post(f"{random_url}/completions", json={"prompt": [1], "stop": "x"}), 400, "stop")
    assert "tokenizer" in error["message"]


def test_an_api_key_guards_every_v1_route_but_not_health(chat_engine):
    with serving(chat_engine, CHAT_MODEL, api_key="s3cret") as url:
        assert httpx.get(url.removesuffix("/v1") + "/health").status_code == 200
        assert assert_error(httpx.get(f"{url}/models"), 401)["code"] == "invalid_api_key"
        assert_error(httpx.get(f"{url}/models", headers={"Authorization": "Bearer nope"}), 401)
        assert_error(httpx.post(f"{url}/completions", json=COMPLETION, headers={"Authorization": "s3cret"}), 401)
        assert httpx.get(f"{url}/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        reply = openai.OpenAI(base_url=url, api_key="s3cret").completions.create(
            model=CHAT_MODEL, prompt="a", max_tokens=1
        )
        assert reply.usage.completion_tokens == 1
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url, api_key="wrong", max_retries=0).models.list()
