"""The agent loop: one prompt turn is model -> tool calls -> permission -> tools -> observations -> repeat.

The message list is the trajectory. A turn ends when the model answers without tool calls (end_turn), hits its
token limit (max_tokens), runs out of model requests or goes round in circles (max_turn_requests; repetition.py
says when), fails (refusal: the model could not answer, reported as the result's ModelFailure) or is cancelled.
Every step is reported through `emit` as an ACP session update (see events.py).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from warpcode.agent import context, events
from warpcode.agent.backends import (
    BackendError,
    Finish,
    ModelBackend,
    ModelUnavailable,
    Notice,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
)
from warpcode.agent.mcp.session_tools import McpTools
from warpcode.agent.permissions import PermissionPolicy, mode_policy, rejection_message
from warpcode.agent.project_instructions import project_instructions
from warpcode.agent.prompt import repo_overview, system_prompt
from warpcode.agent.repetition import REPEATS, RepeatWatch
from warpcode.agent.toolbox import TOOL_KINDS, TOOLS, ArgumentError, Toolbox, ToolResult, tool_schemas, validate
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.tools import Checkpoint, CheckpointError, Checkpoints, Workspace
from warpcode.tools.sandbox import Sandbox

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
OUTPUT_UPDATE_INTERVAL_S = 0.1  # streamed command output: at most this often per tool call
# One character more than a snapshot shows, so that events.tool_call_output still marks the cut with "…".
_KEPT_OUTPUT_CHARS = events.STREAMED_OUTPUT_CHARS + 1


@dataclass
class Limits:
    max_turn_requests: int = 50  # model requests in one prompt turn
    tool_output_tokens: int = 6_000  # one observation, cut head + tail beyond
    answer_reserve_tokens: int = 4_096  # context kept free for the model's answer


@dataclass(frozen=True)
class ModelFailure:
    """The model could not answer: the event that ends a turn with stop reason "refusal". It is no session update
    and never assistant text, so that each channel reports it exactly once, in `message`'s words: the ACP service
    as the prompt's error response, `warpcode run` on stderr (or in its last JSON line), a batch job in its row."""

    reason: str  # the backend's error: what failed, and mostly what to do about it
    unavailable: bool = False  # its server could not be reached or kept failing: trying later may work

    @property
    def message(self) -> str:
        why = " ".join(self.reason.split()).rstrip(".")  # one line, whatever the server sent
        return f"The model could not answer: {why}."


@dataclass
class TurnResult:
    stop_reason: StopReason
    failure: ModelFailure | None = None  # why the model could not answer (stop_reason "refusal")
    input_tokens: int = 0
    output_tokens: int = 0


class _StreamedOutput:
    """A running call's output as the client is shown it: only its tail, since each update replaces the last.

    Chunks arrive on the command's reader thread and are kept in O(1) amortised time per character; at most one
    callback to the event loop is pending per call, and it takes whatever arrived meanwhile. (Keeping the whole
    output and joining it for every update made a command printing hundreds of MB stall every session.)
    """

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.last_sent = 0.0  # time.monotonic() of the last update, on the event loop
        self._lock = threading.Lock()
        self._tail = ""
        self._wake_pending = False

    def add(self, chunk: str) -> bool:
        """Keep `chunk`'s share of the tail; True when the event loop must be woken (no wake-up is pending)."""
        with self._lock:
            self._tail += chunk
            if len(self._tail) > 2 * _KEPT_OUTPUT_CHARS:
                self._tail = self._tail[-_KEPT_OUTPUT_CHARS:]
            wake, self._wake_pending = not self._wake_pending, True
        return wake

    def take(self) -> str:
        """The tail to send now; output that arrives from here on wakes the event loop again."""
        with self._lock:
            self._wake_pending = False
            self._tail = self._tail[-_KEPT_OUTPUT_CHARS:]
            return self._tail


@dataclass
class _Reply:
    text: str = ""
    thought: str | None = None  # None: the model did not reason
    calls: list[ToolCall] = field(default_factory=list)
    finish: Finish | None = None


class Agent:
    """One session: a workspace, a model backend and the trajectory. `prompt` runs one turn; `cancel` stops it.
    Its commands (run_command, run_tests) run in `sandbox` when one is given (tools.sandbox); the tools of the
    session's MCP servers (`mcp`) are offered beside ours, under the same permission policy."""

    def __init__(
        self,
        workspace: Workspace | str,
        backend: ModelBackend,
        emit: events.EventSink,
        mode: str = "ask",
        policy: PermissionPolicy | None = None,
        limits: Limits | None = None,
        sandbox: Sandbox | None = None,
        mcp: McpTools | None = None,
    ) -> None:
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.backend, self.emit, self.limits = backend, emit, limits or Limits()
        self.toolbox = Toolbox(self.workspace, on_output=self._tool_output_from_thread, sandbox=sandbox)
        self.mcp = mcp
        self.messages = [Message("system", "")]
        self.overview: str | None = None  # the repository map in the system prompt, fixed at the first turn
        self.instructions = ""  # the project's AGENTS.md section of the system prompt, read at the first turn
        self.set_mode(mode, policy)
        self.checkpoints: list[Checkpoint] = []  # one per turn that edited files, oldest first
        self._tools = tool_schemas()
        self._own_schema_tokens: int | None = None  # their specs' tokens in a request, counted at the first one
        self._work: asyncio.Task[TurnResult] | None = None
        self._cancelled = False
        self._ids_seen: set[str] = set()
        self._streaming: _StreamedOutput | None = None  # the running call's output
        self._terminals: dict[str, str] = {}  # call id -> the editor terminal its command runs in (show_terminal)
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._checkpoint_message, self._checkpointed = "", False

    def set_mode(self, mode: str, policy: PermissionPolicy | None = None) -> None:
        self.mode, self.policy = mode, policy or mode_policy(mode)
        sandbox = self.toolbox.sandbox
        prompt = system_prompt(self.workspace, mode, self.overview or "", sandbox, self.instructions)
        self.messages[0] = Message("system", prompt)

    async def prompt(self, text: str) -> TurnResult:
        return await self.perform(self._turn(text))

    async def perform(self, work: Coroutine[Any, Any, TurnResult]) -> TurnResult:
        """Run `work` as this session's turn (a prompt's, or a slash command's): `cancel` stops it."""
        self._cancelled = False
        self._event_loop = asyncio.get_running_loop()
        self._work = asyncio.ensure_future(work)
        try:
            return await self._work
        except asyncio.CancelledError:
            if not self._cancelled:  # our caller was cancelled, not the turn: let it propagate
                raise
            return TurnResult("cancelled")
        finally:
            self._work = None

    def cancel(self) -> None:
        """Stop the running turn: the model stream is closed and a running command's process group killed."""
        if self._work is not None and not self._work.done():
            self._cancelled = True
            self._work.cancel()

    async def _turn(self, text: str) -> TurnResult:
        if self.overview is None:  # built off the event loop, once: a session's system prompt stays the same
            self.instructions = await asyncio.to_thread(project_instructions, self.workspace.root)
            self.overview = await repo_overview(self.workspace)
            self.set_mode(self.mode, self.policy)
        if self.mcp is not None:
            await self.mcp.ready()  # each server at most its startup timeout
        self.messages.append(Message("user", text))
        result = TurnResult("end_turn")
        self._checkpoint_message = f"before: {' '.join(text.split())[:80]}"
        self._checkpointed = False
        repeats = RepeatWatch()
        try:
            for _ in range(self.limits.max_turn_requests):
                reply = await self._model_round()
                result.input_tokens += reply.finish.input_tokens if reply.finish else 0
                result.output_tokens += reply.finish.output_tokens if reply.finish else 0
                if reply.finish and reply.finish.reason == "length":
                    result.stop_reason = "max_tokens"
                    return result
                if not reply.calls:
                    return result
                for call in reply.calls:
                    await self._run_tool(call)
                observations = [message.content for message in self.messages[-len(reply.calls) :]]
                repeated = repeats.record(reply.calls, observations)
                if repeated is not None:  # nothing changes between the rounds, so further requests would not help
                    self.emit(events.message_chunk(_going_round(repeated)))
                    break
            result.stop_reason = "max_turn_requests"
            return result
        except BackendError as error:
            result.stop_reason = "refusal"
            result.failure = ModelFailure(str(error), isinstance(error, ModelUnavailable))
            return result
        except asyncio.CancelledError:
            self._answer_open_calls("Not run: the user cancelled the turn.")
            raise

    async def _model_round(self) -> _Reply:
        tools = self._tools
        if self.mcp is not None:
            for notice in self.mcp.take_notices():  # a server that failed or stopped: told once, in the session
                self.emit(events.message_chunk(f"{notice}\n\n"))
            tools = tools + self.mcp.schemas()
        await self.backend.prepare()  # the openai: backend learns the model's name and context here
        reserve = min(self.limits.answer_reserve_tokens, self.backend.context_window // 4)
        # The tools' specs share the context with the conversation: ours take about 2,000 tokens of every request
        # (a quarter of a small model's context), and dozens of MCP tools can fill it.
        if self._own_schema_tokens is None:
            self._own_schema_tokens = self.backend.count_tokens(json.dumps(self._tools))
        reserve += self._own_schema_tokens
        if self.mcp is not None:
            reserve += self.mcp.schema_tokens(self.backend.count_tokens)
        budget = context.ContextBudget(self.backend.context_window, reserve, self.limits.tool_output_tokens)
        context.fit(self.messages, budget, self.backend.count_tokens)
        reply = _Reply()
        try:
            async for event in self.backend.stream(list(self.messages), tools):
                if isinstance(event, TextDelta):
                    reply.text += event.text
                    self.emit(events.message_chunk(event.text))
                elif isinstance(event, ThoughtDelta):
                    reply.thought = (reply.thought or "") + event.text
                    self.emit(events.thought_chunk(event.text))
                elif isinstance(event, ToolCallReady):
                    reply.calls.append(self._unique_id(event.call))
                elif isinstance(event, Notice):  # shown, never sent back to the model
                    self.emit(events.message_chunk(event.text))
                elif isinstance(event, Finish):
                    reply.finish = event
        except asyncio.CancelledError:
            self.messages.append(Message("assistant", reply.text, reasoning=reply.thought))
            raise
        if reply.finish and reply.finish.reason == "length":
            reply.calls = []  # cut off mid-call: its arguments are incomplete
        # the reasoning stays with the answer: chat templates give it back to the model as they were trained to
        self.messages.append(Message("assistant", reply.text, reply.calls, reasoning=reply.thought))
        used = context.conversation_tokens(self.messages, self.backend.count_tokens)
        self.emit(events.usage(used, self.backend.context_window))
        return reply

    async def _run_tool(self, call: ToolCall) -> None:
        kind = TOOL_KINDS.get(call.name, "other")
        root = self.workspace.root
        self.emit(events.tool_call_started(call.id, call.name, kind, call.arguments, root))
        try:
            result = await self._execute(call, kind)
        except asyncio.CancelledError:
            observation = "Stopped: the user cancelled the turn before this call finished."
            terminal = self._terminals.pop(call.id, None)
            self.emit(events.tool_call_finished(call.id, False, observation, None, root, terminal))
            self.messages.append(Message("tool", observation, tool_call_id=call.id, name=call.name))
            raise
        observation = context.cut_to_budget(result.content, self.limits.tool_output_tokens, self.backend.count_tokens)
        terminal = self._terminals.pop(call.id, None)
        self.emit(events.tool_call_finished(call.id, result.ok, observation, result.data, root, terminal))
        self.messages.append(Message("tool", observation, tool_call_id=call.id, name=call.name))

    async def _execute(self, call: ToolCall, kind: str) -> ToolResult:
        """The call's result: an error for a malformed or rejected call, else what the tool returned."""
        result = self._check_call(call)
        if result is None and await self.policy(call.name, kind, call.arguments) == "reject":
            result = ToolResult(False, rejection_message(call.name, kind, self.mode), error="PermissionDenied")
        if result is not None:
            return result
        if kind == "edit" and not self._checkpointed:
            await self._checkpoint()
        self.emit(events.tool_call_running(call.id))
        self._streaming = _StreamedOutput(call.id)
        try:
            if self.mcp is not None and self.mcp.owns(call.name):
                result = await self.mcp.call(call.name, call.arguments)
            else:
                result = await self.toolbox.call_async(call.name, call.arguments)
        finally:
            self._streaming = None
        if result.ok and call.name == "update_plan":
            self.emit(events.plan(result.data))
        return result

    def _check_call(self, call: ToolCall) -> ToolResult | None:
        """The error observation for a call that cannot run as sent, or None when it is well formed."""
        if call.error:
            return ToolResult(
                False,
                f"Error: the call to {call.name or '(no name)'} was not run: {call.error}. Resend it with the "
                f"arguments as one JSON object that matches the tool's parameters.",
                error="MalformedToolCall",
            )
        if self.mcp is not None and self.mcp.owns(call.name):  # its server checks the arguments against its schema
            if isinstance(call.arguments, dict):
                return None
            return ToolResult(False, f"Arguments of {call.name} must be a JSON object.", error="ArgumentError")
        if call.name not in TOOLS:
            return self.toolbox.call(call.name, call.arguments)  # the unknown-tool message, listing the tools
        try:
            validate(call.arguments, TOOLS[call.name]["parameters"], "")
        except ArgumentError as exc:
            return ToolResult(
                False, f"Invalid arguments for {call.name}: {exc}. Nothing was run.", error="ArgumentError"
            )
        return None

    async def _checkpoint(self) -> None:
        """Snapshot the workspace before the turn's first edit, so the whole turn can be undone."""
        self._checkpointed = True
        try:
            checkpoint = await asyncio.to_thread(Checkpoints(self.workspace).create, self._checkpoint_message)
        except (CheckpointError, OSError) as exc:
            self.emit(events.thought_chunk(f"(no checkpoint could be taken before editing: {exc})"))
            return
        self.checkpoints.append(checkpoint)

    def remember_call_ids(self, ids: set[str]) -> None:
        """Tool call ids the session used before this Agent existed (a restored session's): never given again."""
        self._ids_seen |= ids

    def _unique_id(self, call: ToolCall) -> ToolCall:
        # ACP tool call ids must be unique in the session; some servers number calls from zero every response.
        base, n = call.id or "call", 1
        while call.id in self._ids_seen or not call.id:
            call.id, n = f"{base}-{n}", n + 1
        self._ids_seen.add(call.id)
        return call

    def _answer_open_calls(self, observation: str) -> None:
        """Give every tool call of the last model reply an answer, so the trajectory stays valid to resend."""
        replies = [i for i, m in enumerate(self.messages) if m.role == "assistant"]
        if not replies:
            return
        answered = {m.tool_call_id for m in self.messages[replies[-1] :] if m.role == "tool"}
        for call in self.messages[replies[-1]].tool_calls:
            if call.id not in answered:  # never announced to the client either: only the model needs to know
                self.messages.append(Message("tool", observation, tool_call_id=call.id, name=call.name))

    def show_terminal(self, terminal_id: str) -> None:
        """From a tool's worker thread: the running call's command runs in this editor terminal (the ACP service's
        client_terminal.py); the call embeds it now and in its final update. Scheduled like output, so it comes
        before the call's end."""
        streaming = self._streaming
        if streaming is not None:
            self._event_loop.call_soon_threadsafe(self._embed_terminal, streaming.call_id, terminal_id)

    def _embed_terminal(self, call_id: str, terminal_id: str) -> None:
        self._terminals[call_id] = terminal_id
        self.emit(events.tool_call_terminal(call_id, terminal_id))

    def _tool_output_from_thread(self, chunk: str) -> None:
        streaming = self._streaming
        if streaming is not None and streaming.add(chunk):
            self._event_loop.call_soon_threadsafe(self._tool_output, streaming)

    def _tool_output(self, streaming: _StreamedOutput) -> None:
        if self._streaming is not streaming:
            return  # arrived after the call finished: its final update already holds the whole output
        wait_s = streaming.last_sent + OUTPUT_UPDATE_INTERVAL_S - time.monotonic()
        if wait_s > 0:  # still the pending wake-up: what arrives until then goes out with it
            self._event_loop.call_later(wait_s, self._tool_output, streaming)
            return
        streaming.last_sent = time.monotonic()
        self.emit(events.tool_call_output(streaming.call_id, streaming.take()))


def _going_round(calls: str) -> str:
    return (
        f"\n\nStopped: the model made the same calls ({calls}) {REPEATS} times in a row with the same results, so more"
        " requests would not get further. Rephrase the request with more detail, or configure a stronger model"
        " (--model).\n"
    )
