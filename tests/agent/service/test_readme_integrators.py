"""The README's snippet for editor integrators, run as written against the real `warpcode serve`: what it says
of the SDK (`import acp.ws` is needed, `ext_method` adds the leading underscore) must hold."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from acp import RequestError

from tests.agent.acp_clients import RecordingClient
from tests.agent.scripted_model import write_script
from tests.agent.service_processes import TOKEN, start_server

pytestmark = pytest.mark.asyncio
README = Path(__file__).resolve().parents[3] / "README.md"


def _integrator_snippet() -> str:
    section = README.read_text().split("## Editor integrators", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.slow
async def test_the_readme_snippet_lists_checkpoints_and_the_underscore_pitfall_holds(tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    server, url = start_server(tmp_path, write_script(tmp_path / "model.json", [{"text": "hi"}]), "--token", TOKEN)
    try:
        snippet = _integrator_snippet().replace("ws://127.0.0.1:8765/acp", url).replace("/path/to/repo", str(workspace))
        code = (
            f"async def snippet(client, token):\n{textwrap.indent(snippet, '    ')}\n    return conn, session, listed\n"
        )
        namespace: dict = {}
        exec(compile(code, str(README), "exec"), namespace)
        conn, session, listed = await namespace["snippet"](RecordingClient(), TOKEN)
        assert listed == {"checkpoints": []}
        with pytest.raises(RequestError, match="Method not found"):
            await conn.ext_method("_warpcode/checkpoints", {"sessionId": session.session_id})
        await conn.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
