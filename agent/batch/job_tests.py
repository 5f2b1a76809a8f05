"""A job's `test_command`, run in its workspace after the turn (in the agent's sandbox when one is configured: it
runs what the agent left there), and the counts of its result row read from its output (pytest's summary line,
else unittest's closing lines). It runs as the agent's commands do (tools/process.py): in a process group of its
own, killed with everything it started when the job is cancelled (Ctrl-C, its timeout)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from warpcode.tools.process import execute_async
from warpcode.tools.sandbox import Sandbox
from warpcode.tools.tests_report import parse_pytest_summary, parse_unittest

COUNTS = ("passed", "failed", "errors", "skipped")


def summary_counts(output: str) -> dict[str, int | None]:
    """The row's {passed, failed, errors, skipped}: pytest's, else unittest's, else None each."""
    for parse in (parse_pytest_summary, parse_unittest):
        counts = parse(output)
        if counts.parsed:
            return {name: getattr(counts, name) for name in COUNTS}
    return dict.fromkeys(COUNTS)


async def run_test_command(command: str, cwd: Path, sandbox: Sandbox | None = None) -> dict[str, Any]:
    """The result row's `tests` object. No time limit of its own: the job's timeout cancels it."""
    result = await execute_async(command, cwd, timeout_s=math.inf, sandbox=sandbox)
    return {"command": command, "exit_code": result.exit_code, **summary_counts(result.output)}
