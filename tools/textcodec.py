"""Bytes <-> text without ever corrupting a file.

UTF-8 is decoded with `surrogateescape`, so bytes that are not valid UTF-8 survive a round trip byte for byte.
Files whose every newline is CRLF are edited as LF text and written back as CRLF; a UTF-8 BOM is kept; a
missing final newline stays missing because the text is never altered beyond the CRLF mapping.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

SNIFF_BYTES = 8192
# What str.splitlines treats as line breaks besides \n and \r.
_OTHER_LINE_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def looks_binary(head: bytes) -> bool:
    """NUL bytes do not occur in text files (UTF-16 aside), the same test git and grep use."""
    return b"\0" in head[:SNIFF_BYTES]


@dataclass
class TextFile:
    text: str
    crlf: bool = False
    bom: bool = False
    invalid_utf8: bool = False  # holds bytes that are not UTF-8 (kept as surrogates, shown as U+FFFD)
    fingerprint: str = field(default="", compare=False)  # of the content it was read from (Workspace.read_text)

    def encode(self, text: str | None = None) -> bytes:
        """Bytes of `text` (default: the file's own text) in this file's newline style and encoding."""
        body = self.text if text is None else text
        if self.crlf:
            body = body.replace("\r\n", "\n").replace("\n", "\r\n")
        data = body.encode("utf-8", "surrogateescape")
        return codecs.BOM_UTF8 + data if self.bom else data

    def normalize(self, text: str) -> str:
        """Text from a model, in this file's internal form (LF newlines for a CRLF file)."""
        return text.replace("\r\n", "\n") if self.crlf else text


def decode(data: bytes) -> TextFile:
    bom = data.startswith(codecs.BOM_UTF8)
    if bom:
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text, invalid = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, invalid = data.decode("utf-8", "surrogateescape"), True
    # Single-character tests first: `"\r" in text` is a memchr, a two-character search is ten times slower.
    crlf = "\r" in text and text.count("\r\n") == text.count("\n") > 0
    if crlf:
        text = text.replace("\r\n", "\n")
    return TextFile(text=text, crlf=crlf, bom=bom, invalid_utf8=invalid)


def display(text: str) -> str:
    """Text safe to print or send as JSON: undecodable bytes become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def split_lines(text: str) -> list[str]:
    """Lines with their '\\n' kept; only '\\n' splits (str.splitlines also splits on \\r, \\f, U+2028...)."""
    no_lone_cr = "\r" not in text or text.count("\r") == text.count("\r\n")
    if no_lone_cr and not any(sep in text for sep in _OTHER_LINE_BREAKS):
        return text.splitlines(keepends=True)  # same result, twice as fast on large files
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
