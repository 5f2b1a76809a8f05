from __future__ import annotations

import json
from pathlib import Path

from warpcode.agent import context
from warpcode.agent.backends import approximate_tokens
from warpcode.agent.backends.scripted import ScriptedBackend
from warpcode.agent.loop import Agent, Limits
from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime.chat.messages import Message, ToolCall


def test_output_over_budget_keeps_head_and_tail_around_a_marker() -> None:
    text = "".join(f"line {n}\n" for n in range(1000))
    cut = context.cut_to_budget(text, 200, approximate_tokens)
    assert cut.startswith("line 0\nline 1\n") and cut.endswith("line 998\nline 999\n")
    assert "lines (" in cut and "characters) cut to fit the output budget ...]" in cut
    assert approximate_tokens(cut) <= 230
    assert context.cut_to_budget("short", 200, approximate_tokens) == "short"


def test_an_over_long_line_keeps_its_head_and_tail() -> None:
    line = "".join(f"{n:05d}," for n in range(17_000))  # 102,000 characters, no line end
    for text in (line, f"$ generate\n{line}\nexit 0\n", "".join(f"row {n}\n" for n in range(40)) + line + "\n"):
        cut = context.cut_to_budget(text, 1_000, approximate_tokens)
        head, tail = cut.split("characters cut to fit the output budget ...]")
        assert "00000,00001,00002," in head and "16998,16999," in tail
        assert len(head) > 1_500 and len(tail) > 1_500
        assert approximate_tokens(cut) <= 1_030


def _conversation(rounds: int, output: str) -> list[Message]:
    messages = [Message("system", "sys"), Message("user", "first request")]
    for n in range(rounds):
        messages.append(Message("assistant", f"step {n}", [ToolCall(f"c{n}", "read_file", {"path": f"f{n}.py"})]))
        messages.append(Message("tool", output, tool_call_id=f"c{n}", name="read_file"))
    return messages


def test_older_tool_outputs_are_elided_before_anything_is_summarized() -> None:
    messages = _conversation(6, "x" * 800)  # ~200 tokens per output
    budget = context.ContextBudget(window=1000, reserve=100, tool_output=500)
    assert context.fit(messages, budget, approximate_tokens)
    assert context.conversation_tokens(messages, approximate_tokens) <= budget.prompt_limit
    outputs = [m.content for m in messages if m.role == "tool"]
    assert len(outputs) == 6  # nothing summarized
    assert outputs[0] == "[elided to save context: read_file output of 1 lines; run it again if needed]"
    assert outputs[-2:] == ["x" * 800] * 2  # the latest results stay whole


def test_compaction_summarizes_older_turns_and_steps() -> None:
    messages = [
        Message("system", "sys"),
        Message("user", "old request " + "y" * 2000),
        Message("assistant", "old answer"),
    ]
    messages += _conversation(6, "z" * 400)[1:]
    budget = context.ContextBudget(window=700, reserve=100, tool_output=500)
    context.fit(messages, budget, approximate_tokens)
    assert context.conversation_tokens(messages, approximate_tokens) <= budget.prompt_limit
    assert [m.role for m in messages[:4]] == ["system", "user", "user", "user"]
    assert messages[1].content.startswith("Summary of the earlier conversation (compacted):\n- user asked: old request")
    assert messages[2].content == "first request"
    assert '- assistant called read_file {"path": "f0.py"}' in messages[3].content
    assert [m.content for m in messages[4:] if m.role == "assistant"] == ["step 4", "step 5"]  # kept verbatim


def test_a_single_oversized_message_is_squeezed_not_fatal() -> None:
    messages = [Message("system", "sys"), Message("user", "w" * 10_000)]
    budget = context.ContextBudget(window=500, reserve=100, tool_output=100)
    context.fit(messages, budget, approximate_tokens)
    assert context.conversation_tokens(messages, approximate_tokens) <= budget.prompt_limit


class _MeasuringBackend(ScriptedBackend):
    """The scripted model, also recording how many tokens each prompt it was sent holds."""

    def __init__(self, turns: list[dict], context_window: int) -> None:
        super().__init__(turns, context_window)
        self.prompt_tokens: list[int] = []

    def stream(self, messages, tools):
        self.prompt_tokens.append(context.conversation_tokens(messages, self.count_tokens))
        return super().stream(messages, tools)


async def test_a_conversation_that_overflows_the_context_compacts_and_finishes(tmp_path: Path, events) -> None:
    (tmp_path / "big.py").write_text("".join(f"value_{n} = {n}  # some commentary here\n" for n in range(400)))
    thinking = "Reading again, with long reasoning that cannot be elided. " * 40  # ~600 tokens a reply
    # each read starts a line further, so that the turn does not repeat itself (repetition.py would end it)
    reads = [{"text": thinking, "tool_calls": [{"name": "read_file", "arguments": {"path": "big.py", "start_line": n}}]}
             for n in range(1, 7)]  # fmt: skip
    turns = [*reads, {"text": "Read it."}, *reads, {"text": "All read."}]
    schemas = approximate_tokens(json.dumps(tool_schemas()))  # the tools' specs, in every request too
    backend = _MeasuringBackend(turns, context_window=8_300 + schemas)
    agent = Agent(
        tmp_path, backend, events, "auto", limits=Limits(tool_output_tokens=1_500, answer_reserve_tokens=1_000)
    )
    for request in ("read it", "read it once more"):
        result = await agent.prompt(request)
    assert result.stop_reason == "end_turn" and events.text().endswith("All read.")
    assert max(backend.prompt_tokens) + schemas <= backend.context_window - 1_000  # the window less the answer's
    assert backend.calls == 14
    summary = agent.messages[1].content
    assert summary.startswith("Summary of the earlier conversation (compacted):\n- user asked: read it\n")
    assert (
        '- assistant called read_file {"path": "big.py", "start_line": ' in summary
        and "- assistant said: Reading again, with long" in summary
    )
    assert agent.messages[2].content == "read it once more"
    assert any(m.content.startswith("[elided to save context") for m in agent.messages)
    assert "cut to fit the output budget" in agent.messages[-2].content
