"""Parsing unified diffs: `git diff` output (extended headers, renames, modes) and plain `diff -u`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from warpcode.tools.errors import PatchError

HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
INDEX_MODE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+ [0-7]{6}$")  # "index 1a2b..3c4d 100644": mode unchanged
NO_NEWLINE = "\\"  # "\ No newline at end of file" (the text after the backslash is localized by diff)


@dataclass
class Hunk:
    header: str
    old_start: int | None  # 1-based, None when the header carries no numbers ("@@ @@")
    old_count: int | None
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" " | "-" | "+", text without newline)
    old_no_eol: bool = False
    new_no_eol: bool = False

    @property
    def old_lines(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "+"]

    @property
    def new_lines(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "-"]


@dataclass
class FilePatch:
    old_path: str | None  # as written in the diff; None for /dev/null (a new file)
    new_path: str | None  # None for /dev/null (a deleted file)
    git: bool = False  # paths carry a/ b/ prefixes
    hunks: list[Hunk] = field(default_factory=list)
    new_mode: int | None = None
    old_mode: int | None = None  # from "old mode", "deleted file mode" or the "index" line
    rename: bool = False
    copy: bool = False
    binary: bool = False

    @property
    def display_path(self) -> str:
        return self.new_path or self.old_path or "?"


def _path(raw: str) -> str | None:
    raw = raw.split("\t", 1)[0].rstrip("\r")
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        raw = raw[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode()
    return None if raw == "/dev/null" else raw


def _is_file_header(lines: list[str], index: int) -> bool:
    return (
        index + 1 < len(lines) and lines[index].startswith("--- ") and lines[index + 1].startswith("+++ ")
    ) or lines[index].startswith("diff --git ")


def parse_patch(text: str) -> list[FilePatch]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    patches: list[FilePatch] = []
    current: FilePatch | None = None
    in_git_header = False
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("diff --git "):
            old, new = _git_line_paths(line[len("diff --git ") :].rstrip("\r"))
            current = FilePatch(old, new, git=True)
            patches.append(current)
            in_git_header = True
        elif line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            old, new = _path(line[4:]), _path(lines[index + 1][4:])
            if current is not None and in_git_header:
                current.old_path, current.new_path = old, new
            else:
                current = FilePatch(old, new)
                patches.append(current)
            in_git_header = False
            index += 1
        elif line.startswith("@@") and current is not None:
            in_git_header = False
            index = _parse_hunk(lines, index, current)
            continue
        elif in_git_header and current is not None:
            _git_extended_header(line.rstrip("\r"), current)
        index += 1
    return patches


def _git_line_paths(rest: str) -> tuple[str | None, str | None]:
    if rest.startswith('"'):
        end = rest.find('"', 1)
        return _path(rest[: end + 1]), _path(rest[end + 2 :])
    if rest.startswith("a/") and " b/" in rest:
        middle = (len(rest) - 1) // 2  # identical names: split in the middle, robust to " b/" inside a name
        if rest[middle : middle + 3] == " b/" and rest[2:middle] == rest[middle + 3 :]:
            return "a/" + rest[2:middle], rest[middle + 1 :]
        split = rest.index(" b/")
        return rest[:split], rest[split + 1 :]
    old, _, new = rest.partition(" ")
    return old, new


def _git_extended_header(line: str, patch: FilePatch) -> None:
    if line.startswith("new file mode "):
        patch.old_path = None
        patch.new_mode = _mode(line, patch)
    elif line.startswith("deleted file mode "):
        patch.new_path = None
        patch.old_mode = _mode(line, patch)
    elif line.startswith("new mode "):
        patch.new_mode = _mode(line, patch)
    elif line.startswith("old mode ") or INDEX_MODE.match(line):
        patch.old_mode = _mode(line, patch)
    elif line.startswith(("rename from ", "copy from ")):
        patch.old_path = "a/" + line.split(" ", 2)[2]
    elif line.startswith(("rename to ", "copy to ")):
        patch.new_path = "b/" + line.split(" ", 2)[2]
        patch.rename = line.startswith("rename")
        patch.copy = line.startswith("copy")
    elif line.startswith(("Binary files ", "GIT binary patch")):
        patch.binary = True


def _mode(line: str, patch: FilePatch) -> int:
    try:
        return int(line.rsplit(" ", 1)[1], 8)
    except ValueError:
        raise PatchError(f"the file mode in {line!r} is not an octal number.", patch.display_path) from None


def _parse_hunk(lines: list[str], index: int, patch: FilePatch) -> int:
    header = lines[index].rstrip("\r")
    numbers = HUNK_HEADER.match(header)
    old_count = new_count = None
    hunk = Hunk(header=header, old_start=None, old_count=None)
    if numbers:
        hunk.old_start = int(numbers.group(1))
        old_count = hunk.old_count = int(numbers.group(2) or "1")
        new_count = int(numbers.group(4) or "1")
    patch.hunks.append(hunk)
    old_seen = new_seen = 0
    index += 1
    while index < len(lines):
        line = lines[index]
        complete = old_count is not None and old_seen >= old_count and new_seen >= (new_count or 0)
        if line.startswith(NO_NEWLINE) and hunk.lines:
            tag = hunk.lines[-1][0]
            hunk.old_no_eol = hunk.old_no_eol or tag in " -"
            hunk.new_no_eol = hunk.new_no_eol or tag in " +"
            index += 1
            continue
        if complete or line.startswith("@@") or _is_file_header(lines, index):
            break
        tag, text = line[:1], line[1:]
        if line == "" or line == "\r":
            # Editors and models drop the space of blank context lines; accept one inside a hunk.
            if old_count is None and not (index + 1 < len(lines) and lines[index + 1][:1] in (" ", "-", "+")):
                break
            tag, text = " ", ""
        elif tag not in (" ", "-", "+"):
            break
        hunk.lines.append((tag, text))
        old_seen += tag != "+"
        new_seen += tag != "-"
        index += 1
    if not hunk.lines:
        raise PatchError("the hunk has no lines.", patch.display_path, len(patch.hunks), header)
    return index
