"""Streamed text is cut anywhere: a marker (`<tool_call>`, `</think>`) may arrive split over two pieces, so the tail
that could still become one is held back until the next piece decides."""

from __future__ import annotations


def partial_marker(text: str, markers: tuple[str, ...], start: int = 0) -> int:
    """Length of the longest tail of text[start:] that is a proper prefix of one of `markers`."""
    for n in range(min(max(map(len, markers)) - 1, len(text) - start), 0, -1):
        if any(marker.startswith(text[-n:]) for marker in markers):
            return n
    return 0
