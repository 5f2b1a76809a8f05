"""Trajectories: the oracle solves every family's tasks through the real agent loop and tools (checked by running
each task's test command), and a trajectory row renders through a Qwen3-Coder chat template exactly as the agent's
local backend renders the conversation, its tool calls reading back, through the runtime's parser, as the calls the
tools ran."""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from warpcode.agent.toolbox import tool_schemas
from warpcode.model_runtime.chat.messages import ToolCall
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids, template_message
from warpcode.model_runtime.chat.toolcall_parsers import qwen3_coder_parser
from warpcode.model_runtime.tokenizer import Tokenizer
from warpcode.training.conversations import load_row
from warpcode.training.tasks import FAMILIES, SPLITS, make_task
from warpcode.training.tasks.check import run_test_command, write_repo
from warpcode.training.trajectories import Outcome, solve

TEMPLATE = Path(__file__).parents[1] / "fixtures" / "chat_templates" / "qwen3_coder_2025_08.jinja"


@functools.cache
def solved(family: str, split: str, seed: int) -> Outcome:
    with tempfile.TemporaryDirectory() as folder:
        return asyncio.run(solve(make_task(family, split, seed), Path(folder)))


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("family", FAMILIES)
def test_the_oracle_solves_the_task_through_the_agent(family, split, seed, tmp_path: Path):
    task = make_task(family, split, seed)
    write_repo(task.files, tmp_path)
    assert not run_test_command(task, tmp_path).ok  # not done before the agent runs
    outcome = solved(family, split, seed)
    assert outcome.row is not None, outcome.reason  # solve() ran the checker on the agent's workspace
    messages, tools, _ = load_row(outcome.row)
    assert tools == tool_schemas()
    assert [m.role for m in messages[:2]] == ["system", "user"] and messages[1].content == task.instruction
    assert messages[0].content.startswith("You are warpcode") and "Mode: auto." in messages[0].content
    assert messages[-1].role == "assistant" and not messages[-1].tool_calls and messages[-1].content
    calls = [c for m in messages for c in m.tool_calls]
    assert calls[-1].name == "run_tests" and {"edit_file", "apply_patch"} & {c.name for c in calls}
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    assert set(results) == {c.id for c in calls}  # every call answered, by the real tool
    assert results[calls[-1].id].content.startswith("pytest: ") and " 0 failed" in results[calls[-1].id].content


@functools.cache
def slipped(family: str, seed: int) -> Outcome:
    with tempfile.TemporaryDirectory() as folder:
        return asyncio.run(solve(make_task(family, "train", seed), Path(folder), slip_share=1.0))


def _slip_kind(family: str, seed: int) -> str | None:
    """Checks one trajectory made with a slip whenever its plan allows one; returns the slip's kind (None: none)."""
    outcome = slipped(family, seed)
    assert outcome.row is not None, outcome.reason  # recovered: the checker passed on the workspace
    messages, _, unlearned = load_row(outcome.row)
    if not unlearned:  # the plan allows none: no search to get wrong, and its edit is a patch or several edits
        return None
    (index,) = unlearned
    slip = messages[index]
    assert slip.role == "assistant" and len(slip.tool_calls) == 1
    (call,) = slip.tool_calls
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    later = [c for m in messages[index + 1 :] for c in m.tool_calls]
    if call.name == "search":  # found nothing; the next call searches the planned pattern, which finds the name
        assert results[call.id].startswith("No match") and later[0].name == "search"
        assert later[0].arguments["pattern"] != call.arguments["pattern"]
        assert not results[later[0].id].startswith("No match")
        return "search"
    # a wrong edit: the tests fail, the file is read again, and the wrong text is edited into the right one
    assert call.name == "edit_file" and results[call.id].startswith("Edited ")
    assert [c.name for c in later[:3]] == ["run_tests", "read_file", "edit_file"]
    assert results[later[0].id].startswith("pytest: FAILED")
    assert later[2].arguments["old_text"] == call.arguments["new_text"] != later[2].arguments["new_text"]
    return "edit"


@pytest.mark.parametrize("family", FAMILIES)
def test_a_slip_is_recovered_from_and_marked_unlearned(family):
    kinds = [_slip_kind(family, seed) for seed in range(1, 7)]
    assert sum(kind is not None for kind in kinds) >= 3, kinds


def test_both_kinds_of_slip_occur():
    assert {_slip_kind(family, seed) for family in FAMILIES for seed in range(1, 7)} >= {"search", "edit"}


def test_an_unsolvable_plan_is_dropped_with_its_reason():
    task = make_task("config_value", "train", 1)
    task.plan.edits[0].old = "NOT_IN_THE_FILE = 1"
    with tempfile.TemporaryDirectory() as folder:
        outcome = asyncio.run(solve(task, Path(folder)))
    assert outcome.row is None and "was never shown" in outcome.reason


@pytest.fixture(scope="module")
def coder_tokenizer() -> Tokenizer:
    train_bpe = pytest.importorskip("tests.model_runtime.checkpoints").train_bpe
    return Tokenizer(train_bpe(), chat_template=TEMPLATE.read_text(), eos_token="<|im_end|>")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_row_renders_as_the_agent_prompts_and_its_calls_parse_back(family, coder_tokenizer):
    row = json.loads(json.dumps(solved(family, "train", 1).row))  # as read back from the JSONL file
    messages, tools, _ = load_row(row)
    ids = conversation_prompt_ids(coder_tokenizer, messages, tools, add_generation_prompt=False)  # ends answered
    text = coder_tokenizer.decode(ids)
    rendered = [template_message(m) for m in messages]
    assert text == coder_tokenizer.apply_chat_template(rendered, tools, add_generation_prompt=False)
    assert text.startswith("<|im_start|>system\n" + messages[0].content)
    for message in messages[1:]:
        assert message.content.strip() in text
    replies = [piece.split("<|im_end|>")[0] for piece in text.split("<|im_start|>assistant\n")[1:]]
    assert len(replies) == sum(m.role == "assistant" for m in messages)
    for reply, message in zip(replies, [m for m in messages if m.role == "assistant"], strict=True):
        parser = qwen3_coder_parser(tools)
        calls = [item for item in [*parser.feed(reply), *parser.finish()] if isinstance(item, ToolCall)]
        assert [(c.name, c.arguments, c.error) for c in calls] == [
            (c.name, c.arguments, None) for c in message.tool_calls
        ]


@pytest.mark.slow
def test_the_command_writes_balanced_rows(tmp_path: Path):
    out = tmp_path / "rows.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "warpcode.training.trajectories", "--count", "4", "--split", "heldout", "--seed", "5",
         "--out", str(out), "--workers", "2"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["family"] for row in rows) == sorted(FAMILIES)
    assert {row["split"] for row in rows} == {"heldout"} and sorted(row["seed"] for row in rows) == [5, 6, 7, 8]
    assert "wrote 4 trajectories" in done.stdout and "4/4 trajectories" in done.stderr
