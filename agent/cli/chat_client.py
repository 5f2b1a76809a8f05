"""The `warpcode chat` session: an ACP client that talks to the agent, whichever transport carries it.

`Chat` is both the SDK's Client (session updates render through TerminalView, permission questions are asked on
the terminal) and the read-eval loop that sends prompts and runs the slash commands (chat_commands.py: chat's own,
and the agent's, sent on as prompts; session_options.py: the mode and model pickers). Input is line-based, from a
TTY or a pipe alike (tests drive it that way), and read by `LineInput` so a pending read never blocks the event
loop: permission answers arrive while a turn runs.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import threading
from typing import Any

import acp
from acp import schema
from acp.exceptions import RequestError
from acp.helpers import text_block
from rich.text import Text

from warpcode.agent.cli.chat_commands import SlashCommands, UnknownCommand
from warpcode.agent.cli.session_options import SessionOptions
from warpcode.agent.cli.terminal_view import TerminalView

INTERRUPTED = object()  # Ctrl-C, delivered in the input stream to whoever waits for a line
ANSWERS = {"y": "allow_once", "n": "reject_once", "a": "allow_always", "r": "reject_always"}


class LineInput:
    """stdin lines, read by a daemon thread from file descriptor 0 (no Python file object, whose lock a blocked
    reader would hold at interpreter exit) and handed to the event loop. EOF (None) stays at the end."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.echo = not os.isatty(0)  # a terminal shows what is typed; piped lines are shown to keep the transcript
        threading.Thread(target=self._read, name="warpcode-chat-stdin", daemon=True).start()

    def _read(self) -> None:
        decoder, pending = codecs.getincrementaldecoder("utf-8")(errors="replace"), ""
        while chunk := os.read(0, 4096):
            pending += decoder.decode(chunk)
            *lines, pending = pending.split("\n")
            for line in lines:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, line)
        for item in ([pending] if pending else []) + [None]:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def next(self) -> Any:
        """The next line, None at EOF, or INTERRUPTED."""
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)
        return item

    def interrupt(self) -> None:
        self._queue.put_nowait(INTERRUPTED)


def _always_options(options: list[schema.PermissionOption]) -> list[tuple[str, schema.PermissionOption]]:
    keys = {kind: key for key, kind in ANSWERS.items()}
    return [(keys[o.kind], o) for o in options if o.kind in ("allow_always", "reject_always")]


class Chat:
    def __init__(self, view: TerminalView, lines: LineInput) -> None:
        self.view, self.lines, self.console = view, lines, view.console
        self.conn: Any = None
        self.session_id = ""
        self.turn: asyncio.Future | None = None
        self.asking = False  # a permission question waits for its answer
        self.undone: set[str] = set()  # checkpoints /undo restored or created: the next /undo goes further back
        self.commands = SlashCommands()
        self.options = SessionOptions()
        self._cancelling: set[asyncio.Task] = set()

    # The ACP client side: what the agent calls.

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, schema.AvailableCommandsUpdate):
            self.commands.advertised(update.available_commands)
        elif isinstance(update, schema.ConfigOptionUpdate):
            self.options.configured(update.config_options)
        elif isinstance(update, schema.CurrentModeUpdate):
            self.options.mode_changed(update.current_mode_id)
        else:
            self.view(update)

    async def request_permission(
        self, options: list[schema.PermissionOption], session_id: str, tool_call: schema.ToolCallUpdate, **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        self.view.proposed(tool_call)
        self.view.finish()
        if scopes := "  ".join(f"[{key}] {o.name}" for key, o in _always_options(options)):
            self._note(scopes)  # what an "always" answer covers
        question = f"Allow {tool_call.title or 'this tool call'}? [y] once  [n] no  [a] always  [r] never, then Enter: "
        self.asking = True
        try:
            while True:
                line = await self._ask(Text(question, style="bold yellow"))
                if line is None or line is INTERRUPTED:  # the turn is being cancelled, or nobody is left to ask
                    return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
                kind = ANSWERS.get(line.strip().lower()[:1])
                option = next((o for o in options if o.kind == kind), None)
                if option is not None:
                    outcome = schema.AllowedOutcome(outcome="selected", option_id=option.option_id)
                    return schema.RequestPermissionResponse(outcome=outcome)
        finally:
            self.asking = False

    # The terminal side: the read-eval loop.

    async def run(self, cwd: str | None, resume: str | None, mode: str | None) -> None:
        """Open the session (new in `cwd`, or `resume` in its stored directory unless `cwd` is given), then loop."""
        agent = (await self.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)).agent_capabilities
        if resume and not (agent and agent.load_session):
            raise ValueError("this agent cannot load stored sessions (no ACP session/load): leave out --resume")
        if resume and agent.session_capabilities and agent.session_capabilities.list:
            stored = await self._stored_cwd(resume)
            if stored is None:
                raise ValueError(
                    f"there is no stored session {resume!r}: `warpcode sessions` lists them (with --state-dir, or "
                    "on the server's machine for --connect); leave out --resume to start a new session"
                )
            cwd = cwd or stored
        cwd = cwd or os.getcwd()
        if resume:
            answer = await self.conn.load_session(cwd=cwd, session_id=resume)  # replays the history on screen
            self.view.finish()
            self.session_id = resume
        else:
            answer = await self.conn.new_session(cwd=cwd)
            self.session_id = answer.session_id
        self.options.opened(answer)
        if mode and mode != self.options.current("mode"):
            await self._choose("mode", mode)
        shown = f", {summary}" if (summary := self.options.summary()) else ""
        self._note(f"warpcode chat: session {self.session_id} in {cwd}{shown}. /help lists the commands.")
        while True:
            line = await self._ask(Text("> ", style="bold"))
            if line is None or line is INTERRUPTED:
                return
            line = line.strip()
            if not line:
                continue
            try:
                if line.startswith("/"):
                    if not await self._command(line):
                        return
                else:
                    await self._prompt(line)
            except RequestError as error:  # the server's answer: the session itself goes on
                self.view.finish()
                self.console.print(Text(f"error: {error}", style="red"), soft_wrap=True)

    async def _stored_cwd(self, session_id: str) -> str | None:
        """The directory of a stored session, looked up page by page in session/list."""
        cursor = None
        while True:
            listed = await self.conn.list_sessions(cursor=cursor)
            found = next((s.cwd for s in listed.sessions if s.session_id == session_id), None)
            if found is not None or not (cursor := listed.next_cursor):
                return found

    def interrupt(self) -> None:
        """Ctrl-C: cancel the running turn (and its permission question), else leave."""
        if self.turn is None:
            self.lines.interrupt()
            return
        cancel = asyncio.ensure_future(self.conn.cancel(session_id=self.session_id))
        self._cancelling.add(cancel)
        cancel.add_done_callback(self._cancelling.discard)
        if self.asking:
            self.lines.interrupt()

    async def _prompt(self, line: str) -> None:
        self.turn = asyncio.ensure_future(self.conn.prompt(session_id=self.session_id, prompt=[text_block(line)]))
        try:
            response = await self.turn
        finally:
            self.turn = None
            self.view.finish()
        style = "green" if response.stop_reason == "end_turn" else "yellow"
        self.console.print(Text(f"[{response.stop_reason}]", style=style))

    async def _command(self, line: str) -> bool:
        """Run a slash command, chat's own or the agent's; False to leave."""
        word, _, argument = line.partition(" ")
        try:
            name, ours = self.commands.resolve(word)
        except UnknownCommand as error:
            self._note(str(error))
            return True
        argument = argument.strip()
        if not ours:  # the agent's: the prompt as typed, under the command's full name
            await self._prompt(f"/{name} {argument}".rstrip())
        elif name == "quit":
            return False
        elif name == "help":
            self._note(self.commands.help())
        elif name in ("mode", "model"):
            await self._picker(name, argument)
        elif name == "checkpoints":
            checkpoints = await self._checkpoints()
            for checkpoint in checkpoints:
                self._note(f"{checkpoint['id'][:12]}  {checkpoint['time']}  {checkpoint['message']}")
            if not checkpoints:
                self._note("no checkpoints yet: one is taken before a turn's first edit")
        else:
            await self._undo()
        return True

    async def _picker(self, option_id: str, argument: str) -> None:
        """/mode and /model: the choices with the current one marked, or a switch to the one named."""
        if not self.options.offers(option_id) and option_id in self.commands.agent:
            await self._prompt(f"/{option_id} {argument}".rstrip())  # no picker to show: the agent's command does it
        elif not self.options.offers(option_id):
            self._note(f"this agent offers no {option_id} to choose (no `{option_id}` config option)")
        elif not argument:
            listing = self.options.listing(option_id)
            self._note(f"{option_id} (* the current one; /{option_id} NAME or NUMBER switches):\n{listing}")
        else:
            try:
                value = self.options.pick(option_id, argument)
            except ValueError as error:
                self._note(str(error))
                return
            await self._choose(option_id, value)
            self._note(f"{option_id} {value}")

    async def _choose(self, option_id: str, value: str) -> None:
        if option_id in self.options.selects:  # the answer is the full set of options, the new value in it
            answer = await self.conn.set_config_option(config_id=option_id, session_id=self.session_id, value=value)
            self.options.configured(answer.config_options)
        else:  # an agent with session modes only
            await self.conn.set_session_mode(session_id=self.session_id, mode_id=value)
            self.options.mode_changed(value)

    async def _checkpoints(self) -> list[dict[str, Any]]:
        answer = await self.conn.ext_method("warpcode/checkpoints", {"sessionId": self.session_id})
        return answer["checkpoints"]

    async def _undo(self) -> None:
        newest = next((c for c in await self._checkpoints() if c["id"] not in self.undone), None)
        if newest is None:
            self._note("nothing to undo: no edits since the session began, or all of them undone")
            return
        params = {"sessionId": self.session_id, "checkpointId": newest["id"]}
        restored = await self.conn.ext_method("warpcode/restore", params)
        self.undone.update((restored["restored"], restored["undoCheckpointId"]))
        changed = ", ".join(restored["changed"]) or "no files differed"
        self._note(f"restored {newest['message']!r}: {changed}")

    async def _ask(self, prompt: Text) -> Any:
        self.console.print(prompt, end="")
        line = await self.lines.next()
        self.console.print(line if self.lines.echo and isinstance(line, str) else "", markup=False, highlight=False)
        return line

    def _note(self, text: str) -> None:
        self.console.print(Text(text, style="cyan"), soft_wrap=True)
