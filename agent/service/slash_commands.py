"""Slash commands (ACP `available_commands_update`): what a prompt starting with `/name` does instead of a model turn.

ACP has no method for commands: the agent advertises them in a session update after the session is set up (the
editor lists and completes them), and the user's prompt carries them as text. A prompt whose first text block
starts with `/name`, `name` one of COMMANDS, runs that command with the rest of the line as its input; any other
prompt, `/foo` with an unknown name included, goes to the model as it is. A command runs as the session's turn
(one at a time, cancellable, its answer in the history like a model's), but calls no model: it answers at once
and deterministically.

- undo [id]: restore the workspace to the checkpoint taken before the last turn that edited files (or to `id`);
  the restore can itself be undone (its own checkpoint is named).
- checkpoints: list them, newest first.
- compact: replace the conversation so far with its extractive summary (context.py), freeing the context.
- init: write a starting AGENTS.md (project instructions) after asking the user, in every mode: a file that every
  later session reads into its prompt is worth a question.
- mode [name]: show or switch the permission mode (as session/set_mode does).
- model: show the session's model, or switch to another of the service's models (config_options.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import schema
from acp.exceptions import RequestError
from acp.helpers import update_tool_call

from warpcode.agent import context, events
from warpcode.agent.backends import BackendError, ModelBackend
from warpcode.agent.diff_excerpt import diff_contents
from warpcode.agent.loop import TurnResult
from warpcode.agent.permissions import MODES
from warpcode.agent.project_instructions import FILE_NAME, project_instructions
from warpcode.agent.service.config_options import config_options
from warpcode.model_runtime.chat.messages import Message
from warpcode.tools import CheckpointError, Checkpoints, ToolError
from warpcode.tools.tests_runner import detect_runner

if TYPE_CHECKING:
    from warpcode.agent.service.session import AcpSession

UNDO_PREFIX = "before restoring "  # the message of the checkpoint a restore takes first (tools/checkpoints.py)
LISTED_CHECKPOINTS = 20
TEST_COMMANDS = {"pytest": "pytest -q", "go": "go test ./...", "cargo": "cargo test"}  # else `<runner> test`
SKIPPED_FOLDERS = {"node_modules", "__pycache__", "venv", "build", "dist", "target"}
LISTED_FOLDERS = 12


@dataclass(frozen=True)
class CommandContext:
    session: AcpSession
    models: Sequence[str]  # the models this service may switch between (config_options.py), the default first
    backend_for: Callable[[str], ModelBackend]  # the backend of a model spec, built once; raises BackendError

    def say(self, text: str) -> None:
        self.session.agent.emit(events.message_chunk(text))

    def announce_configuration(self) -> None:
        """Tell clients of the config-options API the session's mode or model changed (as set_config_option does)."""
        options = config_options(self.session.mode, self.session.model, self.models)
        update = schema.ConfigOptionUpdate(session_update="config_option_update", config_options=options)
        self.session.agent.emit(update)


Handler = Callable[[CommandContext, str], Awaitable[None]]


@dataclass(frozen=True)
class SlashCommand:
    name: str
    description: str
    hint: str | None  # what its input is, for a command that takes one
    handler: Handler

    def advertised(self) -> schema.AvailableCommand:
        hint = schema.UnstructuredCommandInput(hint=self.hint) if self.hint else None
        return schema.AvailableCommand(name=self.name, description=self.description, input=hint)


@dataclass(frozen=True)
class Invocation:
    command: SlashCommand
    argument: str

    async def run(self, context: CommandContext) -> TurnResult:
        await self.command.handler(context, self.argument)
        return TurnResult("end_turn")


def parse_invocation(prompt: list[Any]) -> Invocation | None:
    """The command a prompt invokes, None for a prompt for the model (an unknown `/foo` included)."""
    first = prompt[0] if prompt else None
    if not isinstance(first, schema.TextContentBlock):
        return None
    text = first.text.strip()
    if not text.startswith("/") or len(text) == 1 or text[1].isspace():
        return None
    name, *argument = text[1:].split(None, 1)  # "/mode auto", "/mode\tauto"
    command = COMMANDS.get(name)
    return Invocation(command, argument[0] if argument else "") if command else None


def available_commands_update() -> schema.AvailableCommandsUpdate:
    return schema.AvailableCommandsUpdate(
        session_update="available_commands_update",
        available_commands=[command.advertised() for command in COMMANDS.values()],
    )


_announcing: set[asyncio.Task[None]] = set()  # the tasks below, kept until done (asyncio holds tasks weakly)


def advertise_commands(conn: Any, session_id: str) -> None:
    """Send the session's commands once the current request's answer is out: the SDK writes a handler's answer
    before it next yields, and this task runs after that, so the editor already knows the session it is for."""

    async def send() -> None:
        await asyncio.sleep(0)
        try:
            await conn.session_update(session_id=session_id, update=available_commands_update())
        except Exception:  # the connection closed meanwhile: there is no one to tell
            return

    task = asyncio.get_running_loop().create_task(send(), name=f"warpcode.session.{session_id}.commands")
    _announcing.add(task)
    task.add_done_callback(_announcing.discard)


async def _undo(ctx: CommandContext, argument: str) -> None:
    checkpoints = Checkpoints(ctx.session.workspace)
    try:
        if argument:
            target = await asyncio.to_thread(checkpoints.get, argument)
        else:
            found = await asyncio.to_thread(checkpoints.list)
            turns = [c for c in found if not c.message.startswith(UNDO_PREFIX)]
            if not turns:
                ctx.say("There is nothing to undo: no turn has edited files here yet.")
                return
            target = turns[0]
        restored = await asyncio.to_thread(checkpoints.restore, target.id)
    except CheckpointError as exc:
        ctx.say(f"{exc}")
        return
    changed = ", ".join(restored.changed) or "no file changed"
    ctx.say(
        f"Restored checkpoint {target.id[:12]} ({target.message}): {changed}. "
        f"To take this back, run /undo {restored.undo_checkpoint.id[:12]}."
    )
    # The model must not believe its edits are still there.
    note = f"(The user restored the files to checkpoint {target.id[:12]}, '{target.message}': {changed}.)"
    ctx.session.agent.messages.append(Message("user", note))


async def _checkpoints(ctx: CommandContext, argument: str) -> None:
    try:
        found = await asyncio.to_thread(Checkpoints(ctx.session.workspace).list)
    except CheckpointError as exc:
        ctx.say(f"{exc}")
        return
    if not found:
        ctx.say("No checkpoints yet: one is taken before the first edit of each turn.")
        return
    lines = [f"- {c.id[:12]}  {c.created_at:%Y-%m-%d %H:%M:%S} UTC  {c.message}" for c in found[:LISTED_CHECKPOINTS]]
    more = f"\n({len(found) - LISTED_CHECKPOINTS} older ones not shown)" if len(found) > LISTED_CHECKPOINTS else ""
    ctx.say("Checkpoints, newest first (/undo ID restores one):\n" + "\n".join(lines) + more)


async def _compact(ctx: CommandContext, argument: str) -> None:
    agent = ctx.session.agent
    earlier = agent.messages[1:]
    if not earlier:
        ctx.say("There is no conversation to compact yet.")
        return
    count = agent.backend.count_tokens
    before = context.conversation_tokens(earlier, count)
    summary = Message("user", "Summary of the earlier conversation (compacted):\n" + context.summarize(earlier))
    agent.messages[1:] = [summary]
    after = context.message_tokens(summary, count)
    ctx.say(f"Compacted the conversation: {len(earlier)} messages of {before:,} tokens into a summary of {after:,}.")


async def _init(ctx: CommandContext, argument: str) -> None:
    session = ctx.session
    root = session.workspace.root
    target = root / FILE_NAME
    if target.exists():
        ctx.say(f"{FILE_NAME} already exists here: edit it, or delete it and run /init again.")
        return
    text = await asyncio.to_thread(starter_agents_md, root)
    call_id = f"init-{uuid.uuid4().hex[:12]}"  # never one of the model's call ids
    arguments = {"path": FILE_NAME, "content": text}
    session.agent.emit(events.tool_call_started(call_id, "write_file", "edit", arguments, root))
    diff = diff_contents(str(target), None, text)
    request = schema.ToolCallUpdate(tool_call_id=call_id, title=f"Write {FILE_NAME}", kind="edit", content=diff)
    options = [
        schema.PermissionOption(option_id="allow_once", name=f"Write {FILE_NAME}", kind="allow_once"),
        schema.PermissionOption(option_id="reject_once", name="Do not write it", kind="reject_once"),
    ]
    try:
        await session.flush()  # the editor hears of the call before it is asked about it
        answer = await session.conn.request_permission(
            session_id=session.session_id, tool_call=request, options=options
        )
        allowed = isinstance(answer.outcome, schema.AllowedOutcome) and answer.outcome.option_id == "allow_once"
        if allowed:
            await asyncio.to_thread(session.workspace.write_text, FILE_NAME, text)
    except asyncio.CancelledError:
        session.agent.emit(update_tool_call(call_id, status="failed"))
        raise
    except (ToolError, OSError, ConnectionError, RequestError) as exc:  # RequestError: the client's error answer
        session.agent.emit(update_tool_call(call_id, status="failed"))
        ctx.say(f"{FILE_NAME} was not written: {exc}")
        return
    if not allowed:
        session.agent.emit(update_tool_call(call_id, status="failed"))
        ctx.say(f"{FILE_NAME} was not written.")
        return
    session.agent.emit(update_tool_call(call_id, status="completed", content=diff))
    # Read into this session's prompt now, as later sessions will read it.
    session.agent.instructions = await asyncio.to_thread(project_instructions, root)
    session.agent.set_mode(session.agent.mode, session.agent.policy)
    ctx.say(f"Wrote {FILE_NAME}: edit it to tell agents how this project is built, tested and styled.")


async def _mode(ctx: CommandContext, argument: str) -> None:
    session = ctx.session
    if not argument:
        ctx.say(f"Mode: {session.mode}. Switch with /mode NAME, one of {', '.join(MODES)}.")
        return
    if argument not in MODES:
        ctx.say(f"Unknown mode {argument!r}: use one of {', '.join(MODES)}.")
        return
    session.set_mode(argument)
    session.agent.emit(schema.CurrentModeUpdate(session_update="current_mode_update", current_mode_id=argument))
    ctx.announce_configuration()
    ctx.say(f"Mode: {argument}.")


async def _model(ctx: CommandContext, argument: str) -> None:
    session, models = ctx.session, ctx.models
    if not models:
        ctx.say("No model is configured: start the service with --model, or set `model` in the config file.")
        return
    if not argument:
        others = f" Switch with /model SPEC, one of {', '.join(models)}." if len(models) > 1 else ""
        ctx.say(f"Model: {session.model}.{others}")
        return
    if argument not in models:
        ctx.say(f"Unknown model {argument!r}: use one of {', '.join(models)} (the config file's `models` lists them).")
        return
    if argument == session.model:
        ctx.say(f"Model: {argument} already.")
        return
    try:
        backend = ctx.backend_for(argument)  # as session/set_config_option builds it
    except BackendError as exc:
        ctx.say(f"Model {argument!r} cannot be used: {exc}")
        return
    session.set_model(argument, backend)
    ctx.announce_configuration()
    ctx.say(f"Model: {argument}, from the next request to the model on.")


def starter_agents_md(root: Path) -> str:
    """A starting AGENTS.md for the workspace: its top-level folders and how its tests run, to be filled in."""
    folders = sorted(
        p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name not in SKIPPED_FOLDERS
    )
    try:
        runner = detect_runner(root)
        tests = f"- Run the tests with `{TEST_COMMANDS.get(runner, f'{runner} test')}` and keep them passing."
    except ToolError:
        tests = "- Say here how to run the tests."
    layout = [f"- `{name}/`" for name in folders[:LISTED_FOLDERS]] or ["- Describe the main folders here."]
    return "\n".join(
        [
            "# AGENTS.md",
            "",
            "Instructions for coding agents working in this repository (https://agents.md).",
            "",
            "## Layout",
            *layout,
            "",
            "## Build and test",
            tests,
            "",
            "## Conventions",
            "- Follow the style of the surrounding code; keep changes small and focused.",
            "",
        ]
    )


COMMANDS: dict[str, SlashCommand] = {
    c.name: c
    for c in [
        SlashCommand("undo", "Restore the files as they were before the last turn's edits", "checkpoint id", _undo),
        SlashCommand("checkpoints", "List the checkpoints /undo can restore", None, _checkpoints),
        SlashCommand("compact", "Summarize the conversation so far to free the model's context", None, _compact),
        SlashCommand("init", f"Write a starting {FILE_NAME} with instructions for agents", None, _init),
        SlashCommand("mode", "Show or switch the permission mode", f"{', '.join(MODES[:-1])} or {MODES[-1]}", _mode),
        SlashCommand("model", "Show or switch the model this session uses", "one of the configured models", _model),
    ]
}
