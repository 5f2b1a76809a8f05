"""The `local:` backend's tool grammar: a model that writes an invalid call (a value outside the tool's enum, an
integer out of range, a trailing comma) is held to the tool's schema once it opens the call, in the template's own
format (Hermes JSON and Qwen3-Coder XML); with `tool-grammar=off` the same model's call comes back invalid. Free text
without calls streams as before. The model is a forced checkpoint (tests/agent/forced_output.py) through the real
engine; jsonschema is the judge of the arguments."""

from __future__ import annotations

import jsonschema
import pytest

from tests.agent.forced_output import save_forced_checkpoint
from tests.model_runtime.chat.published_toolcall_cases import FORMAT_TEMPLATE
from tests.model_runtime.checkpoints import CHAT_TEMPLATE
from warpcode.agent.backends.base import ToolCallReady
from warpcode.agent.backends.local import LocalBackend, load_agent_engine
from warpcode.model_runtime.chat.deltas import TextDelta
from warpcode.model_runtime.chat.messages import Message

SET_MODE = {
    "type": "object",
    "properties": {"mode": {"enum": ["fast", "slow"]}, "count": {"type": "integer", "minimum": 1, "maximum": 9}},
    "required": ["mode", "count"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "function": {"name": "set_mode", "description": "Set the mode", "parameters": SET_MODE}}]
# Each a call the tool's schema refuses, in tokens of a real BPE's size.
INVALID = {
    "hermes": ['\n{"name": ', '"set_mode", ', '"arguments": ', '{"mode": ', '"slowest", ', '"count": ', "0,}}\n"],
    "qwen3_coder": ["\n<function=set_mode>\n", "<parameter=mode>\n", "slowest\n", "</parameter>\n", "</function>\n"],
}
TEMPLATES = {"hermes": CHAT_TEMPLATE, "qwen3_coder": FORMAT_TEMPLATE["qwen3_coder"]}
MESSAGES = [Message("system", "You set modes."), Message("user", "go slowest")]


@pytest.fixture(scope="module", params=["hermes", "qwen3_coder"])
def engine(request, tmp_path_factory):
    answer = ["Setting it.\n", "<tool_call>", *INVALID[request.param], "</tool_call>"]
    path = save_forced_checkpoint(tmp_path_factory.mktemp(request.param), TEMPLATES[request.param], answer)
    engine = load_agent_engine(path)
    yield engine
    engine.shutdown()


async def answer(engine, tool_grammar: bool, tools=TOOLS) -> list:
    backend = LocalBackend(engine=engine, max_new_tokens=60, tool_grammar=tool_grammar)
    return [event async for event in backend.stream(MESSAGES, tools)]


def calls(events) -> list:
    return [event.call for event in events if isinstance(event, ToolCallReady)]


def valid(call) -> bool:
    try:
        jsonschema.validate(call.arguments, SET_MODE)
    except jsonschema.ValidationError:
        return False
    return call.error is None and call.name == "set_mode"


async def test_the_grammar_holds_the_call_to_the_schema_and_off_it_does_not(engine):
    held = calls(await answer(engine, tool_grammar=True))
    assert held and all(valid(call) for call in held), held
    free = calls(await answer(engine, tool_grammar=False))
    assert free and not any(valid(call) for call in free), free


async def test_text_before_the_call_streams_unchanged(engine):
    text = "".join(e.text for e in await answer(engine, tool_grammar=True) if isinstance(e, TextDelta))
    assert text.startswith("Setting it.\n")
