from __future__ import annotations

import json
from pathlib import Path

import pytest

from warpcode.agent.events import SessionUpdate

FIX_SCRIPT = {
    "turns": [
        {
            "text": "I will look at the code first.",
            "tool_calls": [
                {
                    "name": "update_plan",
                    "arguments": {"entries": [{"content": "Fix add()", "status": "in_progress", "priority": "high"}]},
                },
                {"name": "read_file", "arguments": {"path": "calc.py"}},
            ],
        },
        {
            "tool_calls": [
                {"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
            ]
        },
        {"tool_calls": [{"name": "run_tests", "arguments": {}}]},
        {"text": "Fixed add(): it subtracted instead of adding. The test passes now."},
    ]
}


@pytest.fixture
def failing_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return repo


@pytest.fixture
def fix_turns() -> list[dict]:
    """Scripted model turns that fix `failing_repo`: plan, read, edit, test, summary."""
    return json.loads(json.dumps(FIX_SCRIPT["turns"]))


@pytest.fixture
def scripted_model(tmp_path: Path):
    """Writes turns to a script file; returns its `scripted:PATH` model spec."""

    def write(turns: list[dict]) -> str:
        path = tmp_path / "script.json"
        path.write_text(json.dumps({"turns": turns}))
        return f"scripted:{path}"

    return write


@pytest.fixture
def events() -> Recorder:
    return Recorder()


class Recorder(list):
    """An event sink keeping every session update, with filters by type."""

    def __call__(self, update: SessionUpdate) -> None:
        self.append(update)

    def of(self, kind: str) -> list[SessionUpdate]:
        return [u for u in self if u.session_update == kind]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))
