"""How a session streams: coalesced chunks, one serialisation for the wire and the log, the log written in groups,
and model events of many sessions taking turns with the event loop's I/O."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from acp import schema
from acp.helpers import text_block, update_agent_message_text

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service.in_process import served
from warpcode.agent import events
from warpcode.agent.backends.scripted import ScriptedBackend
from warpcode.agent.frame_limits import TEXT_CHUNK_CHARS
from warpcode.agent.loop import Limits
from warpcode.agent.service import session as acp_session
from warpcode.agent.service import update_stream
from warpcode.agent.service.agent import ServiceConfig
from warpcode.agent.service.session import AcpSession
from warpcode.agent.service.session_store import SessionStore, message_record
from warpcode.agent.service.update_stream import StepPacer
from warpcode.model_runtime.chat.messages import Message, ToolCall


class FakeConn:
    """Not the SDK's connection: the session sends it the update models."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.sent.append(update)


def dumped(update: Any) -> dict[str, Any]:
    return update.model_dump(mode="json", by_alias=True, exclude_none=True)


async def test_queued_text_chunks_merge_exactly_in_order_and_the_log_holds_what_was_sent(tmp_path: Path) -> None:
    store, conn = SessionStore(tmp_path / "state"), FakeConn()
    store.create("s1", str(tmp_path), "auto")
    session = AcpSession("s1", str(tmp_path), "auto", conn, store, ScriptedBackend([]), Limits())
    annotated = schema.AgentMessageChunk(
        session_update="agent_message_chunk",
        content=schema.TextContentBlock(type="text", text="!", annotations=schema.Annotations(priority=1.0)),
    )
    emitted = [
        events.message_chunk("Hé, "),
        events.message_chunk(" two  spaces\n"),
        events.message_chunk(""),
        events.thought_chunk("think "),
        events.thought_chunk("more"),
        events.message_chunk("ü\t"),
        annotated,  # not plain text: never merged
        events.message_chunk("after"),
        events.tool_call_started("c1", "run_command", "execute", {"command": "true"}, tmp_path),
        events.message_chunk("z"),
    ]
    for update in emitted:  # all queued before the sender runs
        session._emit(update)
    await session.flush()
    sent = [dumped(u) for u in conn.sent]
    # One id per message: a thought, or anything else sent between two chunks (a tool call), starts a new one.
    ids = [u.pop("messageId", None) for u in sent]
    assert ids[2] == ids[3] == ids[4] and ids[5] is None and len({ids[0], ids[1], ids[2], ids[6]}) == 4
    assert sent == [
        dumped(events.message_chunk("Hé,  two  spaces\n")),
        dumped(events.thought_chunk("think more")),
        dumped(events.message_chunk("ü\t")),
        dumped(annotated),
        dumped(events.message_chunk("after")),
        dumped(emitted[8]),
        dumped(events.message_chunk("z")),
    ]
    text = "".join(u.content.text for u in conn.sent if isinstance(u, schema.AgentMessageChunk))
    assert text == "".join(u.content.text for u in emitted if isinstance(u, schema.AgentMessageChunk))
    assert [{k: v for k, v in r["update"].items() if k != "messageId"} for r in store.load("s1").history] == sent
    await session.close()


async def test_a_newer_output_snapshot_still_queued_replaces_the_older_one(tmp_path: Path) -> None:
    store, conn = SessionStore(tmp_path / "state"), FakeConn()
    store.create("s1", str(tmp_path), "auto")
    session = AcpSession("s1", str(tmp_path), "auto", conn, store, ScriptedBackend([]), Limits())
    for update in (events.tool_call_output("c1", "a"), events.tool_call_output("c1", "ab")):
        session._emit(update)
    await session.flush()
    assert [dumped(u) for u in conn.sent] == [dumped(events.tool_call_output("c1", "ab"))]
    await session.close()


async def test_over_the_sdk_connection_updates_go_out_as_dumped_for_the_log(tmp_path: Path, scripted_model) -> None:
    call = {"name": "run_command", "arguments": {"command": "date"}}
    model = scripted_model([{"text": "Let me check the date.", "tool_calls": [call]}, {"text": "Done."}])
    client = AcpTestClient()
    state = tmp_path / "state"
    async with served(ServiceConfig(model, state, "auto"), client) as (conn, agent, _):
        session_id = (await conn.new_session(cwd=str(tmp_path))).session_id
        assert agent.sessions[session_id]._notify is not None  # the SDK still has the connection we reuse
        response = await conn.prompt(session_id=session_id, prompt=[text_block("date?")])
    assert response.stop_reason == "end_turn"
    assert client.text() == "Let me check the date.Done."
    # What the client validated is what the log holds, update for update.
    history = [r["update"] for r in SessionStore(state).load(session_id).history if r["type"] == "update"]
    # (The session's commands are announced outside the log: a loaded session announces them afresh.)
    sent = [u for u in client.updates if u.session_update != "available_commands_update"]
    assert [dumped(u) for u in sent] == history


async def test_during_a_turn_the_log_is_written_in_one_group_and_before_the_answer(
    tmp_path: Path, scripted_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = {"name": "run_command", "arguments": {"command": "true"}}
    model = scripted_model([{"text": "One.", "tool_calls": [call]}])
    writes: list[list[dict[str, Any]]] = []
    append = SessionStore.append

    def counting_append(self: SessionStore, session_id: str, records: list[dict[str, Any]]) -> None:
        writes.append(records)
        append(self, session_id, records)

    monkeypatch.setattr(SessionStore, "append", counting_append)
    monkeypatch.setattr(acp_session, "LOG_GROUP_S", 30.0)
    async with served(ServiceConfig(model, tmp_path / "state", "auto"), AcpTestClient()) as (conn, _, _):
        session_id = (await conn.new_session(cwd=str(tmp_path))).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("go")])
        assert len(writes) == 1  # the whole turn, at its end
        assert writes[0][0]["type"] == "prompt" and writes[0][-1]["type"] == "turn_end"
        saved = SessionStore(tmp_path / "state").load(session_id)  # on disk when the answer came
        assert [m.role for m in saved.messages] == ["user", "assistant", "tool", "assistant"]
        await conn.set_session_mode(session_id=session_id, mode_id="ask")  # no turn running: written at once
        await asyncio.sleep(0.1)
        assert len(writes) == 2 and writes[1][0] == {"type": "mode", "mode": "ask"}
        assert [r["update"]["sessionUpdate"] for r in writes[1][1:]] == ["config_option_update"]


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_message_record_is_asdict_without_the_copies() -> None:
    messages = [
        Message("user", "hi"),
        Message("assistant", "", [ToolCall("c1", "run_command", {"command": "ls", "nested": {"a": [1]}})]),
        Message("assistant", "", [ToolCall("c2", "read_file", {}, "bad json", "{oops")]),
        Message("tool", "out", tool_call_id="c1", name="run_command"),
        Message("assistant", "done", reasoning="\nthe tests pass\n"),
    ]
    for message in messages:
        assert message_record(message) == dataclasses.asdict(message)
        assert list(message_record(message)) == list(dataclasses.asdict(message))


def test_reasoning_is_kept_and_logs_written_before_it_still_load(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create("s1", str(tmp_path), "ask")
    thought = Message("assistant", "done", reasoning="\nthe tests pass\n")
    older = {"role": "assistant", "content": "hi", "tool_calls": [], "tool_call_id": None, "name": None}
    store.append("s1", [{"type": "turn_end", "messages": [message_record(thought), older]}])
    assert store.load("s1").messages == [thought, Message("assistant", "hi")]


async def test_the_pacer_hands_out_one_turn_per_loop_pass_in_order_and_skips_the_cancelled() -> None:
    pacer, passes, seen = StepPacer(), [0], []
    stop = False

    def tick() -> None:  # counts passes of the event loop
        passes[0] += 1
        if not stop:
            asyncio.get_running_loop().call_soon(tick)

    tick()

    async def worker(name: str) -> None:
        for _ in range(3):
            await pacer.wait_turn()
            seen.append((name, passes[0]))

    waiting = asyncio.create_task(pacer.wait_turn())
    tasks = [asyncio.create_task(worker(name)) for name in "abc"]
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    stop = True
    assert sorted(name for name, _ in seen) == sorted("abc" * 3)
    turns = [at for _, at in seen]
    assert len(set(turns)) == len(turns)  # never two in one pass: I/O gets a pass between them
    assert [name for name, _ in seen[:3]] == ["a", "b", "c"]  # in order of asking
    await pacer.wait_turn()  # idle again: goes on at once


async def test_sessions_of_one_server_share_its_pacer(tmp_path: Path) -> None:
    async with served(ServiceConfig(None, tmp_path / "state"), AcpTestClient()) as (conn, agent, _):
        first = (await conn.new_session(cwd=str(tmp_path))).session_id
        second = (await conn.new_session(cwd=str(tmp_path))).session_id
        assert agent.sessions[first].pacer is agent.sessions[second].pacer is agent.service.pacer


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_merged_chunks_rebuild_a_plain_update() -> None:
    pending = update_stream.PendingUpdate(None, update_agent_message_text("a"))
    assert pending.merge(update_agent_message_text("b"))
    assert not pending.merge(events.thought_chunk("c"))
    assert pending.finish() == {"type": "update", "update": dumped(update_agent_message_text("ab"))}


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_chunks_keep_their_message_id_when_merged_or_split_and_two_messages_never_merge() -> None:
    first, second = (update_agent_message_text("a").model_copy(update={"message_id": i}) for i in ("m1", "m2"))
    pending = update_stream.PendingUpdate(None, first)
    assert not pending.merge(second)  # the same kind, another message
    assert pending.merge(first)
    assert pending.finish()["update"] == {**dumped(update_agent_message_text("aa")), "messageId": "m1"}
    long = update_agent_message_text("x" * (TEXT_CHUNK_CHARS + 1)).model_copy(update={"message_id": "m3"})
    pieces = update_stream.split_long_chunk(long)
    assert len(pieces) == 2 and {p.message_id for p in pieces} == {"m3"}
