"""`bounded_lines` against Python's own line splitting (bytes.splitlines ends lines at CR, LF and CRLF, as
server-sent events do), however the body is cut into reads; and its two bounds."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest

from warpcode.agent.backends.stream_lines import StreamTooLong, bounded_lines

BODY = b'data: {"a": 1}\r\n\r\ndata: two\n\ndata: three\r\rid: 4\r\n: keep-alive\n\ndata: [DONE]\r\n'


async def pieces(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        yield data[start:end]


async def lines(data: bytes, cuts: list[int], max_line: int = 1024, max_total: int = 2**20) -> list[bytes]:
    return [line async for line in bounded_lines(pieces(data, cuts), max_line, max_total)]


async def test_every_cut_into_two_reads_gives_the_lines_python_finds() -> None:
    for cut in range(len(BODY) + 1):
        assert await lines(BODY, [cut]) == BODY.splitlines(), cut


async def test_random_cuts_give_the_lines_python_finds() -> None:
    rng = random.Random(42)
    for _ in range(200):
        body = b"".join(rng.choice([b"x", b"yy", b"\r", b"\n", b"\r\n", b"data: z"]) for _ in range(60))
        cuts = sorted(rng.sample(range(len(body) + 1), rng.randint(0, 8)))
        assert await lines(body, cuts) == body.splitlines(), (body, cuts)


async def test_a_line_over_its_bound_stops_the_read_before_it_ends() -> None:
    read = []

    async def endless_line() -> AsyncIterator[bytes]:
        yield b"data: short\n"
        while True:
            read.append(1)
            yield b"a" * 1000

    got = []
    with pytest.raises(StreamTooLong, match=r"^one line of the stream passed 10,000 bytes$"):
        async for line in bounded_lines(endless_line(), 10_000, 2**20):
            got.append(line)
    assert got == [b"data: short"] and len(read) == 11


async def test_a_body_over_its_bound_stops_the_read() -> None:
    with pytest.raises(StreamTooLong, match=r"^the answer passed 1 MiB$"):
        await lines(b"data: x\n" * 200_000, list(range(8000, 1_600_000, 8000)))
