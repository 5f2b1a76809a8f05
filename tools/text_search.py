"""search: a regex over the workspace's text files, ignore-aware, capped.

Patterns run on RE2 (google-re2), whose matching time is linear in the input: a model's or a hostile client's
pattern such as `(a*)*b` cannot hold a worker (and, with it, the GIL and the whole service) for minutes, as
Python's backtracking `re` would. RE2 has no look-around and no backreferences; such patterns get a one-line
error saying so. Matching is line by line, as in grep and ripgrep (line_regex.py says how).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import re2

from warpcode.tools import errors
from warpcode.tools.globs import PathGlob
from warpcode.tools.line_regex import translate
from warpcode.tools.textcodec import looks_binary
from warpcode.tools.workspace import Workspace

MAX_MATCHES = 200
MAX_LINE_CHARS = 300
MAX_FILE_BYTES = 8 * 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"
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
    glob: str | None = None

    def render(self) -> str:
        if not self.matches and not self.files_searched and self.glob:
            body = f"No text file here matches the glob {self.glob!r}: check it, or leave it out to search every file."
        elif not self.matches:
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
    """Lines matching the regex `pattern` (RE2 syntax, `^`/`$`/`\\A`/`\\z` at line ends) in non-ignored text
    files under `path`.

    `glob` selects files in .gitignore syntax with ripgrep's `{a,b}` and `!` (`*.py`, `src/**/*.ts`, `*.{c,h}`,
    `!test/**`: globs.py). A match lies within one line, unless the pattern spells out a line break (`\\n`):
    such a match may span lines and is reported at its first line.
    """
    regex = compile_pattern(pattern, ignore_case)
    selected = PathGlob(glob) if glob else None
    result = SearchResult(pattern, glob=glob)
    for entry in ws.walk(path):
        if selected is not None and not selected.admits(entry.rel):
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
        if _collect(regex, data, entry.rel, result, max_matches):
            result.truncated = True
            break
    return result


def compile_pattern(pattern: str, ignore_case: bool = False) -> re2._Regexp:
    """The RE2 program of `pattern`, kept within a line unless it names a line break; a one-line error naming
    the problem otherwise."""
    line_pattern = translate(pattern)
    options = re2.Options()
    options.log_errors = False  # RE2 would print every rejected pattern to the server's stderr
    options.case_sensitive = not ignore_case
    options.never_nl = not line_pattern.spans_lines
    try:
        return re2.compile(line_pattern.program, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise errors.InvalidArgument(f"Invalid regular expression {pattern!r}: {reason}. {_hint(pattern)}") from None


def _hint(pattern: str) -> str:
    if any(group in pattern for group in ("(?=", "(?!", "(?<=", "(?<!")):
        return "Search has no look-ahead or look-behind (RE2 syntax): match the text itself, or search twice."
    if re.search(r"\\[1-9]", pattern):
        return "Search has no backreferences (RE2 syntax): spell out the repeated text."
    if "\\Z" in pattern:
        return "Write $ or \\z for the end of a line (RE2 syntax)."
    return "Escape special characters."


def _collect(regex: re2._Regexp, data: bytes, rel: str, result: SearchResult, cap: int) -> bool:
    """Append this file's matching lines; True once the cap is hit. After a match, the scan goes on from the next
    line, so a line full of matches costs one match."""
    data = data.removeprefix(UTF8_BOM)  # not part of the first line's text (ripgrep drops it too)
    # A final line break ends the last line; it does not start an empty one (`^$` must not match after it).
    last_start = len(data) - 1 if data.endswith(b"\n") or not data else len(data)
    line_no = 1
    scanned_to = 0
    position = 0
    while (found := regex.search(data, position)) is not None:
        start = found.start()
        if start > last_start:
            return False
        line_no += data.count(b"\n", scanned_to, start)
        scanned_to = start
        begin = data.rfind(b"\n", 0, start) + 1
        end = data.find(b"\n", start)
        end = len(data) if end == -1 else end
        line = data[begin:end].decode("utf-8", "replace").rstrip("\r")
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + " [...]"
        if len(result.matches) == cap:
            return True
        result.matches.append(SearchMatch(rel, line_no, line))
        if end >= len(data):
            return False
        position = max(end + 1, found.end())  # a match over several lines is reported once, at its first
    return False
