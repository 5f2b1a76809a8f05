"""read_file, list_files and write_file."""

from __future__ import annotations

from dataclasses import dataclass

from warpcode.tools import errors
from warpcode.tools.globs import PathGlob
from warpcode.tools.textcodec import display, split_lines
from warpcode.tools.workspace import Workspace

PAGE_LINES = 2000
PAGE_CHARS = 100_000
MAX_LINE_CHARS = 2000
LIST_LIMIT = 1000


@dataclass
class FileView:
    path: str
    start_line: int
    end_line: int  # last line shown (0 when the file is empty)
    total_lines: int
    content: str  # numbered lines, "   12\t<text>"
    note: str  # what was cut and how to get the rest; "" when the range was shown whole

    def render(self) -> str:
        return self.content + (f"\n{self.note}" if self.note else "")


def read_file(ws: Workspace, path: str, start_line: int | None = None, end_line: int | None = None) -> FileView:
    """Lines start_line..end_line (1-based, inclusive), numbered; long ranges are paged with a note."""
    text_file = ws.read_text(path)
    ws.remember(path, text_file.fingerprint)
    lines = split_lines(text_file.text)
    total = len(lines)
    start = 1 if start_line is None else start_line
    end = total if end_line is None else min(end_line, total)
    if start < 1 or (end_line is not None and end_line < start):
        raise errors.InvalidArgument(
            f"Invalid line range {start_line}..{end_line}: lines are 1-based and start_line <= end_line."
        )
    if start > max(total, 1):
        raise errors.InvalidArgument(f"start_line {start} is past the end of {path!r}, which has {total} lines.")
    shown: list[str] = []
    chars = 0
    last = start - 1
    cut_long = False
    for number in range(start, end + 1):
        line = display(lines[number - 1].rstrip("\n"))
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [... {len(line) - MAX_LINE_CHARS} more characters on this line]"
            cut_long = True
        entry = f"{number:>6}\t{line}"
        if shown and (len(shown) >= PAGE_LINES or chars + len(entry) > PAGE_CHARS):
            break
        shown.append(entry)
        chars += len(entry) + 1
        last = number
    notes = []
    if last < end:
        notes.append(
            f"[Showing lines {start}-{last} of {total}. Call read_file with start_line={last + 1} to read on.]"
        )
    if cut_long:
        notes.append(f"[Lines longer than {MAX_LINE_CHARS} characters were cut.]")
    if text_file.invalid_utf8:
        notes.append("[The file holds bytes that are not UTF-8, shown as \ufffd; edits keep them unchanged.]")
    if total == 0:
        notes.append("[The file is empty.]")
    return FileView(path, start, last, total, "\n".join(shown), "\n".join(notes))


@dataclass
class FileList:
    files: list[str]
    truncated: bool

    def render(self) -> str:
        body = "\n".join(self.files) if self.files else "(no files)"
        if self.truncated:
            body += f"\n[Only the first {len(self.files)} files are listed; narrow path or pattern to see others.]"
        return body


def list_files(ws: Workspace, path: str = ".", pattern: str | None = None, limit: int = LIST_LIMIT) -> FileList:
    """Non-ignored files under `path` (workspace-relative), optionally filtered by a glob.

    The glob is search's (globs.py), read relative to `path`: `*.py` matches at any depth, `src/*.py` only in
    src, `*.{c,h}` either suffix, `!tests/**` everything but tests.
    """
    selected = PathGlob(pattern) if pattern else None
    base = ws.resolve(path)
    base_rel = "" if base == ws.root or not base.is_dir() else ws.rel(base) + "/"
    found: list[str] = []
    for entry in ws.walk(path):
        if selected is not None and not selected.admits(entry.rel[len(base_rel) :]):
            continue
        if len(found) == limit:
            return FileList(found, truncated=True)
        found.append(entry.rel)
    return FileList(found, truncated=False)


@dataclass
class WriteResult:
    path: str
    created: bool
    old_text: str | None  # None when the file did not exist
    new_text: str

    def render(self) -> str:
        verb = "Created" if self.created else "Wrote"
        return f"{verb} {self.path} ({len(split_lines(self.new_text))} lines)."


def write_file(ws: Workspace, path: str, content: str) -> WriteResult:
    """Replace the whole file (or create it); an existing file keeps its newline style, BOM and mode.
    Refused (StaleFile) when the file changed since the agent last read or wrote it."""
    target = ws.resolve_for_write(path)
    previous = ws.read_text(path) if target.exists() else None
    if previous is not None:
        ws.check_unchanged(path, previous.fingerprint)
        content = previous.normalize(content)
    ws.write_text(path, content, like=previous)
    return WriteResult(ws.rel(target), previous is None, previous.text if previous else None, content)
