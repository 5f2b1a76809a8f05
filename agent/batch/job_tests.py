"""A job's `test_command`, run in its workspace after the turn (in the agent's sandbox when one is configured: it
runs what the agent left there), and the summary counts read from its output (pytest's, else unittest's)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from pathlib import Path
from typing import Any

from warpcode.tools.sandbox import Sandbox
from warpcode.tools.tests_report import parse_unittest

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


def unittest_counts(output: str) -> dict[str, int] | None:
    """{passed, failed, errors, skipped} from unittest's closing lines, None when there are none."""
    counts = parse_unittest(output)
    if not counts.parsed:
        return None
    return {"passed": counts.passed, "failed": counts.failed, "errors": counts.errors, "skipped": counts.skipped}


async def run_tests(command: str, cwd: Path, sandbox: Sandbox | None = None) -> dict[str, Any]:
    """The result row's `tests` object. The command runs in a process group of its own, killed if the job is
    cancelled (Ctrl-C, its timeout), and in `sandbox` if given."""
    argv = ["/bin/sh", "-c", command]
    environment = dict(os.environ)
    if sandbox is not None:
        argv, environment = sandbox.wrap(argv, cwd), sandbox.environment(environment)
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=environment,
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
    counts = pytest_counts(text) or unittest_counts(text) or dict.fromkeys(("passed", "failed", "errors", "skipped"))
    return {"command": command, "exit_code": process.returncode, **counts}
