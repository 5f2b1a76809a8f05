"""Streaming text from token ids: incremental detokenisation and stop strings.

A byte-level BPE token may carry only part of a UTF-8 character; decoding it alone gives U+FFFD. The
detokenizer holds text back until the characters are complete, so a stream never shows a broken character.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

REPLACEMENT_CHAR = "\ufffd"


class IncrementalDetokenizer:
    """Feed token ids one at a time; get back the text they complete.

    Each step decodes a short window that starts at the last point where text was emitted (a character boundary),
    compares it with the window's already-emitted text and returns the difference, so per-token cost stays small
    and tokenizers that change a token's text by context (leading spaces) still come out right.
    """

    def __init__(self, decode: Callable[[list[int]], str]):
        self.decode = decode
        self.ids: list[int] = []
        self.prefix_offset = 0  # start of the decode window
        self.read_offset = 0  # tokens before this are already emitted

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        emitted = self.decode(self.ids[self.prefix_offset : self.read_offset])
        window = self.decode(self.ids[self.prefix_offset :])
        if len(window) <= len(emitted) or window.endswith(REPLACEMENT_CHAR):
            return ""  # an incomplete character (or nothing visible yet): wait for more tokens
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return window[len(emitted) :]

    def flush(self) -> str:
        """The text still held back at the end of generation (may end in U+FFFD if the model stopped mid-char)."""
        emitted = self.decode(self.ids[self.prefix_offset : self.read_offset])
        window = self.decode(self.ids[self.prefix_offset :])
        self.prefix_offset = self.read_offset = len(self.ids)
        return window[len(emitted) :]


class StopStringFilter:
    """Passes streamed text through until a stop string appears; never emits any part of a stop string."""

    def __init__(self, stop_strings: Iterable[str]):
        self.stop_strings = [s for s in stop_strings if s]
        self.pending = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        self.pending += text
        hits = [self.pending.find(s) for s in self.stop_strings if s in self.pending]
        if hits:
            self.stopped = True
            out, self.pending = self.pending[: min(hits)], ""
            return out
        # Hold back the longest tail that could still grow into a stop string.
        held = max((k for s in self.stop_strings for k in range(1, len(s)) if self.pending.endswith(s[:k])), default=0)
        out, self.pending = self.pending[: len(self.pending) - held], self.pending[len(self.pending) - held :]
        return out

    def flush(self) -> str:
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out
