"""Streaming text from token ids: incremental detokenisation and stop strings.

A byte-level BPE token may carry only part of a UTF-8 character; decoding it alone gives U+FFFD. The
detokenizer holds text back until the characters are complete, so a stream never shows a broken character.
"""

from __future__ import annotations

from collections import deque
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
    """Passes streamed text through until a stop string appears; never emits any part of a stop string.

    Matching is incremental (Aho-Corasick): one automaton over every stop string, whose state is the longest tail
    of the text so far that begins some stop string. Each character moves the state in amortised constant time,
    whatever the stop strings' number and length, and the state's length is exactly the text to hold back (it may
    still grow into a stop string). Generation stops at the first character that completes any stop string.
    """

    def __init__(self, stop_strings: Iterable[str]):
        self._goto: list[dict[str, int]] = [{}]  # the trie of the stop strings; state 0 is the empty string
        self._depth = [0]  # each state's length
        self._ends = [0]  # the longest stop string that ends each state's text (0: none)
        for stop in stop_strings:
            state = 0
            for char in stop:
                if char not in self._goto[state]:
                    self._goto.append({})
                    self._depth.append(self._depth[state] + 1)
                    self._ends.append(0)
                    self._goto[state][char] = len(self._goto) - 1
                state = self._goto[state][char]
            if stop:
                self._ends[state] = len(stop)
        self._fail = [0] * len(self._goto)  # each state's longest proper suffix that is also a state
        self._link_failures()
        self._state = 0
        self.pending = ""  # the held-back tail: the current state's text
        self.stopped = False

    def _link_failures(self) -> None:
        """Breadth first, so a state's suffix (shorter) is linked before the state itself."""
        queue = deque(self._goto[0].values())
        while queue:
            state = queue.popleft()
            for char, child in self._goto[state].items():
                self._fail[child] = self._step(self._fail[state], char) if state else 0
                self._ends[child] = max(self._ends[child], self._ends[self._fail[child]])
                queue.append(child)

    def _step(self, state: int, char: str) -> int:
        while char not in self._goto[state]:
            if state == 0:
                return 0
            state = self._fail[state]
        return self._goto[state][char]

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        seen, state = self.pending + text, self._state
        for index, char in enumerate(text):
            state = self._step(state, char)
            if self._ends[state]:
                self.stopped, self.pending = True, ""
                return seen[: len(seen) - len(text) + index + 1 - self._ends[state]]
        self._state = state
        held = len(seen) - self._depth[state]
        out, self.pending = seen[:held], seen[held:]
        return out

    def flush(self) -> str:
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out
