"""The JSON-RPC wire rules (agent/service/jsonrpc_guard.py), the same over both transports: the real `warpcode acp`
fed raw stdin lines and the real `warpcode serve` fed raw WebSocket frames. Every bad message gets the answer
JSON-RPC 2.0 and ACP 1.21 prescribe, nothing kills the connection, and unknown notifications are ignored quietly."""

from __future__ import annotations

import json

import pytest

from tests.agent.acp_schema import validate_frame
from tests.agent.raw_wire import TRANSPORTS, raw_service

pytestmark = pytest.mark.asyncio

REQUEST = {"jsonrpc": "2.0", "id": 8, "method": "session/list", "params": {}}
# (raw message, the id of its answer, the error code)
REFUSED = [
    ("{not json", None, -32700),
    ('{"jsonrpc": "2.0", "id": NaN, "method": "session/list"}', None, -32700),  # NaN is Python's, not JSON
    (json.dumps([REQUEST]), None, -32600),  # a batch: ACP never batches, refused whole
    ("[]", None, -32600),
    ("42", None, -32600),
    (json.dumps({**REQUEST, "jsonrpc": "1.0", "id": 2}), 2, -32600),
    (json.dumps({**REQUEST, "id": 3, "method": 5}), 3, -32600),  # not "method not found": not a method at all
    (json.dumps({"jsonrpc": "2.0", "id": 4}), 4, -32600),  # neither a method nor a result or error
    (json.dumps({**REQUEST, "id": True}), None, -32600),  # ids are strings, integers or null
    (json.dumps({**REQUEST, "id": 5, "params": "x"}), 5, -32600),
    (json.dumps({"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {"protocolVersion": "1.0"}}), 6, -32602),
    (json.dumps({"jsonrpc": "2.0", "id": 7, "method": "authenticate", "params": {"methodId": "oauth"}}), 7, -32602),
    (json.dumps({**REQUEST, "id": 9, "params": {"cwd": "relative/dir"}}), 9, -32602),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_bad_messages_get_their_json_rpc_error_and_unknown_notifications_are_ignored(transport: str, tmp_path):
    async with raw_service(transport, tmp_path, [{"text": "hi"}]) as (wire, log):
        for raw, answer_id, code in REFUSED:
            await wire.send(raw)
            answer = await wire.answer()
            assert (answer["id"], answer["error"]["code"]) == (answer_id, code), raw
            validate_frame(answer, "agent", strict=True)
        for method in ("foo/bar", "$/progress", "$/cancel_request", "session/cancel"):
            params = {"requestId": 99} if method == "$/cancel_request" else {"sessionId": "none"}
            await wire.send(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}))
        await wire.request(10, "initialize", {"protocolVersion": 1})
        answer = await wire.answer()  # nothing answered the notifications: the next answer is the request's
        assert answer["id"] == 10 and answer["result"]["protocolVersion"] == 1
    # The connection lived through all of it, and nothing was logged as an error (the SDK logged tracebacks).
    assert not [line for line in log if "ERROR" in line or "Traceback" in line]
