"""The lines of a streamed HTTP body (server-sent events), read within bounds on one line and on the whole body.

httpx's `aiter_lines` keeps a line in memory until its end arrives, however long: one 256 MB line from a model
server took the client to 830 MB. Here the body is read as it arrives and split on CR, LF or CRLF (the line ends
of server-sent events), and reading stops with `StreamTooLong` as soon as a line grows past `max_line_bytes` or the
body past `max_total_bytes`: at most one line and one network read are ever held.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

_LINE_END = re.compile(rb"\r\n|\r|\n")


class StreamTooLong(Exception):
    """The body broke a bound; the message says which, in bytes."""


async def bounded_lines(
    chunks: AsyncIterator[bytes], max_line_bytes: int, max_total_bytes: int
) -> AsyncIterator[bytes]:
    """Each line of the body whose pieces `chunks` yields, without its line end."""
    pending, total = bytearray(), 0
    async for chunk in chunks:
        total += len(chunk)
        if total > max_total_bytes:
            raise StreamTooLong(f"the answer passed {_size(max_total_bytes)}")
        scan_from = max(len(pending) - 1, 0)  # what is pending has no line end, but maybe a CR before an LF
        pending += chunk
        start = 0
        for end in _LINE_END.finditer(pending, scan_from):
            if end.group() == b"\r" and end.end() == len(pending):
                break  # maybe the first half of a CRLF split between reads
            yield bytes(pending[start : end.start()])
            start = end.end()
        del pending[:start]
        if len(pending) > max_line_bytes:
            raise StreamTooLong(f"one line of the stream passed {_size(max_line_bytes)}")
    if pending:  # the last line, ended by a CR or by the end of the body
        yield bytes(pending.removesuffix(b"\r"))


def _size(count: int) -> str:
    return f"{count / 2**20:g} MiB" if count >= 2**20 else f"{count:,} bytes"
