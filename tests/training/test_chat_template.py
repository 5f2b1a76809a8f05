"""The built-in model's chat template against Qwen3-Coder's published one (tests/fixtures/chat_templates, 2025-08
revision) and our Qwen3-Coder tool-call parser: the same prompt bytes for the conversations the agent sends, its
differences named and pinned, and every call it writes read back as the call that was made."""

from __future__ import annotations

import pytest

from tests.model_runtime.chat.published_toolcall_cases import TEMPLATES, same
from tests.training.agent_conversation import CALLS, conversation
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.model_runtime.chat.prompt import template_message
from warpcode.model_runtime.chat.template import ChatTemplateError, render_chat_template
from warpcode.model_runtime.chat.toolcall_parsers import Qwen3CoderParser, parser_for_template
from warpcode.training.tokenizer import CHAT_TEMPLATE

OFFICIAL = TEMPLATES["qwen3_coder_2025_08"]
TOOLS = tool_schemas()


def render(template: str, messages: list[Message], tools=TOOLS, generation_prompt: bool = True) -> str:
    return render_chat_template(template, [template_message(m) for m in messages], tools, generation_prompt)


@pytest.mark.parametrize("tools", [TOOLS, TOOLS[:1], []], ids=["all-tools", "one-tool", "no-tools"])
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_renders_what_qwen3_coder_renders_for_a_conversation_with_a_system_prompt(tools, generation_prompt):
    ours = render(CHAT_TEMPLATE, conversation(), tools, generation_prompt)
    assert ours == render(OFFICIAL, conversation(), tools, generation_prompt)
    assert ours.count("<tool_call>\n<function=") == len(CALLS) + bool(tools)  # the calls, and the format's example


def test_transformers_renders_it_as_our_runtime_does():
    from transformers.utils.chat_template_utils import render_jinja_template

    conversations = [[template_message(m) for m in conversation(system)] for system in (True, False)]
    expected, _ = render_jinja_template(conversations=conversations, tools=TOOLS, chat_template=CHAT_TEMPLATE,
                                        add_generation_prompt=True)  # fmt: skip
    assert [render_chat_template(CHAT_TEMPLATE, c, TOOLS, True) for c in conversations] == expected


def test_its_differences_from_qwen3_coder():
    # 1. without a system message, Qwen3-Coder introduces itself as Qwen; ours names no model
    ours, official = render(CHAT_TEMPLATE, conversation(system=False)), render(OFFICIAL, conversation(system=False))
    qwen, warpcode = "You are Qwen, a helpful AI assistant", "You are a coding assistant"
    assert official.replace(qwen, warpcode) == ours
    # 2. a message without content (None, or none at all) is written empty where Qwen3-Coder's template fails
    for last in ({"role": "assistant", "content": None}, {"role": "assistant"}):
        no_content = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, last]
        assert render_chat_template(CHAT_TEMPLATE, no_content).endswith("<|im_start|>assistant\n<|im_end|>\n")
        with pytest.raises((TypeError, ChatTemplateError)):  # str + None; undefined content
            render_chat_template(OFFICIAL, no_content)
    # 3. a tool result first in the conversation is inside a user turn, as every other one is
    first = [Message("system", "s"), Message("tool", "result", tool_call_id="c1")]
    assert render(CHAT_TEMPLATE, first, []).endswith("<|im_start|>user\n<tool_response>\nresult\n</tool_response>\n"
                                                      "<|im_end|>\n<|im_start|>assistant\n")  # fmt: skip
    assert "<|im_start|>user" not in render(OFFICIAL, first, [])
    # 4. arguments given as JSON text (OpenAI's wire form) are refused, not rendered wrong
    wire = [Message("user", "x"), Message("assistant", "", [ToolCall("c", "read_file")])]
    rendered = [template_message(m) for m in wire]
    rendered[1]["tool_calls"][0]["function"]["arguments"] = '{"path": "a.py"}'
    with pytest.raises(ChatTemplateError, match="must be an object"):
        render_chat_template(CHAT_TEMPLATE, rendered, TOOLS)


def test_our_parser_is_the_one_picked_for_it():
    assert isinstance(parser_for_template(CHAT_TEMPLATE, TOOLS), Qwen3CoderParser)


@pytest.mark.parametrize("call", CALLS, ids=[c.name for c in CALLS])
def test_every_call_it_writes_parses_back_exactly(call):
    turn = render(CHAT_TEMPLATE, [Message("user", "go"), Message("assistant", "Reading it.", [call])], TOOLS, False)
    written = turn[turn.rindex("<|im_start|>assistant\n") + len("<|im_start|>assistant\n") : turn.rindex("<|im_end|>")]
    parser = parser_for_template(CHAT_TEMPLATE, TOOLS)
    # fed in pieces, as the model's text streams
    items = [item for start in range(0, len(written), 7) for item in parser.feed(written[start : start + 7])]
    items += parser.finish()
    text = "".join(item.text for item in items if not isinstance(item, ToolCall))
    calls = [item for item in items if isinstance(item, ToolCall)]
    assert text == "Reading it.\n\n"  # the content, then the newline the template puts before each call
    assert [(c.name, c.error) for c in calls] == [(call.name, None)]
    assert same(calls[0].arguments, call.arguments), calls[0].arguments
