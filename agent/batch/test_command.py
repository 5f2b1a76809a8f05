"""A job's `test_command`, run in its workspace after the turn, and pytest's summary counts read from its output."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from pathlib import Path
from typing import Any

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped)\b")
_SUMMARY = re.compile(r"\b\d+ (passed|failed|errors?|skipped)\b.* in [\d.]+s")


def pytest_counts(output: str) -> dict[str, int] | None:
    """{passed, failed, errors, skipped} from pytest's last summary line, None when there is none."""
    lines = [line for line in output.splitlines() if _SUMMARY.search(line)]
    if not lines:
        return None
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for number, word in _COUNT.findall(lines[-1]):
        counts["errors" if word.startswith("error") else word] += int(number)
    return counts


async def run_tests(command: str, cwd: Path) -> dict[str, Any]:
    """The result row's `tests` object. The command runs in a process group of its own, killed if the job is
    cancelled (Ctrl-C, its timeout)."""
    process = await asyncio.create_subprocess_shell(
        command,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = await process.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await asyncio.shield(process.wait())
        raise
    text = output.decode("utf-8", errors="replace")
    counts = pytest_counts(text) or dict.fromkeys(("passed", "failed", "errors", "skipped"))
    return {"command": command, "exit_code": process.returncode, **counts}
