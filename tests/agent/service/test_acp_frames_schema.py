"""Every frame of a full session, over both transports, validates strictly against the published ACP 1.21.0 schema
(tests/fixtures/acp): each params and result of its method's type, and no field the schema does not define."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import pytest

from tests.agent.acp_schema import META_FILE, FrameInvalid, method_types, validate_frame
from tests.agent.acp_session_recorder import record_full_session
from tests.agent.raw_wire import TRANSPORTS

CHUNK = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "1f0c", "update": {
    "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Fixed add()."}}}}  # fmt: skip
TOOL_CALL = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "1f0c", "update": {
    "sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "calc.py", "kind": "read", "status": "pending",
    "locations": [{"path": "/repo/calc.py"}], "_meta": {"warpcode/anything": 1}}}}  # fmt: skip
LIST_ANSWER = {"jsonrpc": "2.0", "id": 4, "result": {"sessions": [
    {"sessionId": "1f0c", "cwd": "/repo", "title": "fix add()", "updatedAt": "2026-12-04T04:00:00Z"}]}}  # fmt: skip


@pytest.mark.asyncio
async def test_every_frame_of_a_full_session_over_both_transports_validates_strictly(tmp_path: Path):
    # Both at once: most of the time is the services starting, which overlaps.
    recordings = await asyncio.gather(*(record_full_session(t, tmp_path / t) for t in TRANSPORTS))
    for transport, frames in zip(TRANSPORTS, recordings, strict=True):
        invalid = []
        for frame in frames:
            try:
                validate_frame(frame.message, frame.sender, frame.answers, strict=True)
            except FrameInvalid as error:
                invalid.append(f"{frame.sender}: {error}")
        assert not invalid, f"{transport}:\n" + "\n".join(invalid)
        methods = {f.message.get("method") for f in frames}
        assert {"session/request_permission", "fs/read_text_file", "fs/write_text_file", "$/cancel_request"} <= methods
        assert {"session/set_config_option", "session/resume", "session/close", "session/delete"} <= methods
        assert {"terminal/create", "terminal/wait_for_exit", "terminal/kill", "terminal/release"} <= methods
        updates = [f.message["params"]["update"] for f in frames if f.message.get("method") == "session/update"]
        kinds = {update["sessionUpdate"] for update in updates}
        assert {"tool_call", "tool_call_update", "plan", "agent_message_chunk", "user_message_chunk"} <= kinds
        assert {"available_commands_update", "config_option_update", "session_info_update"} <= kinds
        sessions = [f.message["params"] for f in frames if f.message.get("method") == "session/new"]
        assert any(params["mcpServers"] for params in sessions), "no session/new with an MCP server was recorded"
        assert {f.message["error"]["code"] for f in frames if "error" in f.message} >= {-32602, -32800}


@pytest.mark.parametrize(
    ("frame", "answers", "where"),
    [
        (CHUNK, None, ("params",)),  # beside sessionId
        (CHUNK, None, ("params", "update")),  # in a session update: its fields come from two parts (allOf)
        (CHUNK, None, ("params", "update", "content")),  # in a content block, inside the update
        (TOOL_CALL, None, ("params", "update", "locations", 0)),
        (LIST_ANSWER, "session/list", ("result", "sessions", 0)),
        (LIST_ANSWER, "session/list", ()),  # beside the JSON-RPC fields
    ],
)
def test_strict_validation_refuses_a_field_the_schema_does_not_define(frame: dict, answers, where: tuple):
    validate_frame(frame, "agent", answers, strict=True)  # as sent: valid, `_meta` included
    bad = copy.deepcopy(frame)
    target = bad
    for key in where:
        target = target[key]
    target["warpcodeExtra"] = True
    validate_frame(bad, "agent", answers, strict=False)  # the schema alone leaves objects open
    with pytest.raises(FrameInvalid, match="warpcodeExtra"):
        validate_frame(bad, "agent", answers, strict=True)


def test_frames_the_schema_refuses_whatever_the_mode():
    with pytest.raises(FrameInvalid, match="does not define"):
        validate_frame({"jsonrpc": "2.0", "id": 1, "method": "session/fork", "params": {}}, "client")
    wrong_type = copy.deepcopy(LIST_ANSWER)
    wrong_type["result"]["sessions"][0]["cwd"] = 7
    with pytest.raises(FrameInvalid, match="is not of type"):
        validate_frame(wrong_type, "agent", "session/list", strict=False)
    with pytest.raises(FrameInvalid, match="which one"):
        validate_frame(LIST_ANSWER, "agent", None)


def test_every_method_the_schema_names_has_its_types():
    meta = json.loads(META_FILE.read_text())
    for group in ("agentMethods", "clientMethods", "protocolMethods"):
        for method in meta[group].values():
            types = method_types(method)
            assert types, method
            assert len(types) == (1 if method in ("session/cancel", "session/update", "$/cancel_request",
                                                  "elicitation/complete") else 2), (method, types)  # fmt: skip
