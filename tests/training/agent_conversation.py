"""A coding agent's conversation for the training tests: system prompt, request, several rounds of tool calls of
every argument type (code holding this format's own tags among them), tool results, an answer and a follow-up."""

from __future__ import annotations

from warpcode.model_runtime.chat.messages import Message, ToolCall

# what a coding agent writes: code, this format's own tags, markup (none where the format could end a value)
CODE = "def f(a, b):\n    if a < b and '</parameter>' in s:  # <tool_call>\n        return {'k': [1]}, None\n"
CALLS = [
    ToolCall("c1", "read_file", {"path": "src/a.py", "start_line": 3, "end_line": 40}),
    ToolCall(
        "c2", "edit_file", {"path": "a.py", "old_text": CODE, "new_text": CODE + "<b>x</b>", "replace_all": False}
    ),
    ToolCall("c3", "run_tests", {"paths": ["tests/test_a.py", "tests/b c.py"], "timeout_s": 2.5}),
    ToolCall("c4", "update_plan", {"entries": [{"content": "fix <a>", "status": "in_progress", "priority": "high"}]}),
    ToolCall("c5", "search", {"pattern": r"def \w+\(", "glob": "*.py"}),
    ToolCall("c6", "write_file", {"path": "empty.txt", "content": ""}),
]


def conversation(system: bool = True) -> list[Message]:
    messages = [Message("system", "You are warpcode, a coding agent.")] if system else []
    return [
        *messages,
        Message("user", "Fix the failing test in tests/test_a.py"),
        Message("assistant", "Let me look first.", CALLS[:1]),
        Message("tool", "1 def f(a, b):\n2     return a - b", tool_call_id="c1", name="read_file"),
        Message("assistant", "", CALLS[1:3]),
        Message("tool", "Edited src/a.py", tool_call_id="c2", name="edit_file"),
        Message("tool", "1 passed", tool_call_id="c3", name="run_tests"),
        Message("assistant", "", CALLS[3:]),
        Message("tool", "ok", tool_call_id="c4", name="update_plan"),
        Message("tool", "a.py:1: def f(", tool_call_id="c5", name="search"),
        Message("tool", "wrote empty.txt", tool_call_id="c6", name="write_file"),
        Message("assistant", "Fixed: f now adds.\n\n```python\n    return a + b\n```"),
        Message("user", "Thanks. Anything else?"),
    ]
