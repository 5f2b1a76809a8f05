"""Human-readable rendering of session updates on a terminal (rich): streamed text, tool calls, diffs, output."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from acp import schema
from rich.console import Console
from rich.text import Text

from warpcode.agent.events import SessionUpdate

PLAN_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
DIFF_STYLES = {"+": "green", "-": "red", "@": "cyan"}


class TerminalView:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self._kinds: dict[str, str | None] = {}
        self._shown_output: dict[str, str] = {}
        self._diff_shown: set[str] = set()  # calls whose diff was shown when permission was asked
        self._mid_line = False  # streamed message text has not ended its line yet

    def __call__(self, update: SessionUpdate) -> None:
        if isinstance(update, schema.UserMessageChunk):  # a loaded session's history, replayed block by block
            self._line(Text(f"> {_prompt_block(update.content)}", style="bold"))
        elif isinstance(update, schema.AgentMessageChunk):
            text = update.content.text if isinstance(update.content, schema.TextContentBlock) else ""
            self._write(Text(text))
        elif isinstance(update, schema.AgentThoughtChunk):
            text = update.content.text if isinstance(update.content, schema.TextContentBlock) else ""
            self._write(Text(text, style="dim italic"))
        elif isinstance(update, schema.ToolCallStart):
            self._kinds[update.tool_call_id] = update.kind
            self._line(Text(f"▶ {update.title}", style="bold cyan"))
        elif isinstance(update, schema.ToolCallProgress):
            self._tool_update(update)
        elif isinstance(update, schema.AgentPlanUpdate):
            lines = [f"  {PLAN_MARKS[e.status]} {e.content}" for e in update.entries]
            self._line(Text("Plan:\n" + "\n".join(lines), style="magenta"))

    def proposed(self, tool_call: schema.ToolCallUpdate) -> None:
        """What a tool call waiting for permission would do: the exact diff of the edit when the agent sent it
        (then it is not shown again when the call completes), else what its arguments say."""
        diffs = [item for item in tool_call.content or [] if isinstance(item, schema.FileEditToolCallContent)]
        if not diffs:
            self.proposed_call(tool_call.raw_input if isinstance(tool_call.raw_input, dict) else {})
            return
        for item in diffs:
            self._diff(item)
        self._diff_shown.add(tool_call.tool_call_id)

    def proposed_call(self, arguments: dict[str, Any]) -> None:
        """What a tool call's arguments would do: an edit as a diff, a new file, a patch, a command."""
        path = str(arguments.get("path", ""))
        if isinstance(arguments.get("new_text"), str):
            self._file_diff(path, str(arguments.get("old_text") or ""), arguments["new_text"])
        elif isinstance(arguments.get("content"), str):
            self._file_diff(path, "", arguments["content"])
        elif isinstance(arguments.get("patch"), str):
            self._diff_lines(arguments["patch"].splitlines(keepends=True))
        elif isinstance(arguments.get("command"), str):
            self._line(Text(f"$ {arguments['command']}", style="bold"))

    def _tool_update(self, update: schema.ToolCallProgress) -> None:
        shown_before = update.tool_call_id in self._diff_shown
        for item in update.content or []:
            if isinstance(item, schema.FileEditToolCallContent):
                if not shown_before:
                    self._diff(item)
            elif isinstance(item, schema.ContentToolCallContent) and isinstance(item.content, schema.TextContentBlock):
                self._text_content(update, item.content.text)
        if update.status == "failed" and not update.content:
            self._line(Text("✗ failed", style="red"))
        elif shown_before and update.status == "completed":
            self._line(Text("✓ applied (the diff above)", style="green"))

    def _text_content(self, update: schema.ToolCallProgress, text: str) -> None:
        call_id = update.tool_call_id
        if update.status == "in_progress":  # streamed output: each update repeats what came before
            shown = self._shown_output.get(call_id, "")
            new = text[len(shown) :] if text.startswith(shown) else text
            self._shown_output[call_id] = text
            self._write(Text(new, style="dim"))
        elif update.status == "failed":
            self._line(Text("✗ " + text, style="red"))
        elif self._kinds.get(call_id) == "execute":
            self._line(Text("✓ " + text.split("\n", 1)[0], style="green"))

    def _diff(self, item: schema.FileEditToolCallContent) -> None:
        self._file_diff(item.path, item.old_text or "", item.new_text)

    def _file_diff(self, path: str, old: str, new: str) -> None:
        lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), path, path)
        self._diff_lines(lines)

    def _diff_lines(self, lines: Iterable[str]) -> None:
        text = Text()
        for line in lines:
            text.append(line if line.endswith("\n") else line + "\n", style=DIFF_STYLES.get(line[:1], ""))
        text.rstrip()
        self._line(text)

    def _write(self, text: Text) -> None:
        self.console.print(text, end="", soft_wrap=True)
        self._mid_line = not text.plain.endswith("\n")

    def _line(self, text: Text) -> None:
        if self._mid_line:
            self.console.print()
        self.console.print(text, soft_wrap=True)
        self._mid_line = False

    def finish(self) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False


def _prompt_block(block: Any) -> str:
    """A block of a user's prompt as one line of the transcript: its text, else what it attached."""
    if isinstance(block, schema.TextContentBlock):
        return block.text
    if isinstance(block, schema.ResourceContentBlock):
        return f"[{block.name}: {block.uri}]"
    if isinstance(block, schema.EmbeddedResourceContentBlock):
        return f"[{block.resource.uri}]"
    return f"[{block.type}]"
