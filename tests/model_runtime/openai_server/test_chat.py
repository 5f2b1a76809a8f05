"""/v1/chat/completions against a real server with the `openai` client: the checkpoint's chat template (tools and
tool history included) is the prompt, streamed deltas add up to the whole message, and answers are well-formed
OpenAI objects. What the random model says is not checked, only that it is shaped right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import openai
import pytest

from tests.model_runtime.checkpoints import CHAT_TEMPLATE
from tests.model_runtime.openai_server.servers import CHAT_MODEL
from tests.model_runtime.prompt_reference import INJECTION, reference_prompt_ids

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
CONVERSATION = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Show me a.py"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_9", "content": "print('hi')"},
]


@pytest.fixture(scope="module")
def client(chat_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=chat_url, api_key="unused")


def prompt_length(engine, messages, tools=None) -> int:
    """The prompt as the template renders it, tool-call arguments as objects (what Hugging Face templates read)."""
    text = engine.tokenizer.apply_chat_template([as_template_reads(m) for m in messages], tools)
    return len(engine.tokenizer.encode(text, add_special_tokens=False))


def as_template_reads(message: dict) -> dict:
    calls = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
             for c in message.get("tool_calls") or []]  # fmt: skip
    return {**message, "tool_calls": calls} if calls else message


def test_a_chat_answer_is_an_openai_message_over_the_template(client, chat_engine):
    messages = CONVERSATION[:2]
    reply = client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=10, temperature=0)
    [choice] = reply.choices
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-") and reply.model == CHAT_MODEL
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.message.tool_calls is None and choice.finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens == prompt_length(chat_engine, messages)
    assert 1 <= reply.usage.completion_tokens <= 10
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert reply.usage.prompt_tokens_details.cached_tokens >= 0


def test_streamed_deltas_add_up_to_the_whole_message(client):
    body = dict(model=CHAT_MODEL, messages=CONVERSATION[:2], max_tokens=20, temperature=0)
    whole = client.chat.completions.create(**body)
    chunks = list(client.chat.completions.create(**body, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


@pytest.mark.parametrize("tool_choice", ["auto", "none", None])
def test_tools_and_tool_history_are_rendered_and_answered_in_shape(client, chat_engine, tool_choice):
    extra = {} if tool_choice is None else {"tool_choice": tool_choice}
    body = dict(model=CHAT_MODEL, messages=CONVERSATION, tools=[READ_FILE], max_tokens=12, temperature=0, **extra)
    reply = client.chat.completions.create(**body)
    assert reply.usage.prompt_tokens == prompt_length(chat_engine, CONVERSATION, [READ_FILE])
    message, finish = reply.choices[0].message, reply.choices[0].finish_reason
    assert finish in ("stop", "length", "tool_calls") and (finish == "tool_calls") == bool(message.tool_calls)
    streamed = list(client.chat.completions.create(**body, stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in streamed)
    assert content == (message.content or "") and streamed[-1].choices[0].finish_reason == finish


def test_control_text_from_the_client_opens_no_turn(client, chat_engine, fast_tokenizer, monkeypatch):
    """Chat-template markup in a client's message, tool result, call arguments and tool description reaches the
    model as text: the prompt's ids are those transformers gives with that text as plain text, and only the
    template's own turns open."""
    submitted: list[list[int]] = []
    submit = chat_engine.submit
    monkeypatch.setattr(chat_engine, "submit", lambda ids, *a, **k: submitted.append(list(ids)) or submit(ids, *a, **k))
    tool = {"type": "function", "function": {**READ_FILE["function"], "description": INJECTION}}
    call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": INJECTION})},
    }
    messages = [
        CONVERSATION[0],
        {"role": "user", "content": INJECTION},
        {"role": "assistant", "content": INJECTION, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_9", "content": INJECTION},
    ]
    reply = client.chat.completions.create(
        model=CHAT_MODEL, messages=messages, tools=[tool], max_tokens=1, temperature=0
    )
    expected = reference_prompt_ids(fast_tokenizer, CHAT_TEMPLATE, [as_template_reads(m) for m in messages], [tool])
    assert submitted == [expected] and reply.usage.prompt_tokens == len(expected)
    # the system turn with the tools, user, assistant, tool, and the generation prompt
    assert expected.count(fast_tokenizer.token_to_id("<|im_start|>")) == 5


def test_developer_messages_and_text_parts_are_accepted(chat_url, chat_engine):
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "You are a coding agent."}]},
        {"role": "user", "content": [{"type": "text", "text": "Show me "}, {"type": "text", "text": "a.py"}]},
    ]
    reply = httpx.post(f"{chat_url}/chat/completions", json={"messages": messages, "max_tokens": 3}, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["prompt_tokens"] == prompt_length(chat_engine, CONVERSATION[:2])


def test_the_readmes_example_streams_an_answer(chat_url, capsys):
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme.split("### `warpcode serve-model`", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    snippet = snippet.replace("http://127.0.0.1:8000/v1", chat_url).replace("Qwen3-Coder-30B-A3B-Instruct", CHAT_MODEL)
    # Greedy: at the default temperature the random model may sample its end token first and print nothing.
    exec(compile(snippet.replace("stream=True,", "stream=True, max_tokens=8, temperature=0,"), "README.md", "exec"), {})
    assert capsys.readouterr().out
