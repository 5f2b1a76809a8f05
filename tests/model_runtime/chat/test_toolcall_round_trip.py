"""Every tool of ours, called with awkward arguments, rendered as a past assistant turn by the real published chat
templates (Qwen3's Hermes JSON; both Qwen3-Coder revisions, one writing Python reprs for lists and dicts), must
parse back from that text to the same arguments with the same types -- on the agent's parser and on serve-model's
chat stream. Our renderer is checked against transformers' on the same conversations."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.model_runtime.chat.published_toolcall_cases import TEMPLATES, same
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime.chat.messages import ToolCall
from warpcode.model_runtime.chat.template import render_chat_template
from warpcode.model_runtime.chat.toolcall_parsers import parser_for_template
from warpcode.model_runtime.openai_server.chat import ToolCallStream

# text a coding agent writes: Python, XML, and this very format's tags (none of them where the format ends a value)
AWKWARD = (
    "\n  if a < b and '</parameter>' in s:  # <tool_call> </tool_call>\n"
    '      print("<function=x>", "</function>", {"k": [1]}, None, True)\n<b>bold</b> \\n \t'
)


def _value(schema: dict[str, Any], name: str) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][-1]
    if kind == "string":
        return f"{name}: {AWKWARD}"
    if kind == "integer":
        return max(schema.get("minimum", 0), 7)
    if kind == "number":
        return 2.5
    if kind == "boolean":
        return name != "replace_all"  # both booleans, across the tools
    if kind == "array":
        return [_value(schema.get("items", {"type": "string"}), f"{name}[{i}]") for i in range(2)]
    properties = schema.get("properties", {})
    return {key: _value(sub, key) for key, sub in properties.items()}


TOOLS = tool_schemas()
CALLS = [(tool["function"]["name"], _value(tool["function"]["parameters"], "")) for tool in TOOLS]


def _conversation(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return [
        {"role": "system", "content": "You edit code."},
        {"role": "user", "content": "Do it."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]


def _assistant_text(rendered: str) -> str:
    """What the model wrote in its last turn: from its first call to the end of the turn."""
    turn = rendered[rendered.rindex("<|im_start|>assistant") :]
    return turn[turn.index("<tool_call>") : turn.rindex("<|im_end|>")]


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_our_render_of_every_tool_call_matches_transformers(template: str) -> None:
    from transformers.utils.chat_template_utils import render_jinja_template

    conversations = [_conversation(name, arguments) for name, arguments in CALLS]
    reference, _ = render_jinja_template(conversations=conversations, tools=TOOLS, chat_template=TEMPLATES[template])
    ours = [render_chat_template(TEMPLATES[template], messages, TOOLS) for messages in conversations]
    assert ours == reference


@pytest.mark.parametrize("template", sorted(TEMPLATES))
@pytest.mark.parametrize(("name", "arguments"), CALLS, ids=[name for name, _ in CALLS])
def test_every_tool_call_parses_back_from_the_real_template(template: str, name: str, arguments) -> None:
    text = _assistant_text(render_chat_template(TEMPLATES[template], _conversation(name, arguments), TOOLS))
    parser = parser_for_template(TEMPLATES[template], TOOLS)
    items = parser.feed(text) + parser.finish()
    assert items == [ToolCall("call_1", name, arguments)] and same(items[0].arguments, arguments), text

    stream = ToolCallStream(TEMPLATES[template], TOOLS)
    deltas = [stream.feed(text), stream.finish()]
    [call] = stream.calls
    assert "".join(d.content for d in deltas) == ""
    assert call["function"]["name"] == name and same(json.loads(call["function"]["arguments"]), arguments)
