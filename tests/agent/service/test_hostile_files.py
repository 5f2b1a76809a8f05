"""The file tools against a hostile file system, through the real service (`warpcode serve` / `warpcode acp`
subprocesses, the ACP SDK's client, scripted models whose tool calls do the attack): a server killed in the middle
of a large patch, a FIFO, a directory swapped for a symlink to outside, files edited behind the agent's back, and
patches asking for symlinks or setuid files."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import acp
import pytest
from acp.helpers import text_block
from acp.schema import ToolCallProgress

from tests.agent.acp_clients import AcpTestClient, RecordingClient
from tests.agent.service_processes import TOKEN, acp_process, connect, start_server
from tests.tools.hostile import kill_when, many_files, patch_of, patched, swapping, temp_files

pytestmark = pytest.mark.asyncio
SECRET = "OUTSIDE secret\n"
STALE = "changed on disk since you last read it"


def _script(tmp_path: Path, *prompts: list[dict]) -> Path:
    """A scripted model: for each prompt, one turn making all its tool calls, then a closing turn."""
    turns = []
    for calls in prompts:
        turns += [{"tool_calls": [{"name": name, "arguments": args} for name, args in calls]}, {"text": "Done."}]
    path = tmp_path / f"model-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"turns": turns, "context_window": 10_000_000}))
    return path


def _results(client: RecordingClient, session_id: str) -> list[tuple[str, str]]:
    """(status, text) of each finished tool call, in order."""
    return [
        (u.status, "".join(getattr(getattr(c, "content", None), "text", "") for c in u.content or []))
        for u in client.updates.get(session_id, [])
        if isinstance(u, ToolCallProgress) and u.status in ("completed", "failed")
    ]


class Served:
    """One `warpcode serve` subprocess and one client session in `cwd`."""

    def __init__(self, tmp_path: Path, script: Path) -> None:
        self.process, self.url = start_server(tmp_path, script, "--token", TOKEN)

    async def open(self, cwd: Path) -> Served:
        self.client = RecordingClient()
        self.connection = await connect(self.url, self.client)
        self.session_id = (await self.connection.new_session(cwd=str(cwd))).session_id
        return self

    async def prompt(self, timeout_s: float = 60) -> list[tuple[str, str]]:
        prompt = self.connection.prompt(session_id=self.session_id, prompt=[acp.text_block("go")])
        response = await asyncio.wait_for(prompt, timeout_s)
        assert response.stop_reason == "end_turn"
        return _results(self.client, self.session_id)

    async def stop(self) -> None:
        if self.process.poll() is None:
            await self.connection.close()
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


@pytest.mark.slow
async def test_server_killed_mid_patch_is_finished_by_the_next_session(tmp_path: Path) -> None:
    for attempt in range(3):  # nothing slows this server down: retry if the kill came after the last rename
        root = tmp_path / f"repo{attempt}"
        root.mkdir()
        rels = many_files(root, 3000)
        server = await Served(tmp_path, _script(tmp_path, [("apply_patch", {"patch": patch_of(rels)})])).open(root)
        if await _killed_once_renaming(server, root / rels[0]) and patched(root, rels) < len(rels):
            break
    assert 0 < patched(root, rels) < len(rels) and temp_files(root)  # torn: some files patched, temps left

    started = time.monotonic()
    restarted = await Served(tmp_path, _script(tmp_path, [("read_file", {"path": rels[-1]})])).open(root)
    try:
        assert patched(root, rels) == len(rels)  # the new session finished the patch before any tool ran
        assert temp_files(root) == []
        assert (await restarted.prompt())[0] == ("completed", f"     1\tnew {len(rels) - 1}")
    finally:
        await restarted.stop()
    assert time.monotonic() - started < 15


async def _killed_once_renaming(server: Served, first: Path) -> bool:
    """Prompt (the script applies the patch) and SIGKILL the server once `first` is patched."""
    prompting = asyncio.ensure_future(server.prompt())
    try:
        return await asyncio.to_thread(kill_when, server.process, lambda: first.read_text() != "old 0\n")
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
        prompting.cancel()
        await asyncio.gather(prompting, return_exceptions=True)


@pytest.mark.slow
async def test_read_file_of_a_fifo_answers_at_once(tmp_path: Path, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe.txt")
    server = await Served(tmp_path, _script(tmp_path, [("read_file", {"path": "pipe.txt"})])).open(workspace)
    try:
        [(status, text)] = await server.prompt(timeout_s=20)
    finally:
        await server.stop()
    assert status == "failed" and "'pipe.txt' is a FIFO (named pipe), not a regular file" in text


@pytest.mark.slow
async def test_a_directory_swapped_for_a_symlink_never_leads_outside(tmp_path: Path, workspace: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(SECRET)
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside\n")
    calls = [("read_file", {"path": "d/f.txt"}), ("write_file", {"path": "d/w.txt", "content": "agent\n"})] * 150
    server = await Served(tmp_path, _script(tmp_path, calls)).open(workspace)
    try:
        with swapping(workspace / "d", outside, seconds=60):
            results = await server.prompt()
    finally:
        await server.stop()
    assert len(results) == 300 and any(status == "failed" for status, _ in results)  # the race really ran
    assert not any("OUTSIDE" in text for _, text in results)
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"] and (outside / "f.txt").read_text() == SECRET


async def test_a_file_edited_by_the_user_after_the_agent_read_it_is_not_overwritten(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    edit = ("edit_file", {"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"})
    server = await Served(tmp_path, _script(tmp_path, [("read_file", {"path": "a.py"})], [edit])).open(workspace)
    try:
        await server.prompt()
        (workspace / "a.py").write_text("x = 1\ny = 'the user'\n")
        status, text = (await server.prompt())[-1]
    finally:
        await server.stop()
    assert status == "failed" and f"'a.py' {STALE}" in text
    assert (workspace / "a.py").read_text() == "x = 1\ny = 'the user'\n"


async def test_editor_buffers_the_editor_saves_are_no_refusal_but_a_user_change_is(
    tmp_path: Path, failing_repo: Path, scripted_model
) -> None:
    calc = str(failing_repo / "calc.py")
    client = AcpTestClient(buffers={calc: "def add(a, b):\n    return a * b  # unsaved\n"})

    def edit(old: str, new: str) -> list[dict]:
        call = {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": old, "new_text": new}}
        return [{"tool_calls": [call]}, {"text": "Done."}]

    read = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]}]
    turns = read + edit("a * b", "a + b") + edit("a + b", "b + a") + edit("b + a", "a - b")
    async with acp_process(client, tmp_path / "state", "--model", scripted_model(turns), "--mode", "auto") as (conn, _):
        session = (await conn.new_session(cwd=str(failing_repo))).session_id
        await conn.prompt(session_id=session, prompt=[text_block("read, then edit")])
        Path(calc).write_text(client.buffers[calc])  # the editor saves the agent's edit to the disk
        await conn.prompt(session_id=session, prompt=[text_block("edit again")])
        client.buffers[calc] = client.buffers[calc].replace("# unsaved", "# typed by the user")
        await conn.prompt(session_id=session, prompt=[text_block("and again")])
    results = [(u.status, u.content) for u in client.of("tool_call_update") if u.status in ("completed", "failed")]
    assert [status for status, _ in results] == ["completed", "completed", "completed", "failed"]
    assert STALE in results[-1][1][0].content.text
    assert client.buffers[calc] == "def add(a, b):\n    return b + a  # typed by the user\n"


async def test_patches_get_only_the_executable_bit_and_no_symlinks(tmp_path: Path, workspace: Path) -> None:
    setuid = "diff --git a/run.sh b/run.sh\nnew file mode 104755\n--- /dev/null\n+++ b/run.sh\n@@ -0,0 +1 @@\n+echo\n"
    symlink = (
        "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n"
        "+/etc/passwd\n\\ No newline at end of file\n"
    )
    calls = [("apply_patch", {"patch": setuid}), ("apply_patch", {"patch": symlink})]
    server = await Served(tmp_path, _script(tmp_path, calls)).open(workspace)
    try:
        results = await server.prompt()
    finally:
        await server.stop()
    assert results[0][0] == "completed" and os.stat(workspace / "run.sh").st_mode & 0o7777 == 0o755 & ~_umask()
    assert results[1][0] == "failed" and "symlink entries (mode 120000) are not supported" in results[1][1]
    assert not os.path.lexists(workspace / "link")


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
