"""`local:DIR[#OPTIONS]`: a Hugging Face checkpoint run in-process by warpcode.model_runtime.

OPTIONS, comma-separated after `#`: a weight format, `mxfp8` (its projections and experts in MXFP8, quantised as they
load) or `bf16` (the default: as stored, in the model dtype); `context=N`, the tokens the prompt and the answer
share (the default is the model's own context, as vLLM derives it: YaRN's factor x original_max_position_embeddings,
at most 131,072; N may not pass the model's); `tool-grammar=on|off`; and `speculative=off|ngram|suffix`, speculative
decoding without a draft model (`suffix` drafts from repeats of the conversation's own text and stops drafting while
drafts fail; `off` decodes one token per step; the default is `suffix` on a CPU and `off` on a GPU:
model_runtime/speculative/config.py). So
`local:DIR#mxfp8,context=65536`.

With the tool grammar on (the default), every answer is generated inside a grammar (structured generation,
model_runtime/chat/toolcall_grammars.py): text is free, but once the model opens a tool call, the call must be one
of the session's tools with arguments valid against its schema, in the template's own format, so a local model
never sends a malformed call. `tool-grammar=off` lets calls come free (the parser then reports a malformed one to
the model as an error).

The checkpoint's chat template renders the conversation with the tools; generated text is parsed as it streams
(warpcode.model_runtime.chat, shared with serve-model), first for reasoning when the template writes `<think>`
(streamed as thoughts, kept with the answer and given back to the template as `reasoning_content`), then for tool
calls (Hermes or Qwen3-Coder format, picked from the template). Speculative decoding drafts from the conversation's
own tokens and from the plain text of the files the agent read (`texts_read`): a tool result shows a file as
numbered lines, and a copy of the file drafted from those would stop at every line's end. Every session of the
process shares one engine per checkpoint, weight format and context (its serving engine batches their requests and
keeps their prefixes cached), and text arrives on the event loop as the engine produces it; closing the stream
cancels the request. Each request served is recorded in `generation` (generation_record). torch is imported only
when the model is first used.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from array import array
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NamedTuple

from warpcode.agent.backends.base import BackendError, Finish, ModelEvent, ToolCallReady, approximate_tokens
from warpcode.model_runtime.chat.deltas import TextDelta, ThoughtDelta
from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids
from warpcode.model_runtime.chat.reasoning import splitter_for
from warpcode.model_runtime.chat.toolcall_grammars import text_with_calls, tool_format
from warpcode.model_runtime.chat.toolcall_parsers import parser_for_template
from warpcode.model_runtime.weight_formats import WEIGHT_FORMATS

DEFAULT_CONTEXT_WINDOW = 32_768
MAX_DEFAULT_CONTEXT = 131_072  # past this, only when asked for with context=N: a longer context holds more cache
_ENGINES: dict[tuple[Path, str, int | None, str], Any] = {}
SPECULATIVE_MODES = ("off", "ngram", "suffix")  # model_runtime.speculative.MODES, without importing the runtime
_NUMBERED_LINE = re.compile(r" *(\d+)\t(.*)")  # read_file's "{n:>6}\t{line}"
# A server's backend serves every session: it keeps the token ids of the texts read lately (about 4 MB at most) and
# the records of its latest requests, not of all it ever served.
DOCUMENT_CACHE_TOKENS = 1 << 20
GENERATION_RECORDS = 4096
_ENGINES_LOCK = threading.Lock()


class LocalSpec(NamedTuple):
    directory: str
    weights: str = "bf16"
    context: int | None = None  # None: the model's own
    tool_grammar: bool = True  # tool calls constrained to the tools' schemas (`tool-grammar=off`: free)
    speculative: str | None = None  # speculative decoding: off, ngram or suffix; None: the device's default


def split_local_spec(spec: str) -> LocalSpec:
    """`DIR` or `DIR#OPTIONS` -> its LocalSpec; a directory whose name holds '#' stays whole."""
    directory, sep, options = spec.rpartition("#")
    if not sep or Path(spec).is_dir():
        return LocalSpec(spec)
    weights, context, tool_grammar, speculative = "bf16", None, True, None
    for option in options.split(","):
        name, is_setting, value = option.partition("=")
        if is_setting and name == "context" and value.isdigit() and int(value) > 1:
            context = int(value)
        elif is_setting and name == "tool-grammar" and value in ("on", "off"):
            tool_grammar = value == "on"
        elif is_setting and name == "speculative" and value in SPECULATIVE_MODES:
            speculative = value
        elif not is_setting and option in WEIGHT_FORMATS:
            weights = option
        else:
            known = ", ".join(f"#{f}" for f in WEIGHT_FORMATS)
            raise BackendError(
                f"unknown option #{option} in model spec {spec!r}: use a weight format ({known}), #context=N "
                "(tokens), #tool-grammar=on|off and/or #speculative=off|ngram|suffix (e.g. "
                "local:DIR#mxfp8,context=65536,speculative=off)"
            )
    return LocalSpec(directory, weights, context, tool_grammar, speculative)


class LocalBackend:
    """Loads the checkpoint in `path` at first use (`weights`: "bf16" or "mxfp8"), or serves an `engine` already
    loaded in this process."""

    def __init__(
        self,
        path: str | Path | None = None,
        max_new_tokens: int = 4096,
        engine: Any = None,
        weights: str = "bf16",
        context: int | None = None,
        tool_grammar: bool = True,
        speculative: str | None = None,
    ) -> None:
        self.path, self.max_new_tokens, self._engine = Path(path or "."), max_new_tokens, engine
        self.weights, self.context, self.tool_grammar = weights, context, tool_grammar
        self.speculative = speculative
        self._grammars: dict[str, Any] = {}  # the tools' JSON -> their compiled grammar (a matcher to copy)
        self._document_ids: OrderedDict[str, array] = OrderedDict()  # texts read lately -> their ids, LRU first
        self._document_tokens = 0  # in _document_ids
        self.generation: deque[dict[str, Any]] = deque(maxlen=GENERATION_RECORDS)  # a record per request served
        self.context_window = DEFAULT_CONTEXT_WINDOW
        if engine is None:
            self.context_window = _checkpoint_context(self.path, context)
        self._lock = asyncio.Lock()

    async def prepare(self) -> None:
        """Nothing to learn before a request: the checkpoint's config was read when the backend was made."""

    def count_tokens(self, text: str) -> int:
        tokenizer = self._engine.tokenizer if self._engine is not None else None
        if tokenizer is None:
            return approximate_tokens(text)
        return len(tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))  # text, as prompted

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        engine = await self._load()
        try:
            prompt_ids = conversation_prompt_ids(engine.tokenizer, messages, tools)
        except ValueError as exc:  # the template's raise_exception, or a conversation holding a stand-in's secret
            raise BackendError(f"cannot write the conversation as this model's prompt: {exc}") from None
        answer = _AnswerEvents(engine.tokenizer, prompt_ids, tools)
        room = engine.context_length - len(prompt_ids)
        if room < 1:
            raise BackendError(
                f"the conversation ({len(prompt_ids)} tokens) fills the model's context of {engine.context_length} "
                "tokens; start a new session or compact this one"
            )
        thinking = answer.thinking is not None and answer.thinking.state == "thinking"
        grammar = self._tool_grammar(engine, tools, thinking)
        documents = self._documents(engine, messages)
        started = time.time()
        try:
            handle = engine.submit(prompt_ids, min(self.max_new_tokens, room), grammar=grammar, documents=documents)
        except ValueError as exc:
            raise BackendError(str(exc)) from exc
        try:
            async for output in handle:
                for event in answer.feed(output.text):
                    yield event
            for event in answer.finish():
                yield event
        except RuntimeError as exc:  # the engine failed under this request
            raise BackendError(str(exc)) from exc
        finally:
            handle.cancel()  # a closed stream (a cancelled turn) frees the sequence at once
        self.generation.append(generation_record(handle.stats, started, answer.call_names))
        reason = "length" if handle.finish_reason == "length" else "tool_calls" if answer.called else "stop"
        yield Finish(reason, handle.stats.prompt_tokens, handle.stats.completion_tokens)

    def _documents(self, engine: Any, messages: list[Message]) -> list[array]:
        """The token ids of the texts the conversation read (`texts_read`), for speculative decoding to copy from;
        a text read lately (by any session of this backend) is not tokenized again."""
        if engine.serving.speculative.draft is None:
            return []
        cache, documents = self._document_ids, []
        for text in texts_read(messages):
            ids = cache.get(text)
            if ids is None:
                ids = array("i", engine.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))
                cache[text] = ids
                self._document_tokens += len(ids)
            cache.move_to_end(text)
            documents.append(ids)
        while self._document_tokens > DOCUMENT_CACHE_TOKENS and len(cache) > len(documents):
            self._document_tokens -= len(cache.popitem(last=False)[1])
        return documents

    def _tool_grammar(self, engine: Any, tools: list[dict[str, Any]], thinking: bool) -> Any:
        """This request's grammar: any text, and whole calls valid against the tools' schemas in the template's
        format (None when off, without tools, or when llguidance cannot compile a tool's schema: calls then come
        free, as before, and the parser still reports a malformed one to the model). `thinking`: the prompt leaves
        the model inside its reasoning."""
        if not self.tool_grammar or not tools:
            return None
        key = json.dumps([tools, thinking], sort_keys=True)
        if key not in self._grammars:
            from warpcode.model_runtime.serving.grammar import GrammarError

            fmt = tool_format(str(engine.tokenizer.chat_template))
            pairs = [(t["function"]["name"], t["function"].get("parameters") or {}) for t in tools]
            try:
                grammar = engine.grammars.lark(text_with_calls(fmt, pairs, thinking, engine.grammars.specials))
                engine.grammars.check(grammar)
                self._grammars[key] = engine.grammars.matcher(grammar)
            except GrammarError as exc:
                logging.warning("tool calls are not constrained (a tool's schema does not compile: %s)", exc)
                self._grammars[key] = None
        matcher = self._grammars[key]
        return None if matcher is None else matcher.copy()

    async def _load(self) -> Any:
        async with self._lock:
            if self._engine is None:
                self._engine = await asyncio.to_thread(
                    _load_engine, self.path, self.weights, self.context, self.speculative
                )
        return self._engine


class _AnswerEvents:
    """Generated text -> the backend's events: reasoning split off first when the template writes `<think>` (the
    model's start read off the prompt's end), the rest parsed for tool calls."""

    def __init__(self, tokenizer: Any, prompt_ids: list[int], tools: list[dict[str, Any]]) -> None:
        self.parser = parser_for_template(str(tokenizer.chat_template), tools)
        self.thinking = splitter_for(tokenizer, prompt_ids)
        self.call_names: list[str] = []

    @property
    def called(self) -> bool:
        return bool(self.call_names)

    def feed(self, text: str) -> list[ModelEvent]:
        return self._events(self.thinking.feed(text) if self.thinking else [TextDelta(text)], last=False)

    def finish(self) -> list[ModelEvent]:
        return self._events(self.thinking.finish() if self.thinking else [], last=True)

    def _events(self, pieces: list[TextDelta | ThoughtDelta], last: bool) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for piece in pieces:
            parsed = self.parser.feed(piece.text) if isinstance(piece, TextDelta) else [piece]
            events += [ToolCallReady(item) if isinstance(item, ToolCall) else item for item in parsed]
        if last:
            events += [ToolCallReady(item) if isinstance(item, ToolCall) else item for item in self.parser.finish()]
        self.call_names += [event.call.name for event in events if isinstance(event, ToolCallReady)]
        return events


def generation_record(stats: Any, started: float, calls: list[str]) -> dict[str, Any]:
    """What a batch row's `usage.generation` says of one request: its tokens (prompt, served from the prefix cache,
    generated), when it started, got its first token and ended (seconds since the epoch), the tools its answer
    called, and what speculative decoding did (verify steps, drafted and accepted tokens) when it drafted."""

    def at(moment: float | None) -> float | None:  # the engine's perf_counter clock -> the wall clock
        return None if moment is None else round(started + moment - stats.submitted_at, 4)

    record = {
        "prompt_tokens": stats.prompt_tokens,
        "cached_tokens": stats.cached_tokens,
        "generated_tokens": stats.completion_tokens,
        "started": round(started, 4),
        "first_token": at(stats.first_token_at),
        "ended": at(stats.finished_at),
        "tool_calls": calls,
    }
    if stats.verify_steps:
        record["speculative"] = {"verify_steps": stats.verify_steps, "draft_tokens": stats.draft_tokens,
                                 "accepted_tokens": stats.accepted_tokens}  # fmt: skip
    return record


def texts_read(messages: list[Message]) -> list[str]:
    """The plain text of the files the conversation's tool results show as numbered lines (read_file's
    `{n:>6}\t{line}`): each run of consecutively numbered lines, without the numbers, oldest first."""
    texts: list[str] = []
    for message in messages:
        if message.role != "tool":
            continue
        run: list[str] = []
        last = 0
        for line in [*message.content.split("\n"), ""]:  # the empty line ends the last run
            numbered = _NUMBERED_LINE.fullmatch(line)
            number = int(numbered[1]) if numbered else None
            if run and number != last + 1:
                texts.append("\n".join(run) + "\n")
                run = []
            if numbered:
                run.append(numbered[2])
                last = number
    return texts


def _checkpoint_context(path: Path, context: int | None) -> int:
    """The context an agent gets from the checkpoint in `path`: `context` when given (not past the model's own),
    else the model's, at most MAX_DEFAULT_CONTEXT."""
    from warpcode.model_runtime.config import ModelConfig

    if not (path / "config.json").is_file():
        raise BackendError(f"{path} is not a checkpoint directory (no config.json)")
    try:
        own = ModelConfig.from_dict(json.loads((path / "config.json").read_text())).context_length
    except (ValueError, TypeError) as exc:  # UnsupportedConfigError is a ValueError; so is bad JSON
        raise BackendError(f"cannot load the model in {path}: {exc}") from None
    if context is None:
        return min(own, MAX_DEFAULT_CONTEXT)
    if context > own:
        raise BackendError(
            f"context={context} passes the {own:,} tokens the model in {path} holds (its config.json): ask for at "
            "most that"
        )
    return context


def _load_engine(path: Path, weights: str, context: int | None = None, speculative: str | None = None) -> Any:
    """The process's one engine for the checkpoint in `path` in `weights` with `context` and `speculative`: every
    session's backend shares it (and its cache); the bf16 and mxfp8 engines of one checkpoint are two engines."""
    key = (path.resolve(), weights, context, speculative)
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = load_agent_engine(path, weights, context, speculative)
        return _ENGINES[key]


def load_agent_engine(
    path: Path, weights: str = "bf16", context: int | None = None, speculative: str | None = None
) -> Any:
    """A new engine for the checkpoint in `path` (on the GPU when there is one) with `weights` ("bf16" or
    "mxfp8"), `context` tokens per sequence (None: the model's own) and `speculative` decoding ("off", "ngram" or
    "suffix"; None: the device's default), checked to serve an agent."""
    from warpcode.model_runtime import CheckpointError, UnsupportedConfigError, load
    from warpcode.model_runtime.devices import resolve_device
    from warpcode.model_runtime.speculative import SpeculativeConfig

    device = resolve_device()
    try:
        engine = load(path, device=device, weights=weights, show_progress=False, max_model_len=context,
                      speculative=SpeculativeConfig.for_device(speculative, device))  # fmt: skip
    except (CheckpointError, UnsupportedConfigError, OSError, ValueError) as exc:
        raise BackendError(f"cannot load the model in {path}: {exc}") from exc
    if engine.tokenizer is None or not engine.tokenizer.chat_template:
        raise BackendError(f"{path} needs tokenizer.json and a chat template to serve as an agent model")
    return engine
