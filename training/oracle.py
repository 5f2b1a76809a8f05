"""The oracle: a model backend that solves a task by following its plan, reading the conversation as a model would.

It plugs into the agent loop where a model goes (the ModelBackend interface), so the agent runs as it always does:
the oracle's tool calls go through the loop's checks and the real tools, and their real results come back in the
conversation. Each request, it decides the next step from the plan and from what the conversation shows:

1. the plan's looks, one per turn (a search, a test run, reads); "read_found" reads the files the last search
   listed, taken from the search's real output;
2. the edits, as edit_file calls (all in one turn, or one per turn) or as one apply_patch whose unified diff is
   made from the files as read_file showed them; a file not read yet is read first when the diff needs it;
3. the tests, run once more;
4. a short answer.

It never uses what the conversation has not shown: each edit's old text must appear in a tool result about that
file (a read, or a search line), and each file it reads must have been named before (instruction, system prompt or
a tool result). A tool result other than the one expected (a failed edit, tests still failing at the end) makes it
stop with a BackendError, and the trajectory is dropped.

Slips. A model that only ever saw flawless steps has never seen what to do after a wrong one, and a small model
makes wrong ones: it searches a name it half copied, or changes the constant where the operator was wrong. So in a
share of trajectories (`slip_share`) the oracle makes one such mistake on purpose and recovers from it as a careful
agent would:
- a search slip: the planned search with one word of the name swapped, which finds nothing; then the planned search;
- an edit slip (a plan of one edit_file edit, whose tests failed at first): the edit with a wrong number or name;
  the tests still fail, so it reads the file again and edits the wrong text into the right one.
The slip's own turn is marked `unlearned` (its index in the conversation): fine-tuning learns the recovery, never the
mistake (conversations.py).
"""

from __future__ import annotations

import difflib
import keyword
import random
import re
from collections.abc import AsyncIterator
from typing import Any

from warpcode.agent.backends import BackendError, Finish, ModelEvent, TextDelta, ToolCallReady, approximate_tokens
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.training.tasks import Edit, Look, Task

_SEARCH_LINE = re.compile(r"^(.+?):(\d+): (.*)$")
_VIEW_LINE = re.compile(r"^ *(\d+)\t(.*)$")
PATCH_SHARE = 0.3  # trajectories that edit with apply_patch; the rest use edit_file
ONE_TURN_SHARE = 0.5  # of those with several edit_file calls: all in one turn
SLIP_SHARE = 0.2  # trajectories with one slip and its recovery (module docstring)
_NUMBER = re.compile(r"\b\d+\b")
_NAME = re.compile(r"\b[A-Za-z][A-Za-z0-9_]{2,}\b")
# words a half-copied name turns into: common in code, so the slip looks like the small model's own mistakes
SLIP_WORDS = ("value", "count", "item", "data", "load", "wrap", "total", "check", "result", "index")

SAY = {  # the text before a call; one is picked, or none
    "search": ("Let me search for `{pattern}`.", "Searching the repository first.", "I'll find where it is used."),
    "read_file": ("Let me read {path}.", "Reading {path}.", "Let me look at the code."),  # {path}: one or several
    "list_files": ("Let me find the file.", "Looking for {pattern}."),
    "run_tests": ("Let me run the tests first.", "First, the tests.", "Running the tests to see the failure."),
    "edit": ("Now the edit.", "Updating {paths}.", "I'll make the change."),
    "retest": ("Running the tests again.", "Let me check that the tests pass.", "Now the tests."),
    "research": (
        "No match: I got the name wrong. Searching for `{pattern}`.",
        "Nothing found; the exact name is `{pattern}`.",
        "Let me search again with the exact name from the request.",
    ),
    "reread": (
        "The test still fails. Let me read {path} again.",
        "Still failing: my edit was wrong. Reading {path}.",
        "That did not fix it. Let me look at {path} again.",
    ),
}


class OracleBackend:
    """Follows `task`'s plan, its choices (edit_file or apply_patch, calls per turn, wording) drawn from `rng`.
    `received` holds the messages and tools of the last request, as the loop passed them."""

    context_window = 32_768

    def __init__(self, task: Task, rng: random.Random, slip_share: float = SLIP_SHARE) -> None:
        self.task, self.rng = task, rng
        self.patch = rng.random() < PATCH_SHARE
        self.one_turn = rng.random() < ONE_TURN_SHARE
        self.received: list[Message] = []
        self.tools: list[dict[str, Any]] = []
        self.unlearned: list[int] = []  # the conversation's indices of the slips' assistant turns
        self._looks = list(task.plan.looks)
        self._edits = list(task.plan.edits)
        self._expect: list[tuple[str, str]] = []  # (tool, what its result must show) for the calls of last turn
        self._queued: list[tuple[str, list[tuple[str, dict[str, Any]]], str, dict[str, Any]]] = []  # after a slip
        self._done = False
        possible = {"search": any(look.tool == "search" for look in self._looks),
                    "edit": len(self._edits) == 1 and not self.patch}  # fmt: skip
        kinds = [kind for kind, can in possible.items() if can]
        self._slip = rng.choice(kinds) if kinds and rng.random() < slip_share else None

    async def prepare(self) -> None:
        """Nothing to learn: the plan is the model."""

    def count_tokens(self, text: str) -> int:
        return approximate_tokens(text)

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        self.received, self.tools = list(messages), tools
        text, calls = self._next(messages)
        if text:
            yield TextDelta(text)
        for call in calls:
            yield ToolCallReady(call)
        output = approximate_tokens(text + "".join(c.arguments_json() for c in calls))
        yield Finish("tool_calls" if calls else "stop", sum(approximate_tokens(m.content) for m in messages), output)

    # --- deciding ---

    def _next(self, messages: list[Message]) -> tuple[str, list[ToolCall]]:
        self._check_results(messages)
        if self._queued:
            say, calls, expect, names = self._queued.pop(0)
            return self._turn(say, calls, expect, **names)
        if self._looks:
            look = self._looks.pop(0)
            if self._slip == "search" and look.tool == "search":
                return self._search_slip(look, messages)
            return self._look(look, messages)
        if self._edits:
            if self._slip == "edit":
                return self._edit_slip(messages)
            return self._edit(messages)
        if not self._done:
            self._done = True
            return self._turn("retest", [("run_tests", {})], "passed")
        return self.task.plan.answer, []

    def _look(self, look: Look, messages: list[Message]) -> tuple[str, list[ToolCall]]:
        if look.tool == "read_found":
            paths = list(dict.fromkeys(m.group(1) for m in _search_lines(_last_result(messages, "search"))))
            if not paths:
                raise BackendError("oracle: the search found no file to read")
            return self._turn("read_file", [("read_file", {"path": p}) for p in paths], "view", path=", ".join(paths))
        if look.tool == "read_file":
            self._named_before(look.arguments["path"], messages)
        expect = {"run_tests": "ran", "search": "matches", "list_files": "listed", "read_file": "view"}[look.tool]
        return self._turn(look.tool, [(look.tool, look.arguments)], expect, **look.arguments)

    def _edit(self, messages: list[Message]) -> tuple[str, list[ToolCall]]:
        views = _views(messages)
        unread = list(
            dict.fromkeys(e.path for e in self._edits if e.path not in views and self._needs_view(e, messages))
        )
        if unread:
            for path in unread:
                self._named_before(path, messages)
            return self._turn("read_file", [("read_file", {"path": p}) for p in unread], "view", path=", ".join(unread))
        for edit in self._edits:
            if not _shown(edit, views, messages):
                raise BackendError(f"oracle: the old text of the edit of {edit.path} was never shown")
        paths = ", ".join(dict.fromkeys(e.path for e in self._edits))
        if self.patch:
            patch = _patch(self._edits, views)
            self._edits = []
            return self._turn("edit", [("apply_patch", {"patch": patch})], "patched", paths=paths)
        batch = self._edits if self.one_turn else self._edits[:1]
        self._edits = self._edits[len(batch) :]
        calls = [("edit_file", _edit_arguments(edit)) for edit in batch]
        return self._turn("edit", calls, "edited", paths=", ".join(dict.fromkeys(e.path for e in batch)))

    def _search_slip(self, look: Look, messages: list[Message]) -> tuple[str, list[ToolCall]]:
        """The planned search with a word of its name swapped (finding nothing), then the planned search."""
        pattern = look.arguments["pattern"]
        self._slip, self.unlearned = None, [*self.unlearned, len(messages)]
        self._queued.append(("research", [("search", look.arguments)], "matches", {"pattern": pattern}))
        wrong = self._swap_a_word(pattern)
        return self._turn("search", [("search", {**look.arguments, "pattern": wrong})], "nothing", pattern=wrong)

    def _edit_slip(self, messages: list[Message]) -> tuple[str, list[ToolCall]]:
        """The one edit with a wrong number or name in it; the tests fail, the file is read again, and the wrong
        text is edited into the right one."""
        views = _views(messages)
        (edit,) = self._edits
        if not any(m.name == "run_tests" and _shows("failed", m.content) for m in messages if m.role == "tool"):
            self._slip = None  # the tests did not fail before, so they would not show the mistake either
            return self._edit(messages)
        if edit.path not in views and self._needs_view(edit, messages):
            return self._edit(messages)  # reads the file first; the slip comes at the edit itself
        wrong = self._wrong_version(edit)
        self._slip, self.unlearned = None, [*self.unlearned, len(messages)]
        self._edits = [Edit(edit.path, wrong, edit.new)]
        self._queued += [("retest", [("run_tests", {})], "failed", {}),
                         ("reread", [("read_file", {"path": edit.path})], "view", {"path": edit.path})]  # fmt: skip
        slipped = Edit(edit.path, edit.old, wrong, edit.replace_all)
        return self._turn("edit", [("edit_file", _edit_arguments(slipped))], "edited", paths=edit.path)

    def _wrong_version(self, edit: Edit) -> str:
        """The edit's new text as a careless model writes it: the old text with a number changed (the constant
        changed where the operator was wrong), else the new text with a word of a name swapped."""
        numbers = list(_NUMBER.finditer(edit.old))
        if numbers:
            number = self.rng.choice(numbers)
            value = self.rng.choice([n for n in range(2, 50) if str(n) != number.group()])
            wrong = edit.old[: number.start()] + str(value) + edit.old[number.end() :]
            if wrong != edit.new:
                return wrong
        names = _names(edit.new)
        name = self.rng.choice([m for m in names if m.group() not in edit.old] or names or [None])
        if name is None:
            raise BackendError("oracle: no number or name in the edit to get wrong")
        return edit.new[: name.start()] + self._swap_a_word(name.group()) + edit.new[name.end() :]

    def _swap_a_word(self, text: str) -> str:
        """`text` with one word of its longest name (a word of a snake_case or UPPER_CASE name, or the name) replaced
        by a common word; a regex's escapes (`\\b`) are no part of a name."""
        names = _names(re.sub(r"\\.", "  ", text))
        if not names:
            raise BackendError(f"oracle: no name to get wrong in {text!r}")
        name = max(names, key=lambda m: len(m.group()))
        parts = name.group().split("_")
        index = self.rng.choice([i for i, part in enumerate(parts) if part])
        word = self.rng.choice([w for w in SLIP_WORDS if w != parts[index].lower()])
        parts[index] = word.upper() if parts[index].isupper() else word
        return text[: name.start()] + "_".join(parts) + text[name.end() :]

    def _needs_view(self, edit: Edit, messages: list[Message]) -> bool:
        """apply_patch needs the whole file; edit_file only its old text, which a search line may have shown."""
        return self.patch or not _shown(edit, {}, messages)

    def _turn(self, say: str, calls: list[tuple[str, dict[str, Any]]], expect: str, **names: Any):
        text = ""
        if self.rng.random() < 0.7:
            text = self.rng.choice(SAY[say]).format(**{"pattern": "", "path": "", "paths": "", **names})
        self._expect = [(name, expect) for name, _ in calls]
        return text, [ToolCall(f"call_{i}", name, arguments) for i, (name, arguments) in enumerate(calls, 1)]

    # --- reading what came back ---

    def _check_results(self, messages: list[Message]) -> None:
        """The results of the last turn's calls must show what the plan expected, else the oracle stops."""
        if not self._expect:
            return
        results = [m for m in messages if m.role == "tool"][-len(self._expect) :]
        for (tool, expect), result in zip(self._expect, results, strict=True):
            if not _shows(expect, result.content):
                raise BackendError(f"oracle: {tool} gave an unexpected result: {result.content[:300]!r}")
        self._expect = []

    def _named_before(self, path: str, messages: list[Message]) -> None:
        if not any(path in m.content for m in messages if m.role != "assistant"):
            raise BackendError(f"oracle: nothing in the conversation named {path} before it was read")


def _shows(expect: str, content: str) -> bool:
    if expect == "ran":  # the first run: it may pass (a rename) or fail (a bug)
        return content.startswith("pytest: ")
    if expect == "passed":
        return content.startswith("pytest: ") and " 0 failed, 0 errors" in content.split("\n", 1)[0]
    if expect == "failed":
        return content.startswith("pytest: FAILED")
    if expect == "nothing":
        return content.startswith("No match")
    if expect == "matches":
        return bool(_search_lines(content))
    if expect == "listed":
        return not content.startswith("(no files)")
    if expect == "view":
        return bool(_VIEW_LINE.match(content.split("\n", 1)[0]))
    if expect == "edited":
        return content.startswith("Edited ")
    return content.startswith("Patch applied:")  # "patched"


def _names(text: str) -> list[re.Match[str]]:
    """The names in `text` (Python's keywords are none)."""
    return [m for m in _NAME.finditer(text) if not keyword.iskeyword(m.group())]


def _last_result(messages: list[Message], tool: str) -> str:
    return next((m.content for m in reversed(messages) if m.role == "tool" and m.name == tool), "")


def _search_lines(content: str) -> list[re.Match[str]]:
    return [m for line in content.split("\n") if (m := _SEARCH_LINE.match(line))]


def _views(messages: list[Message]) -> dict[str, str]:
    """Each file's text as the conversation's last whole read_file result of it showed it."""
    calls = {c.id: c for m in messages for c in m.tool_calls}
    views = {}
    for message in messages:
        call = calls.get(message.tool_call_id or "")
        if call is None or call.name != "read_file" or set(call.arguments) != {"path"}:
            continue
        lines = [_VIEW_LINE.match(line) for line in message.content.split("\n")]
        if lines and all(lines):
            views[call.arguments["path"]] = "".join(m.group(2) + "\n" for m in lines)
    return views


def _shown(edit: Edit, views: dict[str, str], messages: list[Message]) -> bool:
    """Whether the edit's old text was shown: in a read of its file, or (one line) in a search line of it."""
    if edit.old in views.get(edit.path, ""):
        return True
    return (
        any(
            m.group(1) == edit.path and edit.old.strip() in m.group(3)
            for message in messages
            if message.role == "tool" and message.name == "search"
            for m in _search_lines(message.content)
        )
        and "\n" not in edit.old
    )


def _edit_arguments(edit: Edit) -> dict[str, Any]:
    arguments: dict[str, Any] = {"path": edit.path, "old_text": edit.old, "new_text": edit.new}
    if edit.replace_all:
        arguments["replace_all"] = True
    return arguments


def _patch(edits: list[Edit], views: dict[str, str]) -> str:
    """One unified diff of every edited file, made from the files as the reads showed them."""
    texts: dict[str, str] = {}
    for edit in edits:
        texts[edit.path] = edit.apply(texts.get(edit.path, views[edit.path]))
    hunks = []
    for path, new in texts.items():
        old = views[path].splitlines(keepends=True)
        hunks += difflib.unified_diff(old, new.splitlines(keepends=True), f"a/{path}", f"b/{path}", n=2)
    return "".join(hunks)
