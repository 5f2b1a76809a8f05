"""What a session's history shows, over real `warpcode serve` connections with the SDK's client: a prompt of
several blocks (text, a resource link, an embedded resource) replays on session/load as sent, block by block; each
message's chunks carry one messageId, the same live and in replay; the session is titled by its first prompt, with
session_info_update as soon as it has one and in session/list."""

from __future__ import annotations

import asyncio
import io
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest
from acp.helpers import embedded_text_resource, resource_block, resource_link_block, text_block
from rich.console import Console

from tests.agent.acp_clients import AcpTestClient
from tests.agent.service_processes import connect, serving
from warpcode.agent.cli.terminal_view import TerminalView
from warpcode.agent.service.prompt_record import prompt_record
from warpcode.agent.service.session import history_updates
from warpcode.agent.service.session_store import SessionStore

PROMPT = [
    text_block("Explain   this\nfunction:"),
    resource_link_block("b.py", "file:///w/b.py", mime_type="text/x-python"),
    resource_block(embedded_text_resource("file:///w/a.py", "def f():\n    return 1\n", mime_type="text/x-python")),
]


def dumped(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.asyncio
async def test_a_prompt_of_several_blocks_replays_as_sent_with_message_ids_and_a_title(
    tmp_path: Path, workspace: Path
) -> None:
    turns = [{"thought": "Read it.", "text": "It returns one."}, {"text": "Still one."}]
    async with serving(tmp_path, turns) as server:
        live = AcpTestClient()
        first = await connect(server.url, live)
        session_id = (await first.new_session(cwd=str(workspace))).session_id
        await first.prompt(session_id=session_id, prompt=PROMPT)
        await first.prompt(session_id=session_id, prompt=[text_block("And now?")])
        await first.close()
        await asyncio.sleep(0.3)  # the server releases the session

        replayed = AcpTestClient()
        second = await connect(server.url, replayed)
        await second.load_session(cwd=str(workspace), session_id=session_id)
        listed = await second.list_sessions(cwd=str(workspace))
        await second.close()

    users = replayed.of("user_message_chunk")
    assert [dumped(u.content) for u in users] == [dumped(b) for b in [*PROMPT, text_block("And now?")]]
    user_ids = [u.message_id for u in users]
    assert None not in user_ids and user_ids[0] == user_ids[1] == user_ids[2] != user_ids[3]

    # One id per message, shared by its chunks; the thought is a message of its own; replay keeps the ids.
    answers = [u for u in live.updates if u.session_update in ("agent_message_chunk", "agent_thought_chunk")]
    messages = [key for key, _ in groupby(answers, key=lambda u: (u.session_update, u.message_id))]
    assert [kind for kind, _ in messages] == ["agent_thought_chunk", "agent_message_chunk", "agent_message_chunk"]
    ids = {i for _, i in messages}
    assert None not in ids and len(ids) == 3 and not ids & set(user_ids)
    assert [u.message_id for u in replayed.of("agent_message_chunk")] == [
        u.message_id for u in live.of("agent_message_chunk")
    ]

    title = "Explain this function:"
    assert [u.title for u in live.of("session_info_update")] == [title]  # once, when the first prompt came
    turn = [u for u in live.updates if u.session_update != "available_commands_update"]  # sent at session/new
    assert turn[0].session_update == "session_info_update"  # before the turn's first update
    assert [(s.session_id, s.title) for s in listed.sessions] == [(session_id, title)]


def test_sessions_show_prints_each_block_of_a_replayed_prompt(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state")
    store.create("s1", str(tmp_path), "auto")
    store.append("s1", [prompt_record(PROMPT, "flattened", "m1")])
    console = Console(file=io.StringIO(), width=200)
    view = TerminalView(console)
    for update in history_updates("s1", store.load("s1").history):
        view(update)
    assert console.file.getvalue().splitlines() == [
        "> Explain   this",
        "function:",
        "> [b.py: file:///w/b.py]",
        "> [file:///w/a.py]",
    ]
