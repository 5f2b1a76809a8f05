"""Commands in the editor's terminal (ACP `terminal/*`): run_command and run_tests, shown live in the tool call.

A client that advertises `terminal: true` can run a command for us and show it as a terminal; a tool call that
embeds it (`{"type": "terminal", "terminalId": ...}` content) lets the user watch its output live, also after
it is released. `ClientTerminals` is a tools executor (tools/process.py) with `execute`'s contract: the command
runs under `/bin/sh -c` in the session's cwd with the variables the tool adds (run_tests' CI=true and the
workspace's virtual environment); the result's output is its head and tail as `execute` keeps them; a timeout or a
cancel kills it (terminal/kill) and the result says so; the terminal is released in every case.

It runs in the tool's worker thread; each request is handed to the event loop and waited for, with a limit for
all but terminal/wait_for_exit (the command's own time, which the tool's timeout bounds).

Not with a sandbox: the editor would run the command outside it, as the user, so a session whose commands must
run in the configured sandbox keeps running them here (the service never gives it this executor).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from acp import schema

from warpcode.tools import ToolError
from warpcode.tools.output_capture import OutputCapture
from warpcode.tools.process import DEFAULT_OUTPUT_BYTES, DEFAULT_TIMEOUT_S, CommandResult
from warpcode.tools.sandbox import Sandbox

TERMINAL_OUTPUT_BYTES = 1 << 20  # what the editor keeps (its tail); the model is given its head and tail, as here
REQUEST_TIMEOUT_S = 30.0  # an editor that does not answer a terminal request within this has gone
POLL_S = 0.05  # how often the wait for the exit checks the tool's cancel and timeout


class TerminalFailed(ToolError):
    """The editor refused or did not answer a terminal request."""


class ClientTerminals:
    """Runs commands in the editor's terminals for one session; `on_created(terminal_id)` is called (in the worker
    thread) as soon as a command's terminal exists, to embed it in the running tool call."""

    def __init__(
        self, conn: Any, session_id: str, loop: asyncio.AbstractEventLoop, on_created: Callable[[str], None]
    ) -> None:
        self.conn, self.session_id, self.loop, self.on_created = conn, session_id, loop, on_created

    def __call__(
        self,
        command: str | list[str],
        cwd: str | os.PathLike[str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        on_output: Callable[[str], None] | None = None,  # the editor shows the output: nothing to stream
        cancel: threading.Event | None = None,
        env: Mapping[str, str] | None = None,
        max_output_bytes: int = DEFAULT_OUTPUT_BYTES,
        sandbox: Sandbox | None = None,
    ) -> CommandResult:
        if sandbox is not None:
            raise ValueError("a sandboxed command cannot run in the editor's terminal")
        shown = command if isinstance(command, str) else " ".join(command)
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        variables = [schema.EnvVariable(name=name, value=value) for name, value in (env or {}).items()]
        started = time.monotonic()
        created = self._request(
            self.conn.create_terminal(
                session_id=self.session_id,
                command=argv[0],
                args=argv[1:],
                env=variables,
                cwd=os.fspath(cwd),
                output_byte_limit=TERMINAL_OUTPUT_BYTES,
            ),
            "start the command",
        )
        terminal = {"session_id": self.session_id, "terminal_id": created.terminal_id}
        self.on_created(created.terminal_id)
        try:
            exit_code, timed_out, cancelled = self._wait(terminal, started + timeout_s, cancel)
            output = self._request(self.conn.terminal_output(**terminal), "give the command's output")
        finally:
            with contextlib.suppress(TerminalFailed):
                self._request(self.conn.release_terminal(**terminal), "release the terminal")
        capture = OutputCapture(max_output_bytes)
        capture.feed(output.output.encode())
        return CommandResult(
            shown,
            None if timed_out or cancelled else exit_code,
            capture.text(),
            time.monotonic() - started,
            timeout_s,
            timed_out,
            cancelled,
            capture.truncated or output.truncated,
        )

    def _wait(
        self, terminal: dict[str, str], deadline: float, cancel: threading.Event | None
    ) -> tuple[int | None, bool, bool]:
        """(exit code, timed out, cancelled): waits for the exit, killing the command on a timeout or cancel."""
        exited = asyncio.run_coroutine_threadsafe(self.conn.wait_for_terminal_exit(**terminal), self.loop)
        try:
            while True:
                try:
                    return exited.result(POLL_S).exit_code, False, False
                except concurrent.futures.TimeoutError:
                    pass
                except concurrent.futures.CancelledError:
                    raise TerminalFailed("The editor's terminal went away while the command ran.") from None
                except Exception as exc:  # the editor's JSON-RPC error
                    raise TerminalFailed(f"The editor's terminal failed while the command ran: {exc}") from None
                cancelled = cancel is not None and cancel.is_set()
                if cancelled or time.monotonic() >= deadline:
                    self._request(self.conn.kill_terminal(**terminal), "stop the command")
                    return None, not cancelled, cancelled
        finally:
            exited.cancel()

    def _request(self, request: Coroutine[Any, Any, Any], what: str) -> Any:
        future = asyncio.run_coroutine_threadsafe(request, self.loop)
        try:
            return future.result(REQUEST_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TerminalFailed(f"The editor did not answer within {REQUEST_TIMEOUT_S:.0f} s to {what}.") from None
        except Exception as exc:  # the editor's JSON-RPC error, or the connection gone
            raise TerminalFailed(f"The editor's terminal could not {what}: {exc}") from None
