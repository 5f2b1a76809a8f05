"""The client end of ACP tests, driven by the SDK: clients that record what the agent sends and answer its
permission and file requests."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
from pathlib import Path
from typing import Any

import acp
from acp import schema as acp_schema
from acp.schema import AgentMessageChunk


class AcpTestClient:
    """The client end of ACP tests, driven by the SDK: records every session/update, answers permission
    questions with the given option ids in order (then reject_once), and when given `buffers` (absolute path ->
    text) serves fs/read_text_file and fs/write_text_file from them, like an editor's unsaved buffers."""

    def __init__(self, answers: list[str] | None = None, buffers: dict[str, str] | None = None) -> None:
        self.answers = list(answers or [])
        self.buffers = buffers
        self.updates: list[Any] = []
        self.permission_requests: list[Any] = []
        self.file_requests: list[tuple[str, str]] = []  # ("read" | "write", path)

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, options: list, session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        self.permission_requests.append((tool_call, [o.option_id for o in options]))
        choice = self.answers.pop(0) if self.answers else "reject_once"
        return acp_schema.RequestPermissionResponse(
            outcome=acp_schema.AllowedOutcome(option_id=choice, outcome="selected")
        )

    async def read_text_file(self, path: str, session_id: str, **kwargs: Any) -> Any:
        self.file_requests.append(("read", path))
        if self.buffers is None or path not in self.buffers:
            return acp_schema.ReadTextFileResponse(content=Path(path).read_text())
        return acp_schema.ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(self, path: str, content: str, session_id: str, **kwargs: Any) -> Any:
        assert self.buffers is not None, "the client did not advertise fs.writeTextFile"
        self.file_requests.append(("write", path))
        self.buffers[path] = content
        return acp_schema.WriteTextFileResponse()

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))

    def capabilities(self) -> Any:
        served = self.buffers is not None
        fs = acp_schema.FileSystemCapabilities(read_text_file=served, write_text_file=served)
        return acp_schema.ClientCapabilities(fs=fs)


class NamingClient(AcpTestClient):
    """Also keeps each permission question's option names."""

    def __init__(self, answers: list[str]) -> None:
        super().__init__(answers)
        self.option_names: list[list[str]] = []

    async def request_permission(self, options: list, session_id: str, tool_call, **kwargs):
        self.option_names.append([o.name for o in options])
        return await super().request_permission(options, session_id, tool_call, **kwargs)


class RecordingClient:
    """An ACP client that records every session update and allows every permission request once."""

    def __init__(self) -> None:
        self.updates: dict[str, list] = {}

    async def session_update(self, session_id: str, update, **kwargs) -> None:
        self.updates.setdefault(session_id, []).append(update)

    async def request_permission(self, session_id: str, tool_call, options, **kwargs):
        allow = next(option for option in options if option.kind == "allow_once")
        return acp.schema.RequestPermissionResponse(
            outcome=acp.schema.AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    def on_connect(self, conn) -> None:
        self.connection = conn

    def text(self, session_id: str) -> str:
        return "".join(u.content.text for u in self.updates.get(session_id, []) if isinstance(u, AgentMessageChunk))


class HeldPermissions(RecordingClient):
    """Answers permission requests (allow once) only once `answer` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []
        self.answer = asyncio.Event()

    async def request_permission(self, session_id: str, tool_call, options, **kwargs):
        self.asked.append(session_id)
        await self.answer.wait()
        return await super().request_permission(session_id, tool_call, options, **kwargs)


class TerminalClient(AcpTestClient):
    """An AcpTestClient that advertises `terminal` and implements terminal/* as an editor does: each terminal runs
    its command for real (a subprocess in a process group of its own), keeps the tail of its output within
    outputByteLimit, and is killed on terminal/kill or terminal/release. `calls` records each method and params."""

    def __init__(self, answers: list[str] | None = None) -> None:
        super().__init__(answers)
        self.calls: list[tuple[str, dict]] = []
        self.terminals: dict[str, _Terminal] = {}  # the ones not released yet
        self._numbers = itertools.count(1)

    def capabilities(self) -> Any:
        return acp_schema.ClientCapabilities(terminal=True)

    async def create_terminal(self, command: str, session_id: str, args=None, env=None, cwd=None,
                              output_byte_limit=None, **kwargs: Any) -> Any:  # fmt: skip
        params = {"command": command, "args": args, "cwd": cwd, "env": {v.name: v.value for v in env or []},
                  "outputByteLimit": output_byte_limit}  # fmt: skip
        self.calls.append(("create", params))
        process = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, env={**os.environ, **params["env"]}, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        terminal_id = f"term-{next(self._numbers)}"
        self.terminals[terminal_id] = _Terminal(process, output_byte_limit)
        return acp_schema.CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append(("wait_for_exit", {"terminalId": terminal_id}))
        terminal = self.terminals[terminal_id]
        await terminal.done()
        return acp_schema.WaitForTerminalExitResponse(**terminal.exit_status())

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append(("output", {"terminalId": terminal_id}))
        terminal = self.terminals[terminal_id]
        status = acp_schema.TerminalExitStatus(**terminal.exit_status()) if terminal.exited else None
        text = terminal.output.decode(errors="replace")
        return acp_schema.TerminalOutputResponse(output=text, truncated=terminal.truncated, exit_status=status)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append(("kill", {"terminalId": terminal_id}))
        await self.terminals[terminal_id].kill()
        return acp_schema.KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        self.calls.append(("release", {"terminalId": terminal_id}))
        await self.terminals.pop(terminal_id).kill()
        return acp_schema.ReleaseTerminalResponse()


class _Terminal:
    def __init__(self, process: asyncio.subprocess.Process, limit: int | None) -> None:
        self.process, self.limit = process, limit
        self.output, self.truncated = b"", False
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while chunk := await self.process.stdout.read(65536):
            self.output += chunk
            if self.limit is not None and len(self.output) > self.limit:
                self.output, self.truncated = self.output[-self.limit :], True  # the spec: drop the beginning

    @property
    def exited(self) -> bool:
        return self.process.returncode is not None

    async def done(self) -> None:
        await self.process.wait()
        await self.reader

    def exit_status(self) -> dict:
        code = self.process.returncode
        return {"exit_code": code if code >= 0 else None, "signal": signal.Signals(-code).name if code < 0 else None}

    async def kill(self) -> None:
        if not self.exited:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        await self.done()
