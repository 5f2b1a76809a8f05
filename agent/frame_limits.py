"""Keeping each ACP message under the client's frame limit: the SDK's WebSocket client (websockets' default
`max_size`) refuses any frame over CLIENT_FRAME_BYTES and drops the connection.

Updates are built small where they are made: big files' diffs become excerpts (diff_excerpt.py), long strings of
a tool call's arguments are cut to INPUT_STRING_CHARS in its `rawInput` (`capped_input`; the tool itself gets
them whole), and text chunks are split and merged up to TEXT_CHUNK_CHARS (update_stream.py). `shrink_to_fit` is
the last safety net where a message is serialised (ws_server.FrameTransport): it cuts the longest strings of a
display-only message until its JSON fits.
"""

from __future__ import annotations

import json
from typing import Any

CLIENT_FRAME_BYTES = 2**20
# JSON writes a character as at most 12 bytes (two \u escapes beyond the BMP): 64,000 stay under the frame limit.
TEXT_CHUNK_CHARS = 64_000
INPUT_STRING_CHARS = 16_000
SHRINK_FLOOR_CHARS = 256  # the safety net does not cut strings shorter than this


def capped_input(value: Any, max_chars: int = INPUT_STRING_CHARS) -> Any:
    """`value` (JSON data) with every string longer than `max_chars` cut to its head and tail."""
    if isinstance(value, str):
        return cut_middle(value, max_chars) if len(value) > max_chars else value
    if isinstance(value, dict):
        return {key: capped_input(item, max_chars) for key, item in value.items()}
    if isinstance(value, list):
        return [capped_input(item, max_chars) for item in value]
    return value


def cut_middle(text: str, max_chars: int) -> str:
    keep = max(max_chars // 2, 1)
    return f"{text[:keep]}\n[… {len(text) - 2 * keep} characters not shown …]\n{text[-keep:]}"


def shrink_to_fit(message: dict[str, Any], max_bytes: int) -> str | None:
    """The JSON of `message` with its longest strings cut (head and tail) until it is at most `max_bytes`; None
    when even strings of SHRINK_FLOOR_CHARS do not make it fit."""
    cap = max(_longest_string(message) // 2, SHRINK_FLOOR_CHARS)
    while True:
        frame = json.dumps(capped_input(message, cap), separators=(",", ":"))
        if len(frame) <= max_bytes:
            return frame
        if cap == SHRINK_FLOOR_CHARS:
            return None
        cap = max(cap // 2, SHRINK_FLOOR_CHARS)


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max(map(_longest_string, value.values()), default=0)
    if isinstance(value, list):
        return max(map(_longest_string, value), default=0)
    return 0
