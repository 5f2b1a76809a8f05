"""Re-indenting a model's replacement lines to the file, when its old_text matched only ignoring indentation.

The model wrote old_text and new_text with the same indentation mistake (both shifted, or tabs written as
spaces). Each line of old_text paired with the file line it matched shows the mistake at that spot. A new line
is corrected by the mistake of its nearest old line, and only by it: the rest of its indentation, and its own
indent characters, are kept. Lines the model left unchanged are taken from the file as they are, so text whose
indentation was already right (a Go raw string, a string literal, trailing whitespace) is never touched.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

_LEADING_WS = re.compile(r"[ \t]*")
TAB_WIDTH = 4  # only for a model that wrote spaces where the file has tabs and no pair shows the width

Shift = Callable[[str], str]


def indentation(line: str) -> str:
    match = _LEADING_WS.match(line)
    return match.group(0) if match else ""


def adapt(new_lines: list[str], old_lines: list[str], found_lines: list[str]) -> list[str]:
    """`new_lines` as they go into the file, given old_lines (the model's) matched found_lines (the file's).

    All three are without line ends; old_lines and found_lines pair up one to one.
    """
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    scale = _scale(old_lines, found_lines)
    tabs = _file_uses_tabs(found_lines)
    convert = _converts_indent_characters(old_lines, found_lines)
    out: list[str] = []
    for tag, old_begin, old_end, new_begin, new_end in matcher.get_opcodes():
        if tag == "equal":
            out += found_lines[old_begin:old_end]  # unchanged: the file's own line, byte for byte
            continue
        for offset, line in enumerate(new_lines[new_begin:new_end]):
            anchor = _anchor(old_lines, old_begin, old_end, offset)
            if anchor is None or not line.strip():
                out.append(line)
                continue
            model, file = indentation(old_lines[anchor]), indentation(found_lines[anchor])
            if scale != 1.0 or convert:
                out.append(_by_width(model, file, scale, tabs)(line))
            else:
                out.append(_by_prefix(model, file)(line))
    return out


def _anchor(old_lines: list[str], begin: int, end: int, offset: int) -> int | None:
    """The non-blank old line nearest to the new line at `offset` of a changed range old_lines[begin:end]:
    the one at the same offset in the range, else the closest before it, else the closest after."""
    here = min(begin + offset, end - 1) if end > begin else begin - 1
    for index in [*range(here, -1, -1), *range(here + 1, len(old_lines))]:
        if 0 <= index < len(old_lines) and old_lines[index].strip():
            return index
    return None


def _scale(old_lines: list[str], found_lines: list[str]) -> float:
    """How many file columns one column of the model's indentation is: 2 when the model indents by 2 where
    the file indents by 4. 1 unless every pair of lines agrees on another factor (a block whose lines the
    model shifted unevenly, such as a raw string copied right inside code copied shifted, is not scaled)."""
    widths = {
        _width(indentation(old)): _width(indentation(found))
        for old, found in zip(old_lines, found_lines, strict=True)
        if old.strip()
    }
    if len(widths) < 2 or len({found - model for model, found in widths.items()}) == 1:
        return 1.0
    low, high = min(widths), max(widths)
    scale = (widths[high] - widths[low]) / (high - low)
    fits = all(abs(widths[low] + (model - low) * scale - found) < 0.5 for model, found in widths.items())
    return scale if fits and scale > 0 else 1.0


def _width(depth: str) -> int:
    return len(depth.expandtabs(TAB_WIDTH))


def _file_uses_tabs(found_lines: list[str]) -> bool:
    return any(line.startswith("\t") for line in found_lines)


def _converts_indent_characters(old_lines: list[str], found_lines: list[str]) -> bool:
    """Did the model write spaces where the file indents with tabs, or the reverse? Yes when some pair of
    lines differs by more than a prefix added or left out."""
    for old, found in zip(old_lines, found_lines, strict=True):
        model, file = indentation(old), indentation(found)
        if old.strip() and not (file.endswith(model) or model.endswith(file)):
            return True
    return False


def _by_prefix(model: str, file: str) -> Shift:
    """The model left out a prefix of the file's indentation, or added one (the only cases left when no pair
    converts characters): put it back, or take it away."""
    if file.endswith(model):
        missing = file[: len(file) - len(model)]
        return lambda line: missing + line
    extra = model[: len(model) - len(file)]
    return lambda line: line[len(extra) :] if line.startswith(extra) else line.lstrip(" \t")


def _by_width(model: str, file: str, scale: float, tabs: bool) -> Shift:
    """Re-indent by width in the file's indent character (spaces written for tabs or the reverse, or another
    indent size): the line's depth relative to the model's pair line, times `scale`, on the file's line."""
    unit = TAB_WIDTH if tabs else 1

    def shifted(line: str) -> str:
        depth = indentation(line)
        width = max(0, round(_width(file) + (_width(depth) - _width(model)) * scale))
        return ("\t" if tabs else " ") * (width // unit) + " " * (width % unit) + line[len(depth) :]

    return shifted
