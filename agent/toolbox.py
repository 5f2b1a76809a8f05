"""The bridge between the agent loop and warpcode.tools: tool schemas, argument checks and dispatch.

Tool names and arguments are fixed (models and scripts use them). `Toolbox.call` never raises: unknown tools,
bad arguments and tool failures all come back as a ToolResult with ok=False and a message for the model.
No protocol or model code lives here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from warpcode import tools
from warpcode.tools.process import Executor, execute, in_thread_cancellable
from warpcode.tools.sandbox import Sandbox
from warpcode.tools.workspace import Workspace

log = logging.getLogger(__name__)

_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 1}
_NUM = {"type": "number", "exclusiveMinimum": 0}
_PLAN_ENTRY = {
    "type": "object",
    "properties": {
        "content": _STR,
        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
        "priority": {"type": "string", "enum": ["high", "medium", "low"]},
    },
    "required": ["content", "status", "priority"],
    "additionalProperties": False,
}


def _tool(description: str, properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    return {
        "description": description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    }


TOOLS: dict[str, dict[str, Any]] = {
    "read_file": _tool(
        "Read a text file with numbered lines. Large files are paged: the result says how to read on.",
        {"path": _STR, "start_line": _INT, "end_line": _INT},
        ["path"],
    ),
    "list_files": _tool(
        "List files under a directory (default: the workspace root), skipping .gitignored ones and Python "
        "environments. pattern is a glob, read from that directory: '*.py', 'src/**/*.ts', '*.{c,h}', or "
        "'!tests/**' to exclude.",
        {"path": _STR, "pattern": _STR},
        [],
    ),
    "search": _tool(
        "Search file contents line by line with a regular expression (RE2 syntax: like Python's, without "
        "look-around or backreferences; ^ and $ match at line ends, and a match spans lines only where the pattern "
        "has \\n), skipping .gitignored and binary files and Python environments. glob picks files: '*.py', "
        "'src/**/*.ts', '*.{c,h}', or '!tests/**' to exclude. Results are capped; narrow with path or glob.",
        {"pattern": _STR, "path": _STR, "glob": _STR},
        ["pattern"],
    ),
    "code_outline": _tool(
        "List the definitions (classes, functions, methods...) of a source file with their line ranges.",
        {"path": _STR},
        ["path"],
    ),
    "repo_map": _tool(
        "A map of the repository's most referenced definitions, ranked toward the focus files or identifiers.",
        {"focus": {"type": "array", "items": _STR}, "max_tokens": {"type": "integer", "minimum": 64}},
        [],
    ),
    "edit_file": _tool(
        "Replace old_text with new_text in a file. old_text must match one place (exactly, or ignoring "
        "whitespace/indentation) unless replace_all is true. An empty old_text creates a new file.",
        {"path": _STR, "old_text": _STR, "new_text": _STR, "replace_all": {"type": "boolean"}},
        ["path", "old_text", "new_text"],
    ),
    "write_file": _tool(
        "Write a whole file, creating or replacing it.", {"path": _STR, "content": _STR}, ["path", "content"]
    ),
    "apply_patch": _tool(
        "Apply a unified diff (git diff or diff -u format; several files, new, deleted and renamed files). "
        "All or nothing: if any hunk fails, no file is changed.",
        {"patch": _STR},
        ["patch"],
    ),
    "run_tests": _tool(
        "Run the project's tests (pytest, npm/yarn/pnpm test, go test or cargo test, detected) or the given "
        "command, optionally on some paths. Reports passed/failed counts and each failure.",
        {"command": _STR, "paths": {"type": "array", "items": _STR}, "timeout_s": _NUM},
        [],
    ),
    "run_command": _tool(
        "Run a shell command in the workspace root. It is killed with all its child processes on timeout.",
        {"command": _STR, "timeout_s": _NUM},
        ["command"],
    ),
    "update_plan": _tool(
        "Replace the task plan shown to the user with these entries.",
        {"entries": {"type": "array", "items": _PLAN_ENTRY}},
        ["entries"],
    ),
}

# The ACP ToolKind of each tool, for the loop's tool_call notifications and permission policy.
TOOL_KINDS = {
    "read_file": "read",
    "list_files": "search",
    "search": "search",
    "code_outline": "read",
    "repo_map": "search",
    "edit_file": "edit",
    "write_file": "edit",
    "apply_patch": "edit",
    "run_tests": "execute",
    "run_command": "execute",
    "update_plan": "think",
}


def tool_schemas() -> list[dict[str, Any]]:
    """Every tool in the OpenAI function-tool format."""
    return [{"type": "function", "function": {"name": name, **spec}} for name, spec in TOOLS.items()]


@dataclass
class ToolResult:
    ok: bool
    content: str  # what the model reads
    data: Any = None  # the typed result (EditResult, PatchResult, TestReport, plan entries...) for the loop
    error: str | None = None  # the error's type name when ok is False


PREVIEWED = ("edit_file", "write_file", "apply_patch")  # the tools whose effect can be shown before they run


class ArgumentError(Exception):
    """A tool call's arguments do not match the tool's JSON schema; the message names the field."""


_JSON_TYPES = {"string": str, "boolean": bool, "object": dict, "array": list}


def validate(value: Any, schema: dict[str, Any], where: str) -> None:
    """Check `value` against the small JSON-schema subset used in TOOLS; raise ArgumentError naming the field."""
    kind = schema["type"]
    if kind in ("integer", "number"):
        allowed = (int,) if kind == "integer" else (int, float)
        if isinstance(value, bool) or not isinstance(value, allowed):
            expected = "an integer" if kind == "integer" else "a number"
            raise ArgumentError(f"'{where}' must be {expected}, got {value!r}")
        if value < schema.get("minimum", value) or value <= schema.get("exclusiveMinimum", value - 1):
            raise ArgumentError(f"'{where}' is out of range: {value!r}")
        return
    if not isinstance(value, _JSON_TYPES[kind]):
        raise ArgumentError(f"'{where}' must be of type {kind}, got {type(value).__name__}")
    if "enum" in schema and value not in schema["enum"]:
        raise ArgumentError(f"'{where}' must be one of {schema['enum']}, got {value!r}")
    if kind == "array":
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{where}[{i}]")
    elif kind == "object":
        properties = schema["properties"]
        prefix = f"{where}." if where else ""
        unknown = sorted(set(value) - set(properties))
        if unknown:
            raise ArgumentError(f"unknown argument '{prefix}{unknown[0]}'; allowed: {', '.join(properties)}")
        for field in schema.get("required", []):
            if field not in value:
                raise ArgumentError(f"missing required argument '{prefix}{field}'")
        for field, item in value.items():
            if item is not None or field in schema.get("required", []):
                validate(item, properties[field], f"{prefix}{field}")


class Toolbox:
    """Runs the fixed tools in one workspace. `on_output` receives run_tests/run_command output as it streams;
    with a `sandbox`, run_tests and run_command run in it; `executor` runs their commands (process.py)."""

    def __init__(
        self,
        workspace: Workspace | str,
        on_output: Callable[[str], None] | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.on_output, self.sandbox = on_output, sandbox
        self.executor: Executor = execute  # the ACP session may give the editor's terminals instead
        self._patch_recovered = False

    def finish_interrupted_patch(self) -> None:
        """Finish (or undo) a patch whose process was killed midway, once; done before this toolbox's first tool at
        the latest. Blocking file work, thousands of renames after a big patch: call it off the event loop."""
        if self._patch_recovered:
            return
        self._patch_recovered = True
        try:
            done = tools.recover_interrupted_patch(self.workspace)
        except OSError as exc:  # the next apply_patch tries again, and reports it
            log.warning("recovering an interrupted patch in %s failed: %s", self.workspace.root, exc)
            return
        if done:
            log.warning("%s: %s", self.workspace.root, done)

    def call(self, name: str, arguments: dict[str, Any], cancel: threading.Event | None = None) -> ToolResult:
        self.finish_interrupted_patch()
        if name not in TOOLS:
            return ToolResult(
                False, f"Unknown tool {name!r}. Available tools: {', '.join(TOOLS)}.", error="UnknownTool"
            )
        if not isinstance(arguments, dict):
            return ToolResult(False, f"Arguments of {name} must be a JSON object.", error="ArgumentError")
        try:
            validate(arguments, TOOLS[name]["parameters"], "")
        except ArgumentError as exc:
            return ToolResult(False, f"Invalid arguments for {name}: {exc}.", error="ArgumentError")
        args = {key: value for key, value in arguments.items() if value is not None}
        try:
            data = self._dispatch(name, args, cancel)
        except tools.ToolError as exc:
            return ToolResult(False, str(exc), error=type(exc).__name__)
        except Exception as exc:  # a bug or an OS failure is still an answer the loop can show, not a crash
            return ToolResult(False, f"{name} failed: {type(exc).__name__}: {exc}", error=type(exc).__name__)
        if name == "update_plan":
            lines = [f"[{entry['status']}] ({entry['priority']}) {entry['content']}" for entry in data]
            return ToolResult(True, "Plan updated:\n" + "\n".join(lines), data)
        if isinstance(data, tools.TestReport) and not data.ok:  # failing tests are a failed call, everywhere
            return ToolResult(False, data.render(), data, error="TestsFailed")
        return ToolResult(True, data.render(), data)

    def preview(self, name: str, arguments: dict[str, Any]) -> Any:
        """What edit_file, write_file or apply_patch would change (their result, nothing written), to show before
        the call is allowed; None for other tools and for a call that would fail (its error comes when it runs)."""
        if name not in PREVIEWED:
            return None
        try:
            validate(arguments, TOOLS[name]["parameters"], "")
            args = {key: value for key, value in arguments.items() if value is not None}
            if name == "apply_patch":
                return tools.apply_patch(self.workspace, args["patch"], dry_run=True)
            return self._dispatch(name, args, None, self.workspace.dry_run())
        except Exception:  # a call that would fail: the real call reports why
            return None

    async def call_async(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """`call` in a worker thread; cancelling the awaiting task kills a running command's process group."""
        return await in_thread_cancellable(lambda cancel: self.call(name, arguments, cancel))

    def _dispatch(
        self, name: str, args: dict[str, Any], cancel: threading.Event | None, ws: Workspace | None = None
    ) -> Any:
        ws = ws or self.workspace
        if name == "read_file":
            return tools.read_file(ws, args["path"], args.get("start_line"), args.get("end_line"))
        if name == "list_files":
            return tools.list_files(ws, args.get("path", "."), args.get("pattern"))
        if name == "search":
            return tools.search(ws, args["pattern"], args.get("path", "."), args.get("glob"))
        if name == "code_outline":
            return tools.code_outline(ws, args["path"])
        if name == "repo_map":
            return tools.repo_map(ws, args.get("focus"), args.get("max_tokens", 2048))
        if name == "edit_file":
            return tools.edit_file(ws, args["path"], args["old_text"], args["new_text"], args.get("replace_all", False))
        if name == "write_file":
            return tools.write_file(ws, args["path"], args["content"])
        if name == "apply_patch":
            return tools.apply_patch(ws, args["patch"])
        if name == "run_tests":
            return tools.run_tests(
                ws,
                args.get("command"),
                args.get("paths"),
                args.get("timeout_s", 600.0),
                self.on_output,
                cancel,
                self.sandbox,
                self.executor,
            )
        if name == "run_command":
            return tools.run_command(
                ws, args["command"], args.get("timeout_s", 120.0), self.on_output, cancel, self.sandbox, self.executor
            )
        return args["entries"]
