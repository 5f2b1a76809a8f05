"""search: a regex over the workspace's text files, ignore-aware, capped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pathspec import GitIgnoreSpec

from warpcode.tools import errors
from warpcode.tools.textcodec import looks_binary
from warpcode.tools.workspace import Workspace

MAX_MATCHES = 200
MAX_LINE_CHARS = 300
MAX_FILE_BYTES = 8 * 1024 * 1024
# Skipped without opening them: decoding these only to find NUL bytes would dominate the run time.
_BINARY_SUFFIX_GROUPS = (
    ".so .dylib .dll .a .o .obj .lib .exe .bin .pyc .pyo .pyd .class .jar .whl",
    ".zip .gz .tgz .bz2 .xz .zst .7z .tar",
    ".png .jpg .jpeg .gif .bmp .ico .webp .pdf .mp3 .mp4 .wav .ogg .woff .woff2 .ttf .otf",
    ".pt .pth .safetensors .onnx .npy .npz .pkl .sqlite .db",
)
BINARY_SUFFIXES = frozenset(suffix for group in _BINARY_SUFFIX_GROUPS for suffix in group.split())


@dataclass
class SearchMatch:
    path: str
    line: int
    text: str


@dataclass
class SearchResult:
    pattern: str
    matches: list[SearchMatch] = field(default_factory=list)
    truncated: bool = False
    files_searched: int = 0
    skipped_large: list[str] = field(default_factory=list)

    def render(self) -> str:
        if not self.matches:
            body = f"No match for /{self.pattern}/ in {self.files_searched} files."
        else:
            body = "\n".join(f"{m.path}:{m.line}: {m.text}" for m in self.matches)
        if self.truncated:
            body += f"\n[Stopped after {len(self.matches)} matches; narrow the pattern, path or glob to see the rest.]"
        if self.skipped_large:
            body += f"\n[Skipped {len(self.skipped_large)} files over {MAX_FILE_BYTES} bytes.]"
        return body


def search(
    ws: Workspace,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    max_matches: int = MAX_MATCHES,
) -> SearchResult:
    """Lines matching the Python regex `pattern` in non-ignored text files under `path`.

    `glob` filters files in .gitignore syntax (`*.py`, `src/**/*.ts`). Matching runs on whole file contents
    (one C-level scan per file), so a pattern may span lines; each match is reported at its first line.
    """
    try:
        regex = re.compile(pattern, re.MULTILINE | (re.IGNORECASE if ignore_case else 0))
    except re.error as exc:
        message = f"Invalid regular expression {pattern!r}: {exc}. Escape special characters."
        raise errors.InvalidArgument(message) from None
    matcher = GitIgnoreSpec.from_lines([glob]) if glob else None
    result = SearchResult(pattern)
    for entry in ws.walk(path):
        if matcher is not None and not matcher.match_file(entry.rel):
            continue
        suffix = entry.rel[entry.rel.rfind(".") :].lower() if "." in entry.rel else ""
        if suffix in BINARY_SUFFIXES:
            continue
        if entry.size > MAX_FILE_BYTES:
            result.skipped_large.append(entry.rel)
            continue
        try:
            with ws.open_for_read(entry.path) as handle:
                data = handle.read()
        except (OSError, errors.ToolError):
            continue
        if looks_binary(data):
            continue
        result.files_searched += 1
        text = data.decode("utf-8", "replace")
        if _collect(regex, text, entry.rel, result, max_matches):
            result.truncated = True
            break
    return result


def _collect(regex: re.Pattern[str], text: str, rel: str, result: SearchResult, cap: int) -> bool:
    """Append this file's matching lines; True once the cap is hit."""
    line_no = 1
    scanned_to = 0
    last_line = 0
    for found in regex.finditer(text):
        start = found.start()
        line_no += text.count("\n", scanned_to, start)
        scanned_to = start
        if line_no == last_line:
            continue
        last_line = line_no
        begin = text.rfind("\n", 0, start) + 1
        end = text.find("\n", start)
        line = text[begin : end if end != -1 else len(text)].rstrip("\r")
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + " [...]"
        if len(result.matches) == cap:
            return True
        result.matches.append(SearchMatch(rel, line_no, line))
    return False
