"""A search pattern as grep and ripgrep read it, rewritten for RE2.

Search matches line by line: `\\s+$` finds trailing whitespace, it does not run from one line into the next, and
`\\A`/`\\z` mean the start and end of a line. RE2 scans the whole file at once (one C-level pass, far faster than
a call per line), so the line rule is given to RE2 itself: with `never_nl` no part of a pattern can match a
line break. A pattern that spells a line break out (`\\n`) asks for one, and runs over the whole file instead
(ripgrep's --multiline).

RE2's `\\w`, `\\d` and `\\s` are ASCII-only; ripgrep's follow Unicode (`café` is one word, `１２` are digits, NBSP
is a space). They are rewritten into the Unicode classes ripgrep uses, checked code point by code point against
ripgrep 13. `\\b` stays ASCII (RE2 has no Unicode word boundary), and so do `\\W` and `\\S` inside brackets
(RE2 classes cannot subtract a union).
"""

from __future__ import annotations

from dataclasses import dataclass

# UTS#18 \w: Alphabetic (letters, letter numbers and the circled/squared letters that are Other_Alphabetic),
# marks, decimal digits, connector punctuation and the joiners.
WORD = (
    r"\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}\x{200C}\x{200D}"
    r"\x{24B6}-\x{24E9}\x{1F130}-\x{1F149}\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}"
)
# Unicode White_Space, less the line break (a line never holds one).
SPACE = r"\t\x0B\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"
_OUTSIDE = {"w": f"[{WORD}]", "W": f"[^{WORD}]", "d": r"\p{Nd}", "D": r"\P{Nd}", "s": f"[{SPACE}]", "S": f"[^{SPACE}]"}
_INSIDE = {"w": WORD, "d": r"\p{Nd}", "D": r"\P{Nd}", "s": SPACE}
_LINE_ANCHORS = {"A": "^", "z": "$"}  # in (?m) mode, ^ and $ are the ends of each line


@dataclass(frozen=True)
class LinePattern:
    program: str  # the RE2 pattern, multi-line mode included
    spans_lines: bool  # spells out a line break: matched over the whole file, reported at its first line


def translate(pattern: str) -> LinePattern:
    pieces: list[str] = []
    anchors: list[int] = []  # indexes in `pieces` of \A and \z, which mean line ends unless the pattern spans lines
    spans = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "[":
            end, text, breaks = _bracket(pattern, i)
        elif char == "\\":
            end, text, breaks = _escape(pattern, i, _OUTSIDE)
            if pattern[i + 1 : i + 2] in _LINE_ANCHORS:
                anchors.append(len(pieces))
        else:
            end, text, breaks = i + 1, char, char == "\n"
        pieces.append(text)
        spans = spans or breaks
        i = end
    if not spans:
        for index in anchors:
            pieces[index] = _LINE_ANCHORS[pieces[index][1]]
    return LinePattern("(?m)" + "".join(pieces), spans)


def _escape(pattern: str, i: int, classes: dict[str, str]) -> tuple[int, str, bool]:
    """(end, RE2 text, is a line break) of the escape at pattern[i] == '\\'."""
    letter = pattern[i + 1 : i + 2]
    if letter == "Q":  # \Q...\E: literal text, copied as it is
        close = pattern.find("\\E", i + 2)
        end = len(pattern) if close == -1 else close + 2
        return end, pattern[i:end], "\n" in pattern[i + 2 : end]
    if letter in classes:
        return i + 2, classes[letter], False
    if letter in ("p", "P", "x") and pattern[i + 2 : i + 3] == "{":
        close = pattern.find("}", i + 3)
        end = len(pattern) if close == -1 else close + 1
        return end, pattern[i:end], letter == "x" and _is_line_break(pattern[i + 3 : end - 1], 16)
    if letter == "x":
        return i + 4, pattern[i : i + 4], _is_line_break(pattern[i + 2 : i + 4], 16)
    if letter.isdigit():  # octal, up to three digits
        end = i + 2
        while end < min(len(pattern), i + 4) and pattern[end] in "01234567":
            end += 1
        return end, pattern[i:end], _is_line_break(pattern[i + 1 : end], 8)
    return i + 2, pattern[i : i + 2], letter in ("n", "\n")


def _is_line_break(digits: str, base: int) -> bool:
    try:
        return int(digits, base) == 0x0A
    except ValueError:
        return False  # RE2 rejects the pattern itself, with its own message


def _bracket(pattern: str, i: int) -> tuple[int, str, bool]:
    """(end, RE2 text, holds a line break) of the class starting at pattern[i] == '['. A negated class that
    names the line break (`[^\\n]`) keeps to one line, so it does not make the pattern span lines."""
    negated = pattern[i + 1 : i + 2] == "^"
    j = i + 2 if negated else i + 1
    pieces = [pattern[i:j]]
    breaks = False
    if pattern[j : j + 1] == "]":  # a ']' first is a member, not the end
        pieces.append("]")
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        if pattern.startswith("[:", j):
            close = pattern.find(":]", j + 2)
            end = len(pattern) if close == -1 else close + 2
            text, is_break = pattern[j:end], False
        elif pattern[j] == "\\":
            end, text, is_break = _escape(pattern, j, _INSIDE)
        else:
            end, text, is_break = j + 1, pattern[j], pattern[j] == "\n"
        pieces.append(text)
        breaks = breaks or is_break
        j = end
    pieces.append(pattern[j : j + 1])  # the closing ']' (missing: RE2 reports it)
    return j + 1, "".join(pieces), breaks and not negated
