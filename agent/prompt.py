"""The system prompt: role, rules, the current mode, the tools and the workspace's repository map.

The tools' JSON schemas travel next to the messages (OpenAI `tools`, or the chat template's tools section), so
the prompt lists them by name and purpose only.
"""

from __future__ import annotations

from warpcode.agent.toolbox import TOOLS
from warpcode.tools import ToolError, Workspace, repo_map

REPO_MAP_TOKENS = 1024

ROLE = """You are warpcode, a coding agent working in the user's repository at {root}.
You act through tools; every path is relative to that root and nothing outside it can be touched."""

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


def system_prompt(workspace: Workspace, mode: str) -> str:
    tools = "\n".join(f"- {name}: {spec['description']}" for name, spec in TOOLS.items())
    parts = [ROLE.format(root=workspace.root), RULES, MODE_NOTES[mode], f"Tools:\n{tools}"]
    if overview := _repo_overview(workspace):
        parts.append(f"Repository map (most referenced definitions):\n{overview}")
    return "\n\n".join(parts)


def _repo_overview(workspace: Workspace) -> str:
    try:
        return repo_map(workspace, None, REPO_MAP_TOKENS).render().strip()
    except (ToolError, OSError):  # an empty or unreadable workspace simply has no map
        return ""
