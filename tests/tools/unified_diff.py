"""Unified diffs made by Python's difflib, as `diff -u` writes them: patches for our patch tool that we did not write
by hand."""

from __future__ import annotations

import difflib
import re


def _lines(text: str) -> list[str]:
    """Lines as diff and git see them: only \\n ends a line (str.splitlines would also split at \\r)."""
    return re.findall(r"[^\n]*\n|[^\n]+", text)


def unified(old: str, new: str, name: str, context: int = 3) -> str:
    """A diff as `diff -u` writes it, including the marker for a missing final newline."""
    lines = difflib.unified_diff(_lines(old), _lines(new), f"a/{name}", f"b/{name}", n=context)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
