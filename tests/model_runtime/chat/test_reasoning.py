"""The reasoning splitter against vLLM's published qwen3 reasoning-parser cases (tests/fixtures/reasoning), whole,
split at every position and one character at a time; the start read off the prompt; and reasoning parsed before
tool calls, so that a call mentioned while thinking is not made and the real one after `</think>` is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warpcode.model_runtime.chat.deltas import TextDelta, ThoughtDelta
from warpcode.model_runtime.chat.messages import ToolCall
from warpcode.model_runtime.chat.reasoning import ReasoningSplitter, start_after, template_reasons
from warpcode.model_runtime.chat.toolcall_parsers import hermes_parser

FIXTURES = Path(__file__).parents[2] / "fixtures"
CASES = json.loads((FIXTURES / "reasoning" / "vllm_qwen3_reasoning_cases.json").read_text())


def split(pieces: list[str], start: str) -> tuple[str | None, str | None]:
    """(reasoning, content) as vLLM reports them: None when there is none."""
    splitter = ReasoningSplitter(start)
    events = [e for piece in pieces for e in splitter.feed(piece)] + splitter.finish()
    reasoning = "".join(e.text for e in events if isinstance(e, ThoughtDelta))
    content = "".join(e.text for e in events if isinstance(e, TextDelta))
    return reasoning or None, content or None


def every_split(text: str) -> list[list[str]]:
    return [[text]] + [[text[:i], text[i:]] for i in range(1, len(text))] + [list(text)]


@pytest.mark.parametrize("case", CASES["thinking_enabled"], ids=lambda c: c["id"])
def test_published_cases_with_thinking_on(case) -> None:
    for pieces in every_split(case["output"]):
        assert split(pieces, "thinking") == (case["reasoning"], case["content"]), pieces


@pytest.mark.parametrize("case", CASES["multi_token_deltas"], ids=lambda c: c["id"])
def test_published_multi_token_deltas(case) -> None:
    assert split(case["deltas"], "thinking") == (case["reasoning"], case["content"])


@pytest.mark.parametrize("case", CASES["thinking_disabled"], ids=lambda c: c["id"])
def test_published_cases_with_thinking_off(case) -> None:
    for pieces in every_split(case["output"]):
        assert split(pieces, "answer") == (case["reasoning"], case["content"]), pieces


def test_the_prompt_says_where_the_model_starts() -> None:
    template = (FIXTURES / "chat_templates" / "qwen3.jinja").read_text()
    assert template_reasons(template)
    assert not template_reasons((FIXTURES / "chat_templates" / "qwen3_coder_2025_08.jinja").read_text())
    assert start_after("<|im_start|>assistant\n") == "undecided"  # Qwen3, thinking on: the model opens it
    assert start_after("<|im_start|>assistant\n<think>\n") == "thinking"  # Qwen3-2507 Thinking, Qwen3.5
    assert start_after("<|im_start|>assistant\n<think>\n\n</think>\n\n") == "answer"  # enable_thinking: false


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("<think>\nplan\n</think>\n\nHello", ("\nplan\n", "\n\nHello")),
        ("\n<think>plan</think>Hi", ("plan", "Hi")),
        ("Hello, no thinking", (None, "Hello, no thinking")),
        ("  Hi <think> is a tag", (None, "  Hi <think> is a tag")),
        ("<thin", (None, "<thin")),
        ("<think>cut off", ("cut off", None)),
    ],
)
def test_a_model_that_decides_whether_to_think(output, expected) -> None:
    """Qwen3's own template with thinking on: the answer reasons only when it opens with <think>."""
    for pieces in every_split(output):
        assert split(pieces, "undecided") == expected, pieces


def test_a_tool_call_mentioned_while_thinking_is_not_made_and_the_real_one_is() -> None:
    real = '<tool_call>\n{"name": "read_file", "arguments": {"path": "b.py"}}\n</tool_call>'
    output = (
        '<think>\nI could write <tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
        "\nbut the other file is the one.\n</think>\n\n" + real
    )
    for pieces in every_split(output):
        splitter, parser = ReasoningSplitter("undecided"), hermes_parser()
        thoughts, calls, texts = [], [], []
        for event in [e for piece in pieces for e in splitter.feed(piece)] + splitter.finish():
            if isinstance(event, ThoughtDelta):
                thoughts.append(event.text)
            else:
                for parsed in parser.feed(event.text):
                    (calls if isinstance(parsed, ToolCall) else texts).append(parsed)
        for parsed in parser.finish():
            (calls if isinstance(parsed, ToolCall) else texts).append(parsed)
        assert "a.py" in "".join(thoughts) and "b.py" not in "".join(thoughts), pieces
        assert [(c.name, c.arguments) for c in calls] == [("read_file", {"path": "b.py"})], pieces
        assert "".join(t.text for t in texts) == "\n\n"


def test_a_mention_that_only_starts_like_an_xml_call_stays_reasoning() -> None:
    output = "weigh <tool_call> <functional> options</think>done"
    for pieces in every_split(output):
        assert split(pieces, "thinking") == ("weigh <tool_call> <functional> options", "done"), pieces
