"""Small things a user reads: the command list names every benchmark, counts are in the singular when there is
one, and tables stay readable when piped (`warpcode bench ... | tee log`, a CI log)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from warpcode.agent.batch.apply import Outcome, summary
from warpcode.agent.plural import counted
from warpcode.agent.tables import print_table

WARPCODE = str(Path(sys.executable).with_name("warpcode"))


def test_the_command_list_names_every_benchmark() -> None:
    listed = subprocess.run([WARPCODE, "--help"], capture_output=True, text=True, timeout=60).stdout
    bench_line = " ".join(listed.split("    bench", 1)[1].split("    chat", 1)[0].split())
    assert all(f"({kind})" in bench_line for kind in ("moe", "decode", "serve")), bench_line


def test_counts_are_singular_only_for_one() -> None:
    assert [counted(n, "job") for n in (0, 1, 2)] == ["0 jobs", "1 job", "2 jobs"]
    assert summary([Outcome("a", "/repo", "applied")]).endswith("(1 row)")


def test_a_table_in_a_pipe_is_plain_aligned_text_at_full_width() -> None:
    table = Table(title="decode, tiny")
    for column in ("path", "tok/s", "a rather long column heading that would not fit in eighty columns"):
        table.add_column(column)
    table.add_row("engine", "1234.5", "x" * 60)
    piped = io.StringIO()
    print_table(Console(file=piped, width=80), table)
    lines = piped.getvalue().splitlines()
    assert lines[0] == "decode, tiny"
    assert lines[1].split()[:2] == ["path", "tok/s"] and lines[2].split() == ["engine", "1234.5", "x" * 60]
    assert lines[1].index("tok/s") == lines[2].index("1234.5")  # columns line up
    assert all(line == line.rstrip() and "\x1b" not in line and "│" not in line for line in lines)
