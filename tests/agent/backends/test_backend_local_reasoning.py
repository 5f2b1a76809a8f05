"""Qwen3 thinking through `local:` and the agent loop: a checkpoint with the published Qwen3 template whose answer
is forced (tests/agent/forced_output.py) thinks, mentions a tool call while thinking, then calls read_file. The
thinking streams as ACP thought chunks, only the real call runs, and the reasoning is given back to the template:
the next prompt is exactly what transformers renders for the conversation with `reasoning_content`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.forced_output import save_forced_checkpoint
from warpcode.agent.backends.local import LocalBackend, load_agent_engine
from warpcode.agent.loop import Agent, Limits
from warpcode.agent.toolbox import tool_schemas

transformers = pytest.importorskip("transformers")
QWEN3 = (Path(__file__).parents[2] / "fixtures" / "chat_templates" / "qwen3.jinja").read_text()
THOUGHT = "\nI could write <tool_call>\n{} right now, but read a.py first.\n"
# The call in tokens of a real BPE's size: the tool grammar's masks (llguidance) refuse one token that spans a whole
# JSON value and the keys after it, though they take the same text in smaller tokens.
CALL_PIECES = ['\n{"name": ', '"read_file", ', '"arguments": ', '{"path": ', '"a.py"}}\n']
CALL = "".join(CALL_PIECES)
ANSWER = ["<think>", THOUGHT, "</think>", "\n\nReading it.\n", "<tool_call>", *CALL_PIECES, "</tool_call>"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    engine = load_agent_engine(save_forced_checkpoint(tmp_path_factory.mktemp("qwen3-thinking"), QWEN3, ANSWER))
    yield engine
    engine.shutdown()


async def test_thinking_streams_as_thoughts_and_goes_back_to_the_template(engine, tmp_path, events, monkeypatch):
    (tmp_path / "a.py").write_text("x = 1\n")
    submitted: list[list[int]] = []
    submit = engine.submit
    monkeypatch.setattr(engine, "submit", lambda ids, *a, **k: submitted.append(list(ids)) or submit(ids, *a, **k))
    agent = Agent(
        tmp_path, LocalBackend(engine=engine, max_new_tokens=32), events, "auto", limits=Limits(max_turn_requests=2)
    )

    result = await agent.prompt("what is in a.py?")

    assert result.stop_reason == "max_turn_requests"  # the forced model asks for a.py every time
    thoughts = "".join(u.content.text for u in events.of("agent_thought_chunk"))
    assert thoughts == THOUGHT * 2
    assert events.text() == "\n\nReading it.\n" * 2
    started = events.of("tool_call")
    assert [u.title for u in started] == ["Read a.py", "Read a.py"]  # the call mentioned while thinking is not made
    first = agent.messages[2]
    assert (first.role, first.reasoning, first.content) == ("assistant", THOUGHT, "\n\nReading it.\n")
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("read_file", {"path": "a.py"})]

    # the second prompt is transformers' rendering of the conversation, reasoning included
    reference = transformers.PreTrainedTokenizerFast(
        tokenizer_object=engine.tokenizer.tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    conversation = [
        {"role": "system", "content": agent.messages[0].content},
        {"role": "user", "content": "what is in a.py?"},
        {
            "role": "assistant",
            "content": "\n\nReading it.\n",
            "reasoning_content": THOUGHT,
            "tool_calls": [{"type": "function", "function": {"name": "read_file", "arguments": {"path": "a.py"}}}],
        },
        {"role": "tool", "content": agent.messages[3].content},
    ]
    text = reference.apply_chat_template(
        conversation, tools=tool_schemas(), chat_template=QWEN3, tokenize=False, add_generation_prompt=True
    )
    assert f"<think>\n{THOUGHT.strip()}\n</think>\n\n" in text  # the template showed the reasoning
    assert submitted[1] == reference.encode(text, add_special_tokens=False)
