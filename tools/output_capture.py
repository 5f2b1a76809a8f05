"""Bounded command output: the head and the tail are kept, the middle is replaced by a marker."""

from __future__ import annotations

import codecs
from collections.abc import Callable


class OutputCapture:
    def __init__(self, limit_bytes: int, on_output: Callable[[str], None] | None = None) -> None:
        self.limit = limit_bytes
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._on_output = on_output
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, chunk: bytes) -> None:
        if self._on_output is not None:
            self._stream(self._decoder.decode(chunk))
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - (self.limit - self.limit // 2)
            if excess > 0:
                del self.tail[:excess]

    def _stream(self, text: str) -> None:
        if not text or self._on_output is None:
            return
        try:
            self._on_output(text)
        except Exception:
            # A broken listener must not break the command; it just stops being told.
            self._on_output = None

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        omitted = self.total - len(self.head) - len(self.tail)
        marker = f"\n[... {omitted} bytes of output omitted ...]\n"
        return bytes(self.head).decode("utf-8", "replace") + marker + bytes(self.tail).decode("utf-8", "replace")
