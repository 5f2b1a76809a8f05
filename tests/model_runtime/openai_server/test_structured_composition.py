"""Structured generation with the other per-request features, through the real server on random weights: each of
n choices and each prompt of a batch follows the grammar with its own state (choice i still the same as a separate
request with seed + i), streamed and whole; logit_bias and the penalties change the logits before the grammar's mask,
so a bias cannot bring back a token the grammar forbids; logprobs stay the model's raw ones."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import jsonschema
import openai
import pytest

from tests.model_runtime.openai_server.servers import CHAT_MODEL

SCHEMAS = json.loads((Path(__file__).parents[2] / "fixtures/structured/schemas.json").read_text())["schemas"]
MESSAGES = [{"role": "user", "content": "the quick brown fox"}]
SCHEMA = SCHEMAS["flat_object"]
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}
SEED = 5


@pytest.fixture
def client(chat_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=chat_url, api_key="unused", max_retries=0)


def valid(text: str) -> str:
    jsonschema.validate(json.loads(text), SCHEMA)
    return text


def test_each_chat_choice_follows_the_grammar_as_a_separate_request_would(client):
    ask = dict(model=CHAT_MODEL, messages=MESSAGES, response_format=FORMAT, max_tokens=64, temperature=1.0)
    whole = client.chat.completions.create(**ask, n=3, seed=SEED)
    texts = [valid(choice.message.content) for choice in whole.choices]
    alone = [client.chat.completions.create(**ask, seed=SEED + i).choices[0].message.content for i in range(3)]
    assert texts == alone
    assert len(set(texts)) > 1  # sampled: the choices differ, each inside its own grammar state
    streamed: dict[int, str] = defaultdict(str)
    for chunk in client.chat.completions.create(**ask, n=3, seed=SEED, stream=True):
        for choice in chunk.choices:
            streamed[choice.index] += choice.delta.content or ""
    assert [streamed[i] for i in range(3)] == texts


def test_every_prompt_and_choice_of_a_completions_batch_follows_the_grammar(client):
    ask = dict(model=CHAT_MODEL, prompt=["person:", "who:"], max_tokens=64, n=2, seed=SEED)
    whole = client.completions.create(**ask, extra_body={"response_format": FORMAT})
    assert [choice.index for choice in whole.choices] == [0, 1, 2, 3]
    texts = [valid(choice.text) for choice in whole.choices]
    streamed: dict[int, str] = defaultdict(str)
    for chunk in client.completions.create(**ask, stream=True, extra_body={"response_format": FORMAT}):
        for choice in chunk.choices:
            streamed[choice.index] += choice.text
    assert [streamed[i] for i in range(4)] == texts


def test_a_bias_and_penalties_cannot_take_the_answer_out_of_its_grammar(client, chat_engine):
    # +100 on the vocabulary's first half: the grammar forbids most of those ids at any point, and they would win
    half = chat_engine.config.vocab_size // 2
    bias = {str(token): 100 for token in range(half)}
    penalties = {"presence_penalty": 2.0, "frequency_penalty": 2.0}
    for seed in range(3):
        reply = client.chat.completions.create(
            model=CHAT_MODEL, messages=MESSAGES, response_format=FORMAT, max_tokens=64, seed=seed,
            logit_bias=bias, extra_body={"repetition_penalty": 1.5}, **penalties,
        )  # fmt: skip
        assert reply.choices[0].finish_reason == "stop"
        valid(reply.choices[0].message.content)
    free = client.chat.completions.create(
        model=CHAT_MODEL, messages=MESSAGES, max_tokens=4, seed=0, logit_bias=bias,
        extra_body={"return_token_ids": True},
    )  # fmt: skip
    assert all(token < half for token in free.choices[0].token_ids)  # without a grammar, the bias wins


def test_logprobs_of_a_structured_answer_are_the_models_not_the_masked_ones(client):
    reply = client.chat.completions.create(
        model=CHAT_MODEL, messages=MESSAGES, response_format=FORMAT, max_tokens=64, seed=SEED, n=2,
        logprobs=True, top_logprobs=3, extra_body={"return_token_ids": True},
    )  # fmt: skip
    for choice in reply.choices:
        entries = choice.logprobs.content
        assert len(entries) == len(choice.token_ids) and valid(choice.message.content)
        assert all(entry.logprob <= entry.top_logprobs[0].logprob + 1e-4 for entry in entries)
        # the grammar allows only an opening brace first; the model's likeliest tokens there are others
        first = entries[0].top_logprobs
        assert all(math.isfinite(alt.logprob) for alt in first)
        assert any(not alt.token.startswith("{") for alt in first)
