"""run_command: a shell command in the workspace, with the process-group guarantees of `process`."""

from __future__ import annotations

import threading
from collections.abc import Callable

from warpcode.tools import errors
from warpcode.tools.process import DEFAULT_TIMEOUT_S, CommandResult, Executor, execute, execute_async
from warpcode.tools.sandbox import Sandbox
from warpcode.tools.workspace import Workspace


def _checked(result: CommandResult) -> CommandResult:
    if result.timed_out:
        raise errors.CommandTimeout(result)
    if result.cancelled:
        raise errors.CommandCancelled(result)
    return result


def _validate(command: str, timeout_s: float) -> None:
    if not command.strip():
        raise errors.InvalidArgument("command is empty; give a shell command to run.")
    if timeout_s <= 0:
        raise errors.InvalidArgument(f"timeout_s must be positive, got {timeout_s}.")


def run_command(
    ws: Workspace,
    command: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_output: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    sandbox: Sandbox | None = None,
    executor: Executor = execute,
) -> CommandResult:
    """Run `command` with the shell in the workspace root (in `sandbox`, if given; by `executor`, process.py). A
    non-zero exit is a normal result; a timeout or a cancel raises CommandTimeout / CommandCancelled (carrying the
    output) after the group has been killed."""
    _validate(command, timeout_s)
    return _checked(executor(command, ws.root, timeout_s, on_output=on_output, cancel=cancel, sandbox=sandbox))


async def run_command_async(
    ws: Workspace,
    command: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_output: Callable[[str], None] | None = None,
    sandbox: Sandbox | None = None,
) -> CommandResult:
    """run_command for asyncio: cancelling the task kills the process group before CancelledError propagates."""
    _validate(command, timeout_s)
    return _checked(await execute_async(command, ws.root, timeout_s=timeout_s, on_output=on_output, sandbox=sandbox))
