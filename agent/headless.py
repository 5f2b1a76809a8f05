"""The agent of a headless turn, one nobody watches (`warpcode run`, each job of `warpcode batch`): built from the
user's settings, with a permission question nobody can answer."""

from __future__ import annotations

from pathlib import Path

from warpcode.agent import events
from warpcode.agent.backends import backend_from_spec
from warpcode.agent.config import Settings
from warpcode.agent.loop import Agent, Limits
from warpcode.agent.mcp.session_tools import McpTools
from warpcode.agent.permissions import PermissionPolicy, mode_policy
from warpcode.tools import Workspace
from warpcode.tools.sandbox import sandbox_from_setting
from warpcode.tools.workspace import default_state_home, ensure_private_dir, workspace_state_dir


def nobody_to_ask(refused: list[str], yes: bool = False) -> PermissionPolicy:
    """The permission question of a headless turn: nobody can answer, so the call is rejected (and named in
    `refused`), or allowed when `yes`."""

    async def answer(tool_name: str, kind: str, arguments: dict) -> str:
        if yes:
            return "allow"
        refused.append(events.tool_title(tool_name, arguments))
        return "reject"

    return answer


def headless_agent(
    cwd: str,
    settings: Settings,
    mode: str,
    emit,
    ask: PermissionPolicy,
    *,
    max_turn_requests: int | None = None,
    sandbox: str | None = None,
    sandbox_network: bool | None = None,
    state_dir: Path | None = None,
    mcp: McpTools | None = None,
) -> Agent:
    """The settings' model and limits, `mode`'s permission policy with `ask` for the calls that would ask, its state
    under `state_dir` (default: the state home), its commands in `sandbox` (default: the settings'), the tools of
    `mcp`'s servers beside ours (the caller closes it)."""
    limits = Limits(
        max_turn_requests or settings.max_turn_requests,
        settings.tool_output_tokens,
        settings.max_tokens or Limits.answer_reserve_tokens,  # the context keeps room for the longest answer
    )
    home = ensure_private_dir((state_dir or default_state_home()).expanduser().resolve())
    network = settings.sandbox_network if sandbox_network is None else sandbox_network
    return Agent(
        Workspace(cwd, workspace_state_dir(home, cwd)),
        backend_from_spec(settings.model, settings.max_tokens),
        emit,
        mode,
        mode_policy(mode, ask),
        limits,
        sandbox_from_setting(sandbox or settings.sandbox, network, (home,)),
        mcp,
    )
