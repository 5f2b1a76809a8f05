"""Structured generation through the real server and the official `openai` client, on random weights: every
json_schema answer parses and validates against its schema (20 schemas: tests/fixtures/structured/schemas.json,
bounded so that each answer ends within max_tokens), forced tool calls are calls of a defined function with
valid arguments (test_forced_tool_calls.py)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import openai
import pytest

from warpcode.model_runtime.openai_server.schemas import ChatCompletionRequest
from warpcode.model_runtime.openai_server.structured import request_grammar

SCHEMAS = json.loads((Path(__file__).parents[2] / "fixtures/structured/schemas.json").read_text())["schemas"]
MESSAGES = [{"role": "user", "content": "the quick brown fox"}]


@pytest.fixture
def client(chat_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=chat_url, api_key="unused")


def in_parallel(function, items):
    with ThreadPoolExecutor(8) as pool:  # concurrent requests: the rows join and leave the batch as they run
        return list(pool.map(function, items))


def test_every_json_schema_answer_parses_and_validates(client):
    def answer(item):
        seed, (name, schema) = item
        fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
        reply = client.chat.completions.create(
            model="tiny-chat", messages=MESSAGES, response_format=fmt, max_tokens=64, seed=seed, temperature=1.0
        )
        return name, schema, reply.choices[0]

    for name, schema, choice in in_parallel(answer, enumerate(SCHEMAS.items())):
        assert choice.finish_reason == "stop", (name, choice.message.content)
        jsonschema.validate(json.loads(choice.message.content), schema)


def test_a_cached_prompt_and_a_stop_string_keep_the_grammar(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMAS["flat_object"]}}
    ask = dict(model="tiny-chat", messages=MESSAGES, response_format=fmt, max_tokens=64, seed=11)
    first, again = client.chat.completions.create(**ask), client.chat.completions.create(**ask)
    assert again.usage.prompt_tokens_details.cached_tokens > 0  # the prompt's blocks came from the prefix cache
    assert again.choices[0].message.content == first.choices[0].message.content
    cut = client.chat.completions.create(**ask, stop=['"age"'])  # the client's stop string still ends it there
    assert (
        cut.choices[0].finish_reason == "stop"
        and cut.choices[0].message.content == first.choices[0].message.content.split('"age"')[0]
    )


def test_json_object_and_completions_and_streams_follow_the_format(client):
    schema = SCHEMAS["array_of_objects"]
    fmt = {"type": "json_schema", "json_schema": {"name": "points", "schema": schema}}
    text = (
        client.completions.create(
            model="tiny-chat", prompt="points:", max_tokens=64, seed=3, extra_body={"response_format": fmt}
        )
        .choices[0]
        .text
    )
    jsonschema.validate(json.loads(text), schema)
    stream = client.chat.completions.create(
        model="tiny-chat", messages=MESSAGES, response_format=fmt, max_tokens=64, seed=4, stream=True
    )
    jsonschema.validate(json.loads("".join(c.choices[0].delta.content or "" for c in stream if c.choices)), schema)
    for seed in range(2):
        reply = client.chat.completions.create(
            model="tiny-chat", messages=MESSAGES, response_format={"type": "json_object"}, max_tokens=32, seed=seed
        )
        if reply.choices[0].finish_reason == "stop":  # any object: unbounded, so it may run to max_tokens
            assert isinstance(json.loads(reply.choices[0].message.content), dict)
        else:
            assert reply.choices[0].message.content.startswith("{")


def test_a_prompt_left_thinking_gets_its_reasoning_closed_before_the_schema(chat_engine):
    """A template that opens `<think>` for the model: the grammar ends the thought first, so the JSON is content."""
    thinking = SimpleNamespace(tokenizer=SimpleNamespace(**vars(chat_engine.tokenizer)), grammars=chat_engine.grammars)
    thinking.tokenizer.chat_template = "{{ messages }}<|im_start|>assistant\n<think>\n"
    thinking.tokenizer.decode = chat_engine.tokenizer.decode
    prompt = chat_engine.tokenizer.encode("<|im_start|>assistant\n<think>\n")
    fmt = {"type": "json_schema", "json_schema": {"name": "b", "schema": SCHEMAS["boolean_flag"]}}
    request = ChatCompletionRequest.model_validate({"messages": MESSAGES, "response_format": fmt})
    for engine, answer in ((thinking, '</think>\n\n{"ok":true}'), (chat_engine, '{"ok":true}')):
        matcher = request_grammar(engine, request, prompt)
        for token in chat_engine.tokenizer.encode(answer, add_special_tokens=False):
            assert not matcher.finished
            matcher.accept(token)
        assert matcher.finished and not matcher.broken
