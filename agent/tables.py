"""Tables on a terminal and in a pipe: a `rich` table with its box on a terminal; piped (`| less`, `> out.txt`, a
CI log), the same rows as plain aligned columns, at their full width (rich would squeeze them to the 80 columns it
assumes off a terminal and wrap the cells) and without box-drawing characters or colour codes, so that `grep`,
`awk` and `diff` read them line by line."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich loads with the command that prints a table, not with `warpcode --help`
    from rich.console import Console
    from rich.table import Table

PLAIN_WIDTH = 10_000  # wider than any table: no cell wraps


def print_table(console: Console, table: Table) -> None:
    if console.is_terminal:
        console.print(table)
        return
    from rich.console import Console

    title, table.title = table.title, None
    table.box, table.show_edge, table.pad_edge = None, False, False
    buffer = io.StringIO()
    Console(file=buffer, width=PLAIN_WIDTH, color_system=None, highlight=False).print(table)
    lines = ([str(title)] if title else []) + [line.rstrip() for line in buffer.getvalue().splitlines()]
    console.file.write("".join(line + "\n" for line in lines))
    console.file.flush()
