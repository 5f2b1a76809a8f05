"""n choices and batch prompts against a real server: choice i of a prompt is the same as a separate request
with seed + i (vLLM's rule), the choices share the prompt's KV-cache blocks instead of each prefilling it, batch
prompts are numbered prompt-major, usage counts each prompt once and every choice's tokens; every response and
chunk validates against OpenAI's published OpenAPI spec."""

from __future__ import annotations

import random

import httpx
import openai

from tests.model_runtime.openai_server.openai_spec import COMPLETION_CHUNK, assert_conforms
from tests.model_runtime.openai_server.servers import CHAT_MODEL, sse_chunks

SEED = 11


def post(url: str, path: str, **body) -> dict:
    response = httpx.post(f"{url}/{path}", json=body, timeout=60)
    assert response.status_code == 200, response.text
    reply = response.json()
    assert_conforms(reply, "CreateChatCompletionResponse" if path.startswith("chat") else "CreateCompletionResponse")
    return reply


def stream(url: str, path: str, **body) -> list[dict]:
    with httpx.stream("POST", f"{url}/{path}", json={**body, "stream": True}, timeout=60) as response:
        assert response.status_code == 200
        chunks = sse_chunks(response.iter_lines())
    schema = "CreateChatCompletionStreamResponse" if path.startswith("chat") else COMPLETION_CHUNK
    for chunk in chunks[:-1] if body.get("stream_options") else chunks:  # the usage chunk has no choices
        assert_conforms(chunk, schema)
    return chunks


def alone(url: str, prompt, seed: int) -> list[int]:
    """The token ids of a separate one-choice request."""
    reply = post(url, "completions", prompt=prompt, max_tokens=12, seed=seed, return_token_ids=True)
    return reply["choices"][0]["token_ids"]


def test_each_choice_is_a_separate_request_with_seed_plus_its_index(chat_url, chat_engine):
    reply = post(chat_url, "completions", prompt="def", max_tokens=12, n=3, seed=SEED, return_token_ids=True)
    assert [c["index"] for c in reply["choices"]] == [0, 1, 2]
    ids = [c["token_ids"] for c in reply["choices"]]
    assert ids == [alone(chat_url, "def", SEED + i) for i in range(3)]
    assert len({tuple(i) for i in ids}) > 1  # sampled at temperature 1: different seeds, different choices
    usage = reply["usage"]
    assert usage["prompt_tokens"] == len(chat_engine.tokenizer.encode("def"))  # once, not once per choice
    assert usage["completion_tokens"] == sum(map(len, ids))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_chat_choices_streamed_and_whole_are_the_seeded_separate_answers(chat_url):
    client = openai.OpenAI(base_url=chat_url, api_key="unused")
    messages = [{"role": "user", "content": "write a loop"}]
    whole = client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=10, n=2, seed=SEED)
    separate = [
        client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=10, seed=SEED + i)
        for i in range(2)
    ]
    assert [c.message.content for c in whole.choices] == [s.choices[0].message.content for s in separate]
    assert [c.finish_reason for c in whole.choices] == [s.choices[0].finish_reason for s in separate]
    assert whole.usage.prompt_tokens == separate[0].usage.prompt_tokens
    assert whole.usage.completion_tokens == sum(s.usage.completion_tokens for s in separate)

    body = {"messages": messages, "max_tokens": 10, "n": 2, "seed": SEED, "stream_options": {"include_usage": True}}
    chunks = stream(chat_url, "chat/completions", **body)
    texts, ends = ["", ""], [None, None]
    for chunk in chunks[:-1]:
        [choice] = chunk["choices"]
        texts[choice["index"]] += choice["delta"].get("content") or ""
        ends[choice["index"]] = choice["finish_reason"] or ends[choice["index"]]
    assert texts == [c.message.content or "" for c in whole.choices]
    assert ends == [c.finish_reason for c in whole.choices]
    assert chunks[-1]["usage"]["completion_tokens"] == whole.usage.completion_tokens


def test_the_choices_share_the_prompts_cache_blocks(chat_url, chat_engine):
    # a prompt nobody sent before (so nothing of it is cached), five blocks of the CPU's 64 tokens and a bit
    prompt = random.Random("n-choices").choices(range(5, 300), k=300)
    counters, block = chat_engine.core.counters, chat_engine.core.blocks.block_size
    read, cached = counters.prompt_tokens, counters.cached_tokens
    reply = post(chat_url, "completions", prompt=prompt, max_tokens=4, n=3, seed=SEED, ignore_eos=True)
    shared = (len(prompt) - 1) // block * block  # the full blocks before the last token: 256 of 300
    # the first choice computed the whole prompt, the two others only what follows the shared blocks
    assert counters.prompt_tokens - read == 3 * len(prompt)
    assert counters.cached_tokens - cached == 2 * shared
    usage = reply["usage"]  # the prompt counted once, as read the first time (nothing cached then)
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (len(prompt), 12)
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0


def test_batch_prompts_are_answered_prompt_major(chat_url, chat_engine):
    texts = ["import os", "class A:"]
    reply = post(chat_url, "completions", prompt=texts, max_tokens=12, n=2, seed=SEED, return_token_ids=True)
    got = [c["token_ids"] for c in reply["choices"]]
    assert [c["index"] for c in reply["choices"]] == [0, 1, 2, 3]
    assert got == [alone(chat_url, text, SEED + i) for text in texts for i in range(2)]
    lengths = [len(chat_engine.tokenizer.encode(text)) for text in texts]
    assert reply["usage"]["prompt_tokens"] == sum(lengths)
    assert reply["usage"]["completion_tokens"] == sum(map(len, got))

    ids = [chat_engine.tokenizer.encode(text) for text in texts]
    as_ids = post(chat_url, "completions", prompt=ids, max_tokens=12, n=2, seed=SEED, return_token_ids=True)
    assert [c["token_ids"] for c in as_ids["choices"]] == got
    single = post(chat_url, "completions", prompt=ids[1], max_tokens=12, seed=SEED + 1, return_token_ids=True)
    assert single["choices"][0]["token_ids"] == got[3]

    chunks = stream(chat_url, "completions", prompt=texts, max_tokens=12, n=2, seed=SEED, return_token_ids=True)
    streamed = [[], [], [], []]
    for chunk in chunks:
        [choice] = chunk["choices"]
        streamed[choice["index"]] += choice["token_ids"]
    assert streamed == got
