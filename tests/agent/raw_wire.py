"""The real services spoken to in raw JSON-RPC text, as a misbehaving client would: `warpcode acp` fed stdin
lines, `warpcode serve` fed WebSocket text frames. One interface for both, so a wire rule is tested on both."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import websockets

from tests.agent.scripted_model import write_script
from tests.agent.service_processes import AUTH, TOKEN, Server

TRANSPORTS = ("stdio", "websocket")


class RawWire:
    """Send raw text; read the agent's messages one at a time. `log()` is what the service wrote to stderr."""

    def __init__(self, send: Any, receive: Any, send_many: Any) -> None:
        self._send, self._receive, self._send_many = send, receive, send_many

    async def send(self, text: str) -> None:
        await self._send(text)

    async def send_together(self, *texts: str) -> None:
        """Several messages at once: one write of several lines (stdio), frames back to back (WebSocket)."""
        await self._send_many(texts)

    async def request(self, request_id: Any, method: str, params: dict) -> None:
        await self.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))

    async def answer(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """The next answer (message without a method), skipping the agent's notifications on the way."""
        while True:
            message = json.loads(await asyncio.wait_for(self._receive(), timeout_s))
            if "method" not in message:
                return message


@contextlib.asynccontextmanager
async def raw_service(transport: str, tmp_path: Path, turns: list[dict]) -> AsyncIterator[tuple[RawWire, list[str]]]:
    """(wire, log lines) for a real service running the scripted `turns` in mode auto; the log is complete once
    the block has ended (the service stopped)."""
    log: list[str] = []
    if transport == "stdio":
        script = write_script(tmp_path / "model.json", turns)
        command = ["-m", "warpcode.agent", "acp", "--model", f"scripted:{script}", "--mode", "auto",
                   "--state-dir", str(tmp_path / "state")]  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            sys.executable, *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, limit=2**24,
        )  # fmt: skip

        async def send(text: str) -> None:
            process.stdin.write(text.encode() + b"\n")
            await process.stdin.drain()

        async def send_many(texts: tuple[str, ...]) -> None:
            await send("\n".join(texts))

        async def receive() -> str:
            line = await process.stdout.readline()
            if not line:
                raise ConnectionError("warpcode acp closed stdout (it exited)")
            return line.decode()

        try:
            yield RawWire(send, receive, send_many), log
        finally:
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()
            log.extend((await process.stderr.read()).decode().splitlines())
        return
    server = Server(tmp_path, turns, "--token", TOKEN)
    try:
        async with websockets.connect(server.url, additional_headers=AUTH, max_size=2**24) as socket:

            async def send_many(texts: tuple[str, ...]) -> None:
                for text in texts:
                    await socket.send(text)

            yield RawWire(socket.send, socket.recv, send_many), log
    finally:
        log.extend(server.stop().splitlines())
