"""Load benchmark of `warpcode serve`: N concurrent WebSocket sessions, each running one scripted turn.

    python -m warpcode.bench.service --sessions 200

All turns start at once unless --spread-s spreads their starts evenly over that many seconds. Reports the
server's memory per idle session (resident-set growth after N session/new over N connections,
divided by N) and the latency from a tool event to its notification reaching the client: every turn runs
`date +%s.%N`, and the client subtracts the time the command printed from the time the tool_call_update
carrying that output arrived (one machine, one clock). Server and clients share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import acp
from acp.schema import ToolCallProgress
from acp.ws import create_websocket_stream

from warpcode.agent.service.listening import listening_url

TOKEN = "bench-token-" + "0" * 24
STAMP = re.compile(r"\b(\d{10}\.\d{6,9})\b")


class LatencyClient:
    def __init__(self) -> None:
        self.latencies: list[float] = []

    async def session_update(self, session_id: str, update, **kwargs) -> None:
        arrived = time.time()
        if isinstance(update, ToolCallProgress) and update.content:
            for block in update.content:
                text = getattr(getattr(block, "content", None), "text", "") or ""
                match = STAMP.search(text)
                if match and not self.latencies:
                    self.latencies.append(arrived - float(match.group(1)))

    async def request_permission(self, session_id: str, tool_call, options, **kwargs):
        raise AssertionError("the benchmark runs in auto mode: nothing should ask")

    def on_connect(self, conn) -> None:
        pass


def start_server(workdir: Path) -> tuple[subprocess.Popen, str]:
    script = workdir / "model.json"
    script.write_text(json.dumps({"turns": [
        {"text": "Timing.", "tool_calls": [{"name": "run_command", "arguments": {"command": "date +%s.%N"}}]},
        {"text": "Done."},
    ]}))  # fmt: skip
    command = [sys.executable, "-m", "warpcode.agent", "serve", "--port", "0", "--token", TOKEN, "--mode", "auto",
               "--model", f"scripted:{script}", "--state-dir", str(workdir / "state")]  # fmt: skip
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    while True:
        select.select([server.stderr], [], [], 30)
        line = server.stderr.readline()
        url = listening_url(line)
        if url:
            return server, url
        if not line:
            raise RuntimeError(f"the server did not start: {server.stderr.read()}")


def resident_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024


async def run(sessions: int, spread_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "repo").mkdir()
        server, url = start_server(workdir)
        try:
            clients = [LatencyClient() for _ in range(sessions)]
            connections = []
            for client in clients:
                transport = await create_websocket_stream(url, headers={"Authorization": f"Bearer {TOKEN}"})
                connection = acp.connect_to_agent(client, transport)
                await connection.initialize(protocol_version=acp.PROTOCOL_VERSION)
                connections.append(connection)
            await asyncio.sleep(0.5)
            before = resident_bytes(server.pid)
            ids = [(await c.new_session(cwd=str(workdir / "repo"))).session_id for c in connections]
            await asyncio.sleep(0.5)
            per_session = (resident_bytes(server.pid) - before) / sessions
            started = time.perf_counter()
            offsets = [spread_s * n / sessions for n in range(sessions)]
            results = await asyncio.gather(
                *(_prompt_at(c, i, offset) for c, i, offset in zip(connections, ids, offsets, strict=True))
            )
            wall = time.perf_counter() - started
            for connection in connections:
                await connection.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    latencies = sorted(latency for client in clients for latency in client.latencies)
    if len(latencies) != sessions or any(r.stop_reason != "end_turn" for r in results):
        raise RuntimeError(f"only {len(latencies)} of {sessions} turns reported their tool output")
    return {
        "sessions": sessions,
        "spread_s": spread_s,
        "idle_session_bytes": per_session,
        "latency_p50_ms": 1e3 * statistics.median(latencies),
        "latency_p99_ms": 1e3 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "latency_max_ms": 1e3 * latencies[-1],
        "all_turns_s": wall,
    }


async def _prompt_at(connection, session_id: str, offset_s: float):
    await asyncio.sleep(offset_s)
    return await connection.prompt(session_id=session_id, prompt=[acp.text_block("time it")])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--spread-s", type=float, default=0.0, help="start the turns evenly over this many seconds")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.sessions, args.spread_s))
    print(json.dumps(result))
    print(
        f"{result['sessions']} sessions, turns started over {result['spread_s']:g} s: "
        f"idle session {result['idle_session_bytes'] / 1024:.0f} KiB; tool event -> "
        f"client p50 {result['latency_p50_ms']:.1f} ms, p99 {result['latency_p99_ms']:.1f} ms "
        f"(max {result['latency_max_ms']:.1f}); all turns in {result['all_turns_s']:.2f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
