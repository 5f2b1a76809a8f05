"""Qwen3 thinking through a real serve-model: a checkpoint with the published Qwen3 template whose answer is forced
(tests/agent/forced_output.py) reasons, mentions a tool call while reasoning, then calls read_file. As vLLM with its
qwen3 reasoning parser: the reasoning comes back as `reasoning_content` (whole and streamed), the call as
`tool_calls`; `chat_template_kwargs` reach the template; reasoning sent back under any of its names is rendered as
transformers renders it. The project's own `openai:` backend reads the model and its context from /v1/models."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.agent.forced_output import save_forced_checkpoint
from tests.model_runtime.openai_server.servers import serving, sse_chunks
from warpcode.agent.backends import Finish, TextDelta, ThoughtDelta, ToolCallReady
from warpcode.agent.backends.openai import OpenAIBackend
from warpcode.model_runtime.chat.messages import Message

transformers = pytest.importorskip("transformers")
QWEN3 = (Path(__file__).parents[2] / "fixtures" / "chat_templates" / "qwen3.jinja").read_text()
MODEL, CONTEXT = "qwen3-thinking", 4096
THOUGHT = "\nI could write <tool_call>\n{} right now, but read a.py first.\n"
CALL = '\n{"name": "read_file", "arguments": {"path": "a.py"}}\n'
ANSWER = ["<think>", THOUGHT, "</think>", "\n\nReading it.\n", "<tool_call>", CALL, "</tool_call>"]
READ_FILE = {
    "type": "function",
    "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
}
QUESTION = [{"role": "user", "content": "what is in a.py?"}]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from warpcode.model_runtime import load

    path = save_forced_checkpoint(tmp_path_factory.mktemp("qwen3-thinking"), QWEN3, ANSWER, context=CONTEXT)
    engine = load(path, device="cpu", show_progress=False)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def url(engine):
    with serving(engine, MODEL) as url:
        yield url


def test_reasoning_content_and_the_real_call_come_back(url) -> None:
    body = {"messages": QUESTION, "tools": [READ_FILE], "max_tokens": 32}
    [choice] = httpx.post(f"{url}/chat/completions", json=body, timeout=60).json()["choices"]
    message = choice["message"]
    assert (message["reasoning_content"], message["content"]) == (THOUGHT, "\n\nReading it.\n")
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == [
        ("read_file", {"path": "a.py"})
    ]
    assert choice["finish_reason"] == "tool_calls"


def test_streamed_reasoning_content_deltas(url) -> None:
    body = {"messages": QUESTION, "tools": [READ_FILE], "max_tokens": 32, "stream": True}
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=60) as response:
        deltas = [c["choices"][0]["delta"] for c in sse_chunks(response.iter_lines()) if c["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == THOUGHT
    assert "".join(d.get("content", "") for d in deltas) == "\n\nReading it.\n"
    calls = [c for d in deltas for c in d.get("tool_calls", [])]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"path": "a.py"}]
    # the reasoning streams as it is generated, before the content
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert all("reasoning_content" not in d for d in deltas[first_content:])


def test_thinking_switched_off_in_the_template_leaves_everything_content(url) -> None:
    body = {"messages": QUESTION, "max_tokens": 32, "chat_template_kwargs": {"enable_thinking": False}}
    message = httpx.post(f"{url}/chat/completions", json=body, timeout=60).json()["choices"][0]["message"]
    assert message["reasoning_content"] is None
    assert message["content"] == "".join(ANSWER)  # the prompt closed the thinking: whatever follows is the answer
    refused = httpx.post(f"{url}/chat/completions", json={**body, "chat_template_kwargs": {"tools": []}}, timeout=60)
    assert refused.status_code == 400 and "chat_template_kwargs" in refused.json()["error"]["message"]


@pytest.mark.parametrize("name", ["reasoning_content", "reasoning", "thinking"])
def test_reasoning_sent_back_renders_as_transformers_renders_it(url, engine, name) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a.py"}}}
    history = [
        *QUESTION,
        {"role": "assistant", "content": "\n\nReading it.\n", name: THOUGHT, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1"},
    ]
    body = {"messages": history, "tools": [READ_FILE], "max_tokens": 1}
    usage = httpx.post(f"{url}/chat/completions", json=body, timeout=60).json()["usage"]
    reference = transformers.PreTrainedTokenizerFast(
        tokenizer_object=engine.tokenizer.tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    text = reference.apply_chat_template(
        history, tools=[READ_FILE], chat_template=QWEN3, tokenize=False, add_generation_prompt=True
    )
    assert THOUGHT.strip() in text
    assert usage["prompt_tokens"] == len(reference.encode(text, add_special_tokens=False))


async def test_the_openai_backend_reads_the_model_and_context_and_streams_thoughts(url) -> None:
    models = httpx.get(f"{url}/models", timeout=10).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in models] == [(MODEL, CONTEXT)]  # as vLLM lists them
    backend = OpenAIBackend(url, max_tokens=32)  # no #MODEL: serve-model names it
    await backend.prepare()
    assert (backend.model, backend.context_window) == (MODEL, CONTEXT)
    events = [e async for e in backend.stream([Message("user", "what is in a.py?")], [READ_FILE])]
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == THOUGHT
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "\n\nReading it.\n"
    assert [e.call.arguments for e in events if isinstance(e, ToolCallReady)] == [{"path": "a.py"}]
    assert isinstance(events[-1], Finish) and events[-1].reason == "tool_calls"
