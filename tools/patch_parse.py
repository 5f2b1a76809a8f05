"""Parsing unified diffs: `git diff` output (extended headers, renames, modes) and plain `diff -u`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from warpcode.tools.binary_patch import BinaryHunk, decode_base85_line
from warpcode.tools.errors import PatchError

HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
INDEX_LINE = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)(?: ([0-7]{6}))?$")  # "index 1a2b..3c4d 100644"
BINARY_HUNK = re.compile(r"^(literal|delta) (\d+)$")
NO_NEWLINE = "\\"  # "\ No newline at end of file" (the text after the backslash is localized by diff)
# git's C-style quoting of paths (quote.c): these escapes, and \ooo octal for any other byte.
C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


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
    binary: bool = False  # "Binary files ... differ" or "GIT binary patch"
    binary_hunk: BinaryHunk | None = None  # the forward hunk of a "GIT binary patch"
    old_oid: str | None = None  # blob ids of the "index" line (abbreviated unless --full-index)
    new_oid: str | None = None

    @property
    def display_path(self) -> str:
        return self.new_path or self.old_path or "?"


def _path(raw: str) -> str | None:
    """The path of a "---"/"+++" line: C-quoted by git when it has special bytes, else up to a tab (diff -u
    puts the date after one; git adds one after a name with a space)."""
    raw = raw.rstrip("\r")
    if raw.startswith('"'):
        name, rest = _unquote(raw)
        if name is not None and (not rest or rest[0] == "\t"):
            return name
    raw = raw.split("\t", 1)[0]
    return None if raw == "/dev/null" else raw


def _unquote(text: str) -> tuple[str | None, str]:
    """(name, rest) for `text` starting with a C-quoted name, as git writes them with core.quotePath: the
    escapes of C_ESCAPES and \\ooo octal bytes (UTF-8 for non-ASCII names); (None, text) when it is not one."""
    out = bytearray()
    index = 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return out.decode("utf-8", "surrogateescape"), text[index + 1 :]
        if char != "\\":
            out += char.encode("utf-8", "surrogateescape")
            index += 1
            continue
        escape = text[index + 1 : index + 2]
        if escape in C_ESCAPES:
            out.append(C_ESCAPES[escape])
            index += 2
        elif re.fullmatch("[0-3][0-7][0-7]", text[index + 1 : index + 4]):
            out.append(int(text[index + 1 : index + 4], 8))
            index += 4
        else:
            return None, text
    return None, text


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
        elif in_git_header and current is not None and line.rstrip("\r") == "GIT binary patch":
            index = _parse_binary(lines, index + 1, current)
            in_git_header = False
            continue
        elif in_git_header and current is not None:
            _git_extended_header(line.rstrip("\r"), current)
        index += 1
    return patches


def _parse_binary(lines: list[str], index: int, patch: FilePatch) -> int:
    """The hunks after "GIT binary patch": a forward one and (since git 1.5) a reverse one, each a
    "literal N" or "delta N" line, base85 lines, and a blank line. Only the forward hunk is kept."""
    patch.binary = True
    for number in range(2):
        header = BINARY_HUNK.match(lines[index].rstrip("\r")) if index < len(lines) else None
        if header is None:
            if number:
                return index  # no reverse hunk
            raise PatchError("'GIT binary patch' is not followed by a 'literal' or 'delta' line.", patch.display_path)
        index += 1
        data = bytearray()
        while index < len(lines) and lines[index].rstrip("\r"):
            data += decode_base85_line(lines[index].rstrip("\r"), patch.display_path)
            index += 1
        index += 1  # the blank line that ends the hunk
        if number == 0:
            patch.binary_hunk = BinaryHunk(header.group(1), int(header.group(2)), bytes(data))
    return index


def _git_line_paths(rest: str) -> tuple[str | None, str | None]:
    """The two names of "diff --git A B", either of them C-quoted; unquoted names may hold spaces, so without
    quotes the split is where both halves name the same file (renames also have "rename from/to" lines)."""
    if rest.startswith('"'):
        old, tail = _unquote(rest)
        if old is not None and tail.startswith(" "):
            new, after = _unquote(tail[1:]) if tail[1:].startswith('"') else (tail[1:], "")
            if new is not None and not after:
                return old, new
        raise PatchError(f"the file names in 'diff --git {rest}' are not quoted the way git quotes them.")
    if rest.endswith('"'):
        start = rest.find(' "')
        while start != -1:
            new, after = _unquote(rest[start + 1 :])
            if new is not None and not after:
                return rest[:start], new
            start = rest.find(' "', start + 1)
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
    elif line.startswith("old mode "):
        patch.old_mode = _mode(line, patch)
    elif index := INDEX_LINE.match(line):
        patch.old_oid, patch.new_oid = index.group(1), index.group(2)
        if index.group(3):
            patch.old_mode = int(index.group(3), 8)
    elif line.startswith(("rename from ", "copy from ")):
        patch.old_path = "a/" + _header_name(line.split(" ", 2)[2], patch)
    elif line.startswith(("rename to ", "copy to ")):
        patch.new_path = "b/" + _header_name(line.split(" ", 2)[2], patch)
        patch.rename = line.startswith("rename")
        patch.copy = line.startswith("copy")
    elif line.startswith("Binary files "):
        patch.binary = True


def _header_name(raw: str, patch: FilePatch) -> str:
    if not raw.startswith('"'):
        return raw
    name, rest = _unquote(raw)
    if name is None or rest:
        raise PatchError(f"the file name {raw} is not quoted the way git quotes names.", patch.display_path)
    return name


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
    if numbers and numbers.group(2, 3, 4) != ("0", "0", "0"):  # models write "@@ -0,0 +0,0 @@" for "no numbers"
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
    if old_count is not None and _more_changes_follow(lines, index):
        raise PatchError(
            "the hunk has more '+'/'-' lines than its header counts; fix the counts, or write a bare '@@' line "
            "so the hunk is located by its context alone.",
            patch.display_path,
            len(patch.hunks),
            header,
        )
    return index


def _more_changes_follow(lines: list[str], index: int) -> bool:
    """Do '+' or '-' lines follow a hunk that its counts say is complete (they would be dropped)? Context lines
    and a mail signature ("-- ") may follow; the next header ends the search."""
    while index < len(lines) and not lines[index].startswith("@@") and not _is_file_header(lines, index):
        line = lines[index].rstrip("\r")
        if line[:1] in ("+", "-"):
            return line not in ("-- ", "--")
        if line[:1] not in (" ", "\\") and line:
            return False
        index += 1
    return False
