"""The `glob` of search and repo_map: which files to look at, in .gitignore syntax with ripgrep's extensions.

`*.py` and `src/**/*.ts` select as a .gitignore line would ignore (a name without a slash matches at any depth;
a directory selects everything under it). Two extensions come from ripgrep's --glob: `{a,b}` alternatives
(`*.{c,h}`), and a leading `!` that turns the glob into an exclusion (`!test/**`: every file except those).
A glob that .gitignore would read as something else (a comment, an unclosed `{`) is refused rather than left to
match nothing.
"""

from __future__ import annotations

import itertools

from pathspec import GitIgnoreSpec

from warpcode.tools import errors

MAX_ALTERNATIVES = 256  # `{a,b}{c,d}...` multiplies: a glob is a filter, not a way to spend the server's time


class PathGlob:
    def __init__(self, glob: str) -> None:
        text = glob.strip()
        self.excludes = text.startswith("!")
        body = text[1:] if self.excludes else text
        if not body:
            raise errors.InvalidArgument(f"Glob {glob!r} names no files: write e.g. '*.py', 'src/**' or '!tests/**'.")
        self._spec = GitIgnoreSpec.from_lines(_literal_start(line) for line in expand_braces(body, glob))

    def admits(self, rel: str) -> bool:
        """Is the workspace-relative POSIX path `rel` one of the files this glob selects?"""
        return self._spec.match_file(rel) != self.excludes


def _literal_start(line: str) -> str:
    """In a .gitignore, `#...` is a comment and `!...` a re-inclusion; here they are names."""
    return "\\" + line if line.startswith(("#", "!")) else line


def expand_braces(text: str, shown: str) -> list[str]:
    """`a{b,c{d,e}}f` -> [abf, acdf, acef]. A backslash escapes a brace and `[...]` holds literal ones, as in
    .gitignore; an unclosed `{` is refused (ripgrep refuses it too)."""
    open_at = _find_unescaped(text, "{", 0)
    if open_at == -1:
        return [text]
    depth, commas, i = 0, [], open_at
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _bracket_end(text, i)
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                break
        elif char == "," and depth == 1:
            commas.append(i)
        i += 1
    else:
        raise errors.InvalidArgument(
            f"Glob {shown!r} has an unclosed '{{': close it ('*.{{c,h}}') or escape it ('\\{{')."
        )
    bounds = [open_at, *commas, i]
    choices = [text[start + 1 : end] for start, end in itertools.pairwise(bounds)]
    options = [option for choice in choices for option in expand_braces(choice, shown)]
    prefix, rests = text[:open_at], expand_braces(text[i + 1 :], shown)
    expanded = [prefix + option + rest for option in options for rest in rests]
    if len(expanded) > MAX_ALTERNATIVES:
        raise errors.InvalidArgument(f"Glob {shown!r} expands to over {MAX_ALTERNATIVES} alternatives: narrow it.")
    return expanded


def _find_unescaped(text: str, target: str, start: int) -> int:
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "[":
            i = _bracket_end(text, i)
            continue
        if text[i] == target:
            return i
        i += 1
    return -1


def _bracket_end(text: str, i: int) -> int:
    """Index after the `[...]` class starting at text[i] (a `]` first inside is a member); an unclosed `[` is an
    ordinary character."""
    j = i + 1
    if text[j : j + 1] in ("!", "^"):
        j += 1
    if text[j : j + 1] == "]":
        j += 1
    close = text.find("]", j)
    return i + 1 if close == -1 else close + 1
