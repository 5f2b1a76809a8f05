"""The openai backend against a real HTTP server on 127.0.0.1 speaking the OpenAI streaming wire format."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.backends.chat_server import ChatServer, delta, finish, tool_delta
from warpcode.agent.backends import BackendError, Finish, TextDelta, ThoughtDelta, ToolCallReady, backend_from_spec
from warpcode.agent.backends.openai import DEFAULT_MAX_TOKENS, OpenAIBackend, RetryPolicy
from warpcode.agent.loop import Agent
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime.chat.messages import Message

FAST_RETRY = RetryPolicy(attempts=3, first_delay_s=0.01)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    server = ChatServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


TOOL_CALL_REPLY = [
    delta(role="assistant", reasoning_content="The user wants calc.py."),
    delta(content="Let me "),
    delta(content="read it."),
    tool_delta(0, "", "call_abc", "read_file"),
    tool_delta(0, '{"pa'),
    tool_delta(0, 'th": "ca'),
    tool_delta(1, '{"pattern": "def"}', "call_def", "search"),
    tool_delta(0, 'lc.py"}'),
    finish("tool_calls", {"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333}),
]


async def _collect(backend: OpenAIBackend, messages: list[Message]) -> list:
    return [event async for event in backend.stream(messages, tool_schemas())]


async def test_streamed_text_and_split_tool_call_arguments(server: ChatServer, monkeypatch) -> None:
    monkeypatch.setenv("WARPCODE_API_KEY", "sekrit")
    server.replies = [(200, TOOL_CALL_REPLY)]
    backend = backend_from_spec(f"openai:{server.base_url}#qwen3-coder")
    events = await _collect(backend, [Message("system", "be brief"), Message("user", "show calc.py")])

    assert events[0] == ThoughtDelta("The user wants calc.py.")
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Let me ", "read it."]
    calls = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert [(c.id, c.name, c.arguments, c.error) for c in calls] == [
        ("call_abc", "read_file", {"path": "calc.py"}, None),
        ("call_def", "search", {"pattern": "def"}, None),
    ]
    assert events[-1] == Finish("tool_calls", 321, 12)
    ((path, headers, body),) = server.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sekrit"
    assert body == {
        "model": "qwen3-coder",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "show calc.py"}],
        "tools": tool_schemas(),
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": DEFAULT_MAX_TOKENS,
    }


async def test_the_loop_sends_tool_results_back_with_their_call_ids(
    server: ChatServer, failing_repo: Path, events
) -> None:
    server.replies = [
        (200, TOOL_CALL_REPLY),
        (200, [delta(content="calc.py subtracts."), finish("stop")]),
    ]
    backend = OpenAIBackend(server.base_url + "/chat/completions", retry=FAST_RETRY)
    result = await Agent(failing_repo, backend, events, "auto").prompt("show calc.py")
    assert result.stop_reason == "end_turn" and (result.input_tokens, result.output_tokens) == (321, 12)

    sent = server.requests[1][2]["messages"]
    assert "model" not in server.requests[1][2]
    assert sent[1] == {"role": "user", "content": "show calc.py"}
    assert sent[2] == {
        "role": "assistant",
        "content": "Let me read it.",
        "tool_calls": [
            {
                "id": "call_abc",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'},
            },
            {"id": "call_def", "type": "function", "function": {"name": "search", "arguments": '{"pattern": "def"}'}},
        ],
    }
    assert sent[3]["role"] == "tool" and sent[3]["tool_call_id"] == "call_abc" and "return a - b" in sent[3]["content"]
    assert sent[4]["role"] == "tool" and sent[4]["tool_call_id"] == "call_def" and "calc.py:1:" in sent[4]["content"]
    assert events.text() == "Let me read it.calc.py subtracts."
    assert [u.content.text for u in events.of("agent_thought_chunk")] == ["The user wants calc.py."]


async def test_rate_limit_and_server_errors_are_retried(server: ChatServer) -> None:
    server.replies = [
        (429, {"error": {"message": "slow down"}}),
        (503, {"error": {"message": "warming up"}}),
        (200, [delta(content="ok"), finish("length")]),
    ]
    events = await _collect(OpenAIBackend(server.base_url, retry=FAST_RETRY), [Message("user", "hi")])
    assert [type(e) for e in events] == [TextDelta, Finish] and events[-1].reason == "length"
    assert len(server.requests) == 3


async def test_a_client_error_is_reported_clearly_and_not_retried(
    server: ChatServer, failing_repo: Path, events
) -> None:
    server.replies = [(400, {"error": {"message": "model 'nope' does not exist", "type": "invalid_request_error"}})]
    backend = OpenAIBackend(server.base_url, "nope", retry=FAST_RETRY)
    with pytest.raises(BackendError, match=r"answered HTTP 400 Bad Request: model 'nope' does not exist$"):
        await _collect(backend, [Message("user", "hi")])
    assert len(server.requests) == 1

    server.replies = [(401, {"error": {"message": "bad key"}})]
    result = await Agent(failing_repo, backend, events).prompt("hi")
    reason = result.failure.reason
    assert result.stop_reason == "refusal" and "HTTP 401" in reason and "WARPCODE_API_KEY" in reason


async def test_a_refused_connection_fails_at_once_naming_the_url(server: ChatServer) -> None:
    url = server.base_url
    server.shutdown()
    server.server_close()
    slow_retries = RetryPolicy(attempts=3, first_delay_s=5.0)  # were it retried, this test would take 15 s
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"nothing answers at .*: start the model server") as raised:
        await _collect(OpenAIBackend(url, retry=slow_retries), [Message("user", "hi")])
    assert time.monotonic() - started < 2.0 and url in str(raised.value)


async def test_malformed_tool_call_arguments_reach_the_model_as_an_error(
    server: ChatServer, failing_repo: Path, events
) -> None:
    server.replies = [
        (200, [tool_delta(0, '{"path": calc.py}', "call_1", "read_file"), finish("tool_calls")]),
        (200, [delta(content="fixed"), finish("stop")]),
    ]
    agent = Agent(failing_repo, OpenAIBackend(server.base_url, retry=FAST_RETRY), events, "auto")
    assert (await agent.prompt("read")).stop_reason == "end_turn"
    tool_message = server.requests[1][2]["messages"][-1]
    assert tool_message["tool_call_id"] == "call_1"
    assert tool_message["content"].startswith("Error: the call to read_file was not run: arguments are not valid JSON")


async def test_the_model_and_its_context_come_from_the_server_s_list(
    server: ChatServer, failing_repo: Path, events
) -> None:
    """OpenAI's API requires `model`: without #MODEL the one the server lists is named, and its context is the
    max_model_len vLLM lists instead of an assumed 32,768."""
    server.models = [{"id": "Qwen/Qwen3-30B-A3B", "object": "model", "max_model_len": 131072}]
    server.replies = [(200, [delta(content="hi"), finish("stop")])]
    backend = backend_from_spec(f"openai:{server.base_url}")
    assert (await Agent(failing_repo, backend, events, "auto").prompt("hi")).stop_reason == "end_turn"
    assert server.gets == ["/v1/models"]  # once, before the first request
    assert server.requests[0][2]["model"] == "Qwen/Qwen3-30B-A3B" and backend.context_window == 131_072
    assert events.of("usage_update")[-1].size == 131_072

    named = OpenAIBackend(server.base_url, "other")  # a name the list lacks: its context is not known
    await named.prepare()
    assert (named.model, named.context_window) == ("other", 32_768)


async def test_a_server_listing_several_models_wants_one_named(server: ChatServer, failing_repo: Path, events) -> None:
    server.models = [{"id": f"model-{n}", "object": "model"} for n in range(10)]
    result = await Agent(failing_repo, OpenAIBackend(server.base_url), events).prompt("hi")
    assert result.stop_reason == "refusal"
    assert "serves 10 models (model-0, model-1," in result.failure.reason
    assert result.failure.reason.endswith(f"name one in the model spec, openai:{server.base_url}#MODEL")
    assert server.gets == ["/v1/models"] and not server.requests  # nothing was sent without a model

    named = OpenAIBackend(server.base_url, "model-3")
    server.models[3]["max_model_len"] = 8192
    await named.prepare()
    assert named.context_window == 8192
