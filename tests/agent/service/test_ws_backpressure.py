"""`warpcode serve` against clients that pipeline requests without reading their answers: the requests in flight
on a connection are bounded (the rest are refused at once), memory stays bounded, the connection stays usable,
and the answers to the server's own requests and the client's notifications always get through."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import acp
import pytest
import websockets
from acp import RequestError

from tests.agent.acp_clients import HeldPermissions, RecordingClient
from tests.agent.service_processes import AUTH, connect, serving
from warpcode.agent.service.request_limit import TOO_MANY_REQUESTS

pytestmark = pytest.mark.asyncio


async def _send_request(ws, request_id: int, method: str, params: dict) -> None:
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))


async def _call(ws, request_id: int, method: str, params: dict) -> dict:
    await _send_request(ws, request_id, method, params)
    while True:
        message = json.loads(await ws.recv())
        if message.get("id") == request_id and "method" not in message:
            return message["result"]


def _pipelined(count: int) -> list[str]:
    methods = [
        ("initialize", {"protocolVersion": acp.PROTOCOL_VERSION}),
        ("session/list", {}),
        ("no/such_method", {}),
    ]
    return [
        json.dumps({"jsonrpc": "2.0", "id": n, "method": methods[n % 3][0], "params": methods[n % 3][1]})
        for n in range(count)
    ]


async def _open_slow_reader(url: str):
    """A raw client whose socket holds almost nothing unread: the server's answers back up at once."""
    host, port = url.removeprefix("ws://").split("/")[0].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.setblocking(False)
    return await websockets.connect(
        url, additional_headers=AUTH, sock=sock, max_size=None, max_queue=1, compression=None, ping_interval=None
    )


async def _send_until_stalled(ws, frames: list[str], stall_s: float = 1.0) -> asyncio.Task:
    """Send every frame from a task; return once it finished or made no progress for `stall_s`."""
    sent = [0]

    async def send_all() -> None:
        for frame in frames:
            await ws.send(frame)
            sent[0] += 1

    sender = asyncio.create_task(send_all())
    last = -1
    while not sender.done() and sent[0] != last:
        last = sent[0]
        await asyncio.sleep(stall_s)
    return sender


@pytest.mark.slow
async def test_pipelined_requests_are_bounded_and_the_connection_still_works(tmp_path: Path):
    count = 40_000
    async with serving(tmp_path, [{"text": "hi"}]) as server:
        ws = await _open_slow_reader(server.url)
        await _call(ws, -1, "initialize", {"protocolVersion": acp.PROTOCOL_VERSION})
        before, peak = server.rss_kib(), [0]
        sampler = asyncio.create_task(_sample_peak(server, peak))
        sender = await _send_until_stalled(ws, _pipelined(count))
        answers = {}
        while len(answers) < count:
            message = json.loads(await asyncio.wait_for(ws.recv(), 30))
            answers[message["id"]] = message
        await sender
        sampler.cancel()
        assert (await _call(ws, -2, "initialize", {"protocolVersion": acp.PROTOCOL_VERSION}))["protocolVersion"]
        await ws.close()
        log = server.stop()
    print(f"server VmRSS {before} KiB before {count} pipelined requests, at most {peak[0]} KiB while they were served")
    assert peak[0] - before < 8 * 1024  # measured: about 2 MiB (64 in flight); 17 MiB without the bound
    refused = [a for a in answers.values() if a.get("error", {}).get("code") == TOO_MANY_REQUESTS]
    assert refused and "wait for answers" in refused[0]["error"]["message"]
    assert sum("result" in a for a in answers.values()) >= 64
    assert "Traceback" not in log


async def _sample_peak(server, peak: list[int]) -> None:
    while True:
        peak[0] = max(peak[0], server.rss_kib())
        await asyncio.sleep(0.02)


@pytest.mark.slow
async def test_a_client_gone_with_requests_unanswered_costs_one_log_line(tmp_path: Path, workspace: Path):
    turns = [{"tool_calls": [{"name": "run_command", "arguments": {"command": "echo ran"}}]}]
    async with serving(tmp_path, turns, "--mode", "ask") as server:
        ws = await _open_slow_reader(server.url)  # pipelines without reading, then vanishes
        sender = await _send_until_stalled(ws, _pipelined(20_000))
        ws.transport.abort()
        await asyncio.gather(sender, return_exceptions=True)
        async with websockets.connect(server.url, additional_headers=AUTH) as ws:  # 10 turns wait for permission
            sessions = [await _call(ws, n, "session/new", {"cwd": str(workspace), "mcpServers": []}) for n in range(10)]
            for n, session in enumerate(sessions):
                params = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "go"}]}
                await _send_request(ws, 100 + n, "session/prompt", params)
            asked = 0
            while asked < 10:
                asked += json.loads(await ws.recv()).get("method") == "session/request_permission"
            ws.transport.abort()
        other = await connect(server.url, RecordingClient())  # the server goes on serving others
        assert len((await other.list_sessions()).sessions) == 10
        await other.close()
        await asyncio.sleep(0.5)
        log = server.stop()
    assert "Traceback" not in log
    # one line per client gone, not one per request (the pipelining client may have had its own still in flight)
    gone = [line.split(" left with ")[0] for line in log.splitlines() if "unanswered" in line]
    assert len(gone) == len(set(gone)) <= 2
    assert "left with 10 requests unanswered" in log


@pytest.mark.slow
async def test_requests_over_the_limit_are_refused_while_permission_answers_and_cancels_get_through(
    tmp_path: Path, workspace: Path
):
    turns = [{"tool_calls": [{"name": "run_command", "arguments": {"command": "echo ran"}}]}, {"text": "done"}]
    async with serving(tmp_path, turns, "--mode", "ask") as server:
        client = HeldPermissions()
        connection = await connect(server.url, client)
        sessions = [(await connection.new_session(cwd=str(workspace))).session_id for _ in range(70)]
        prompts = [
            asyncio.ensure_future(connection.prompt(session_id=s, prompt=[acp.text_block("go")])) for s in sessions
        ]
        while len(client.asked) < 64:  # every prompt in flight waits for its permission answer
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # the refusals were sent first; let them all arrive
        refused = [p for p in prompts if p.done()]
        assert len(refused) == 6
        assert all(isinstance(p.exception(), RequestError) and p.exception().code == TOO_MANY_REQUESTS for p in refused)
        await connection.cancel(session_id=client.asked[0])  # a notification gets through at the limit
        client.answer.set()  # and so do the answers to the server's own requests
        results = await asyncio.wait_for(asyncio.gather(*(p for p in prompts if p not in refused)), 30)
        assert sorted(r.stop_reason for r in results) == ["cancelled"] + ["end_turn"] * 63
        assert (await connection.list_sessions()).sessions
        await connection.close()
