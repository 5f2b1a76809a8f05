"""Forced tool calls through the real server and the official `openai` client, on random weights: tool_choice
"required" or a named function always gives calls of the defined functions with arguments valid against their
schemas, in the template's own format (Hermes JSON, and Qwen3-Coder XML under the published template);
parallel_tool_calls false gives one call; what cannot be constrained is a 400 naming the parameter."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest

from tests.model_runtime.checkpoints import CHAT_TEMPLATE
from warpcode.model_runtime.openai_server.chat import ToolCallStream

MESSAGES = [{"role": "user", "content": "the quick brown fox"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "pattern": "^[a-z./]{1,8}$"},
                    "line": {"type": "integer", "maximum": 99, "minimum": 1},
                    "why": {"type": "string", "maxLength": 6},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "set_mode",
            "parameters": {
                "type": "object",
                "properties": {"mode": {"enum": ["fast", "slow"]}},
                "required": ["mode"],
                "additionalProperties": False,
            },
        },
    },
]
PARAMETERS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}


@pytest.fixture
def client(chat_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=chat_url, api_key="unused")


@pytest.fixture(params=["chat_url", "coder_chat_url"], ids=["hermes", "qwen3_coder"])
def format_client(request) -> openai.OpenAI:
    return openai.OpenAI(base_url=request.getfixturevalue(request.param), api_key="unused")


def in_parallel(function, items):
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(function, items))


def check_calls(calls, names: set[str]):
    for call in calls:
        assert call.type == "function" and call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), PARAMETERS[call.function.name])


def test_required_and_named_tool_choice_always_give_valid_calls(format_client):
    client = format_client

    def ask(item):
        seed, choice, parallel = item
        extra = {} if parallel is None else {"parallel_tool_calls": parallel}
        reply = client.chat.completions.create(
            model="tiny-chat", messages=MESSAGES, tools=TOOLS, tool_choice=choice, max_tokens=128, seed=seed, **extra
        )
        return choice, parallel, reply.choices[0]

    named = {"type": "function", "function": {"name": "set_mode"}}
    cases = [(seed, "required", False) for seed in range(3)] + [(seed, named, None) for seed in range(3)]
    for choice, parallel, answer in in_parallel(ask, cases):
        calls = answer.message.tool_calls
        assert answer.finish_reason == "tool_calls" and calls, answer
        check_calls(calls, {"set_mode"} if choice is named else set(PARAMETERS))
        assert parallel is not False or len(calls) == 1


def test_parallel_tool_calls_false_returns_the_first_call_only():
    call = '<tool_call>\n{"name": "set_mode", "arguments": {"mode": "fast"}}\n</tool_call>'
    for single, count in ((True, 1), (False, 2)):
        stream = ToolCallStream(CHAT_TEMPLATE, TOOLS, single=single)
        calls = stream.feed(call + "\n" + call.replace("fast", "slow")).tool_calls + stream.finish().tool_calls
        assert len(calls) == count and json.loads(calls[0]["function"]["arguments"]) == {"mode": "fast"}


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"tool_choice": "required"}, "tool_choice", 'needs "tools"'),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice",
            "not one of the request's tools",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}},
            "response_format",
            "cannot constrain",
        ),
        (
            {"response_format": {"type": "json_object"}, "tools": TOOLS, "tool_choice": "required"},
            "response_format",
            "send one of them",
        ),
    ],
)
def test_what_cannot_be_constrained_is_a_400_naming_the_parameter(client, body, param, says):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="tiny-chat", messages=MESSAGES, max_tokens=8, extra_body=body)
    assert caught.value.body["param"] == param and says in caught.value.body["message"]
