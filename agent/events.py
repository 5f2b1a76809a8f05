"""Session updates: the loop's events, built as the `acp` SDK's own schema models so the ACP service sends them
unchanged (`session/update` params `update`) and `warpcode run --json` prints them with `to_json`. What they
show stays small enough for any client (frame_limits.py): a call's `rawInput` has its long strings cut, and
big files' diffs are excerpts of the changed regions (diff_excerpt.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp import schema
from acp.helpers import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)

from warpcode.agent.diff_excerpt import diff_contents
from warpcode.agent.frame_limits import capped_input
from warpcode.agent.mcp.naming import display_name
from warpcode.tools import EditResult, PatchResult, WriteResult

SessionUpdate = (
    schema.AgentMessageChunk
    | schema.AgentThoughtChunk
    | schema.ToolCallStart
    | schema.ToolCallProgress
    | schema.AgentPlanUpdate
    | schema.UsageUpdate
)
EventSink = Callable[[SessionUpdate], None]

# update_tool_call *replaces* the content, so streamed command output is resent whole: keep only its tail.
STREAMED_OUTPUT_CHARS = 16_000
TITLE_SUBJECT_CHARS = 200


def to_json(update: SessionUpdate) -> str:
    return json.dumps(update.model_dump(mode="json", by_alias=True, exclude_none=True))


def message_chunk(text: str) -> schema.AgentMessageChunk:
    return update_agent_message_text(text)


def thought_chunk(text: str) -> schema.AgentThoughtChunk:
    return update_agent_thought_text(text)


def tool_call_started(
    call_id: str, name: str, kind: str, arguments: dict[str, Any], root: Path
) -> schema.ToolCallStart:
    path = arguments.get("path")
    locations = [schema.ToolCallLocation(path=str(root / path))] if isinstance(path, str) and path else None
    title, raw_input = tool_title(name, arguments), capped_input(arguments)
    return start_tool_call(call_id, title, kind=kind, status="pending", locations=locations, raw_input=raw_input)


def tool_call_running(call_id: str) -> schema.ToolCallProgress:
    return update_tool_call(call_id, status="in_progress")


def tool_call_output(call_id: str, output_so_far: str) -> schema.ToolCallProgress:
    if len(output_so_far) > STREAMED_OUTPUT_CHARS:
        output_so_far = "…" + output_so_far[-STREAMED_OUTPUT_CHARS:]
    return update_tool_call(call_id, status="in_progress", content=[tool_content(text_block(output_so_far))])


def tool_call_terminal(call_id: str, terminal_id: str) -> schema.ToolCallProgress:
    """The call's command runs in this editor terminal (ACP `terminal` content): the editor shows it live."""
    return update_tool_call(call_id, status="in_progress", content=[_terminal(terminal_id)])


def tool_call_finished(
    call_id: str, ok: bool, observation: str, data: Any, root: Path, terminal_id: str | None = None
) -> schema.ToolCallProgress:
    """The final update: file diffs for edits (ACP `diff` content), the observation text otherwise, after the
    editor terminal the command ran in (which stays on show; the text is what the model read, and what a reloaded
    session, whose terminal is long released, shows)."""
    content = edit_diffs(data, root) if ok else []
    if not content:
        content = [tool_content(text_block(observation))]
    if terminal_id is not None:
        content = [_terminal(terminal_id), *content]
    return update_tool_call(call_id, status="completed" if ok else "failed", content=content)


def _terminal(terminal_id: str) -> schema.TerminalToolCallContent:
    return schema.TerminalToolCallContent(type="terminal", terminal_id=terminal_id)


def edit_diffs(data: Any, root: Path) -> list[Any]:
    """ACP `diff` contents of the files an edit tool's result changes (or would change, for a preview)."""
    return [content for d in _diffs(data) for content in diff_contents(str(root / d[0]), d[1], d[2])]


def plan(entries: list[dict[str, str]]) -> schema.AgentPlanUpdate:
    return update_plan(plan_entry(e["content"], priority=e["priority"], status=e["status"]) for e in entries)


def usage(used: int, size: int) -> schema.UsageUpdate:
    return schema.UsageUpdate(session_update="usage_update", used=used, size=size)


def tool_title(name: str, arguments: dict[str, Any]) -> str:
    subject = arguments.get("path") or arguments.get("command") or arguments.get("pattern") or ""
    verb = {
        "read_file": "Read",
        "list_files": "List files",
        "search": "Search",
        "code_outline": "Outline",
        "repo_map": "Repository map",
        "edit_file": "Edit",
        "write_file": "Write",
        "apply_patch": "Apply patch",
        "run_tests": "Run tests",
        "run_command": "Run",
        "update_plan": "Update plan",
    }.get(name, name or "unknown tool")
    verb = display_name(name) or verb  # an MCP tool: "server: tool"
    if not isinstance(subject, str):
        return verb
    if len(subject) > TITLE_SUBJECT_CHARS:
        subject = subject[: TITLE_SUBJECT_CHARS - 1] + "…"
    return f"{verb} {subject}".strip()


def _diffs(data: Any) -> list[tuple[str, str | None, str]]:
    """(path, old text or None for a new file, new text) of each file a tool changed."""
    if isinstance(data, EditResult):
        return [(data.path, None if data.created else data.old_text, data.new_text)]
    if isinstance(data, WriteResult):
        return [(data.path, data.old_text, data.new_text)]
    if isinstance(data, PatchResult):
        return [(c.path, None if c.kind == "created" else c.old_text, c.new_text) for c in data.changes]
    return []
