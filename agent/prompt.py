"""The system prompt: role, rules, the current mode, the tools, the project's AGENTS.md instructions and the
workspace's repository map.

The tools' JSON schemas travel next to the messages (OpenAI `tools`, or the chat template's tools section), so
the prompt lists them by name and purpose only.

The map of a large workspace takes seconds to build cold (a 12,000-file tree: about 36 s on two cores), so it is
never built on the event loop: `repo_overview` builds it in a thread pool of its own, once per workspace at a time
(sessions of the same workspace share the build), and a turn waits for it at most REPO_MAP_WAIT_S. A build that
takes longer still finishes in the background and fills the tag cache, so the next session gets its map.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from warpcode.agent.toolbox import TOOLS
from warpcode.tools import ToolError, Workspace, repo_map
from warpcode.tools.sandbox import Sandbox

REPO_MAP_TOKENS = 1024
REPO_MAP_WAIT_S = 5.0
_BUILDERS = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="warpcode-repo-map")
_builds: dict[str, concurrent.futures.Future[str]] = {}  # workspace root -> the build under way
_builds_lock = threading.Lock()

ROLE = """You are warpcode, a coding agent working in the user's repository at {root}.
You act through tools; every path is relative to that root and the file tools cannot touch anything outside it.
{commands}"""
COMMANDS = {  # whether commands run in a sandbox, and whether it has the network
    (False, True): "Commands (run_command, run_tests) run as the user, without a sandbox: they can change anything "
    "the user can, so keep them to the repository.",
    (True, False): "Commands (run_command, run_tests) run in a sandbox: they can read the machine but write only "
    "inside the repository (and a private /tmp), the user's credentials are hidden, and there is no network: "
    "nothing can be downloaded or installed from the internet.",
    (True, True): "Commands (run_command, run_tests) run in a sandbox: they can read the machine but write only "
    "inside the repository (and a private /tmp), and the user's credentials are hidden; they have the network.",
}

RULES = """Rules:
- Read before you edit: look at the code (read_file, search, code_outline) and never guess its contents.
- Make the smallest change that does the job, in the style of the surrounding code.
- For work of several steps, keep a plan with update_plan and update it as steps complete.
- After changing code, run the relevant tests (run_tests) and fix what you broke.
- When a tool returns an error, read it and correct the call; do not repeat a failing call unchanged.
- When you are done, stop calling tools and answer with a short summary of what you changed."""

MODE_NOTES = {
    "ask": "Mode: ask. Edits, commands and tests need the user's permission; a rejected call is final.",
    "accept-edits": "Mode: accept-edits. Edits apply directly; commands and tests need the user's permission.",
    "auto": "Mode: auto. Every tool runs without asking.",
}


def system_prompt(
    workspace: Workspace, mode: str, overview: str = "", sandbox: Sandbox | None = None, instructions: str = ""
) -> str:
    """The system prompt; `overview` is the repository map text from `repo_overview` ("" for none), `sandbox`
    where commands run (what the prompt tells the model they can do), `instructions` the project's AGENTS.md
    section (project_instructions.py: framed as the repository's words, after our rules so they cannot pose as
    them)."""
    tools = "\n".join(f"- {name}: {spec['description']}" for name, spec in TOOLS.items())
    commands = COMMANDS[sandbox is not None, sandbox is None or sandbox.network]
    role = ROLE.format(root=workspace.root, commands=commands)
    parts = [role, RULES, MODE_NOTES[mode], f"Tools:\n{tools}"]
    if instructions:
        parts.append(instructions)
    if overview:
        parts.append(f"Repository map (most referenced definitions):\n{overview}")
    return "\n\n".join(parts)


async def repo_overview(workspace: Workspace, wait_s: float = REPO_MAP_WAIT_S) -> str:
    """The workspace's repository map for the system prompt, or "" when it is not ready within `wait_s`."""
    key = str(workspace.root)
    with _builds_lock:
        started = key not in _builds
        if started:
            _builds[key] = _BUILDERS.submit(_build_overview, workspace)
        build = _builds[key]
    if started:  # outside the lock: a build that is already done runs the callback here, at once
        build.add_done_callback(lambda _: _forget(key))
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(build)), wait_s)
    except TimeoutError:
        return ""


def _build_overview(workspace: Workspace) -> str:
    try:
        return repo_map(workspace, None, REPO_MAP_TOKENS).render().strip()
    except (ToolError, OSError):  # an empty or unreadable workspace simply has no map
        return ""


def _forget(key: str) -> None:
    with _builds_lock:
        _builds.pop(key, None)
