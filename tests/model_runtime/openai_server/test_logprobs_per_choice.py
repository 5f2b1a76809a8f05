"""logprobs and echo with n choices and batch prompts: each choice carries its own logprobs, the same as a separate
request with seed + i; with echo each prompt's choices start with that prompt's text and its prompt logprobs;
streamed chunks add up to the whole answer; every answer and chunk validates against OpenAI's spec."""

from __future__ import annotations

import httpx
import pytest

from tests.model_runtime.openai_server.openai_spec import COMPLETION_CHUNK, ECHOED, assert_conforms
from tests.model_runtime.openai_server.servers import sse_chunks

SEED = 5
TOLERANCE = 1e-4  # the same model on the same device, the rows batched differently
PROMPTS = ["import os", "class A:"]
MESSAGES = [{"role": "user", "content": "write a loop"}]


def post(url: str, path: str, schema: str, **body) -> dict:
    response = httpx.post(f"{url}/{path}", json=body, timeout=60)
    assert response.status_code == 200, response.text
    assert_conforms(response.json(), schema)
    return response.json()


def streamed(url: str, path: str, schema: str, **body) -> list[dict]:
    """The choices of a streamed answer, each chunk's choice in order."""
    with httpx.stream("POST", f"{url}/{path}", json={**body, "stream": True}, timeout=60) as response:
        assert response.status_code == 200
        chunks = sse_chunks(response.iter_lines())
    for chunk in chunks:
        assert_conforms(chunk, schema)
    return [choice for chunk in chunks for choice in chunk["choices"]]


def assert_same_logprobs(got: dict, expected: dict) -> None:
    assert got["tokens"] == expected["tokens"] and got["text_offset"] == expected["text_offset"]
    assert [v is None for v in got["token_logprobs"]] == [v is None for v in expected["token_logprobs"]]
    numbers = [(g, e) for g, e in zip(got["token_logprobs"], expected["token_logprobs"], strict=True) if e is not None]
    assert [g for g, _ in numbers] == pytest.approx([e for _, e in numbers], abs=TOLERANCE)


def test_completion_choices_of_a_batch_each_echo_their_prompt_with_its_logprobs(chat_url, chat_engine):
    body = {"max_tokens": 6, "seed": SEED, "logprobs": 2, "echo": True, "return_token_ids": True}
    schema = "CreateCompletionResponse" + ECHOED
    reply = post(chat_url, "completions", schema, prompt=PROMPTS, n=2, **body)
    choices = reply["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2, 3]
    for index, choice in enumerate(choices):
        prompt = PROMPTS[index // 2]
        prompt_tokens = len(chat_engine.tokenizer.encode(prompt))
        alone = post(chat_url, "completions", schema, prompt=prompt, **{**body, "seed": SEED + index % 2})
        [expected] = alone["choices"]
        assert choice["text"] == expected["text"] and choice["text"].startswith(prompt)
        assert_same_logprobs(choice["logprobs"], expected["logprobs"])
        logprobs = choice["logprobs"]
        assert logprobs["token_logprobs"][0] is None and None not in logprobs["token_logprobs"][1:]
        assert len(logprobs["tokens"]) == prompt_tokens + len(choice["token_ids"])
        assert "".join(logprobs["tokens"][:prompt_tokens]) == prompt
    # the choices of one prompt share its prompt logprobs (computed once, by its first choice)
    for first in (0, 2):
        prompt_tokens = len(chat_engine.tokenizer.encode(PROMPTS[first // 2]))
        a, b = (choices[first + i]["logprobs"]["token_logprobs"][:prompt_tokens] for i in range(2))
        assert a == b

    chunks = streamed(chat_url, "completions", COMPLETION_CHUNK + ECHOED, prompt=PROMPTS, n=2, **body)
    texts, logprobs = [""] * 4, [[] for _ in range(4)]
    for choice in chunks:
        texts[choice["index"]] += choice["text"]
        logprobs[choice["index"]] += choice["logprobs"]["token_logprobs"]
    assert texts == [c["text"] for c in choices]
    for got, choice in zip(logprobs, choices, strict=True):
        expected = choice["logprobs"]["token_logprobs"]
        assert got[0] is None and got[1:] == pytest.approx(expected[1:], abs=TOLERANCE)


def test_chat_choices_each_carry_their_own_logprobs_streamed_and_whole(chat_url):
    body = {"messages": MESSAGES, "max_tokens": 8, "seed": SEED, "logprobs": True, "top_logprobs": 2}
    reply = post(chat_url, "chat/completions", "CreateChatCompletionResponse", n=2, **body)
    contents = [choice["logprobs"]["content"] for choice in reply["choices"]]
    for index, content in enumerate(contents):
        alone = post(chat_url, "chat/completions", "CreateChatCompletionResponse", **{**body, "seed": SEED + index})
        expected = alone["choices"][0]["logprobs"]["content"]
        assert [e["token"] for e in content] == [e["token"] for e in expected] and content
        assert [e["logprob"] for e in content] == pytest.approx([e["logprob"] for e in expected], abs=TOLERANCE)
        assert all(len(e["top_logprobs"]) == 2 for e in content)
    assert [e["token"] for e in contents[0]] != [e["token"] for e in contents[1]]  # seeds apart, answers apart

    chunks = streamed(chat_url, "chat/completions", "CreateChatCompletionStreamResponse", n=2, **body)
    tokens = [[], []]
    for choice in chunks:
        if choice["logprobs"] is not None:
            tokens[choice["index"]] += [e["token"] for e in choice["logprobs"]["content"]]
    assert tokens == [[e["token"] for e in content] for content in contents]
