from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import pytest

from warpcode.agent.toolbox import TOOL_KINDS, TOOLS, Toolbox, tool_schemas
from warpcode.tools import EditResult, PatchResult, TestReport

FIXED_TOOLS = {
    "read_file": {"path", "start_line", "end_line"},
    "list_files": {"path", "pattern"},
    "search": {"pattern", "path", "glob"},
    "code_outline": {"path"},
    "repo_map": {"focus", "max_tokens"},
    "edit_file": {"path", "old_text", "new_text", "replace_all"},
    "write_file": {"path", "content"},
    "apply_patch": {"patch"},
    "run_tests": {"command", "paths", "timeout_s"},
    "run_command": {"command", "timeout_s"},
    "update_plan": {"entries"},
}


@pytest.fixture
def box(tmp_path: Path) -> Toolbox:
    (tmp_path / "app.py").write_text("def greet(name):\n    return 'hi ' + name\n")
    return Toolbox(tmp_path)


def test_schemas_cover_exactly_the_fixed_tools_and_arguments() -> None:
    schemas = tool_schemas()
    assert {s["function"]["name"] for s in schemas} == set(FIXED_TOOLS) == set(TOOL_KINDS)
    for schema in schemas:
        function = schema["function"]
        assert schema["type"] == "function" and function["description"]
        assert set(function["parameters"]["properties"]) == FIXED_TOOLS[function["name"]]


def test_the_globs_the_descriptions_show_select_what_they_say_in_both_tools(tmp_path: Path) -> None:
    for rel in ["setup.py", "lib.c", "lib.h", "src/ui/view.ts", "tests/test_lib.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("needle\n")
    selects = {
        "*.py": {"setup.py", "tests/test_lib.py"},
        "src/**/*.ts": {"src/ui/view.ts"},
        "*.{c,h}": {"lib.c", "lib.h"},
        "!tests/**": {"setup.py", "lib.c", "lib.h", "src/ui/view.ts"},
    }
    box = Toolbox(tmp_path)
    for tool, argument, extra in [("list_files", "pattern", {}), ("search", "glob", {"pattern": "needle"})]:
        assert re.findall(r"'([^'\s]+)'", TOOLS[tool]["description"]) == list(selects), tool
        for glob, files in selects.items():
            lines = box.call(tool, {argument: glob, **extra}).content.splitlines()
            assert {line.split(":")[0] for line in lines} == files, (tool, glob)
    assert "line by line" in TOOLS["search"]["description"]


def test_every_tool_runs_through_call(box: Toolbox, tmp_path: Path) -> None:
    assert "     1\tdef greet(name):" in box.call("read_file", {"path": "app.py"}).content
    assert box.call("list_files", {"pattern": "*.py"}).content == "app.py"
    assert "app.py:1:" in box.call("search", {"pattern": "def greet"}).content
    assert "function greet" in box.call("code_outline", {"path": "app.py"}).content
    assert box.call("repo_map", {"max_tokens": 200}).ok
    edited = box.call("edit_file", {"path": "app.py", "old_text": "'hi '", "new_text": "'hello '"})
    assert edited.ok and isinstance(edited.data, EditResult)
    assert box.call("write_file", {"path": "b.txt", "content": "one\n"}).ok
    patch = "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-one\n+two\n"
    patched = box.call("apply_patch", {"patch": patch})
    assert patched.ok and isinstance(patched.data, PatchResult)
    assert (tmp_path / "b.txt").read_text() == "two\n"
    ran = box.call("run_command", {"command": "echo $((6 * 7))"})
    assert ran.ok and "42" in ran.content
    (tmp_path / "test_app.py").write_text(
        "from app import greet\n\ndef test_greet():\n    assert greet('x') == 'hello x'\n"
    )
    tested = box.call("run_tests", {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider"})
    assert tested.ok and isinstance(tested.data, TestReport) and tested.data.passed == 1
    entries = [{"content": "write tests", "status": "in_progress", "priority": "high"}]
    plan = box.call("update_plan", {"entries": entries})
    assert plan.ok and plan.data == entries


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("delete_everything", {}, "Unknown tool 'delete_everything'"),
        ("read_file", {}, "missing required argument 'path'"),
        ("read_file", {"path": 3}, "'path' must be of type string"),
        ("read_file", {"path": "a", "start_line": "2"}, "'start_line' must be an integer"),
        ("read_file", {"path": "a", "start_line": True}, "'start_line' must be an integer"),
        ("read_file", {"path": "a", "start_line": 0}, "'start_line' is out of range"),
        ("read_file", {"path": "a", "bogus": 1}, "unknown argument 'bogus'"),
        ("run_command", {"command": "true", "timeout_s": -1}, "'timeout_s' is out of range"),
        ("repo_map", {"focus": "app.py"}, "'focus' must be of type array"),
        ("update_plan", {"entries": [{"content": "x", "status": "done", "priority": "high"}]}, "entries[0].status"),
        ("update_plan", {"entries": [{"content": "x", "status": "pending"}]}, "'entries[0].priority'"),
    ],
)
def test_bad_calls_become_error_results(box: Toolbox, name: str, arguments: dict, message: str) -> None:
    result = box.call(name, arguments)
    assert not result.ok
    assert message in result.content


def test_tool_errors_become_error_results(box: Toolbox) -> None:
    escaped = box.call("read_file", {"path": "../../etc/passwd"})
    assert (escaped.ok, escaped.error) == (False, "PathOutsideWorkspace")
    missing = box.call("edit_file", {"path": "app.py", "old_text": "nothing like this", "new_text": "x"})
    assert missing.error == "EditNotFound"
    timeout = box.call("run_command", {"command": "sleep 30", "timeout_s": 0.3})
    assert timeout.error == "CommandTimeout"
    assert not box.call("read_file", "app.py").ok  # type: ignore[arg-type]


def test_null_optional_arguments_count_as_absent(box: Toolbox) -> None:
    assert box.call("read_file", {"path": "app.py", "start_line": None}).ok


def test_output_streams_to_the_listener(tmp_path: Path) -> None:
    chunks: list[str] = []
    box = Toolbox(tmp_path, on_output=chunks.append)
    box.call("run_command", {"command": "echo streamed"})
    assert "".join(chunks) == "streamed\n"


async def test_cancelling_call_async_kills_the_command(tmp_path: Path) -> None:
    chunks: list[str] = []
    box = Toolbox(tmp_path, on_output=chunks.append)
    task = asyncio.create_task(box.call_async("run_command", {"command": "echo $$; sleep 60"}))
    while not chunks:
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.killpg(int(chunks[0].strip()), 0)
