"""A request's structured generation as a grammar: response_format (json_object, json_schema) and a forced tool
call (tool_choice "required" or a named function) in the template's own format, one call when parallel_tool_calls
is false. The engine then samples every token inside it (model_runtime/serving/grammar.py).

A prompt that leaves the model inside its reasoning (a template that opens `<think>` itself) gets the reasoning
closed at once: the grammar starts with `</think>`, so the constrained answer is the content, not the thought.
"""

from __future__ import annotations

import json
from typing import Any

from warpcode.model_runtime.chat.reasoning import PROMPT_TAIL_TOKENS, THINK_END, start_after, template_reasons
from warpcode.model_runtime.chat.toolcall_grammars import compact, forced_calls, marker, tool_format
from warpcode.model_runtime.openai_server.errors import bad_request
from warpcode.model_runtime.openai_server.schemas import ChatCompletionRequest, Sampling
from warpcode.model_runtime.serving.grammar import GrammarError, GrammarMatcher


def request_grammar(engine: Any, request: Sampling, prompt_ids: list[int]) -> GrammarMatcher | None:
    """The matcher the request's output must follow, None for free text; a 400 for what cannot be served."""
    forced = isinstance(request, ChatCompletionRequest) and forces_a_call(request)
    fmt = request.response_format
    if fmt is not None and fmt.type != "text" and forced:
        raise bad_request(
            "response_format and a forced tool call (tool_choice) both constrain the answer: send one of them",
            "response_format",
        )
    thinking = isinstance(request, ChatCompletionRequest) and leaves_thinking(engine.tokenizer, prompt_ids)
    if forced:
        text, param = _tool_call_lark(engine, request, thinking), "tools"
        grammar = engine.grammars.lark(text)
    elif fmt is not None and fmt.type != "text":
        schema = fmt.json_schema.json_schema if fmt.json_schema is not None else {"type": "object"}
        param = "response_format"
        try:
            grammar = engine.grammars.json_schema(schema)
            if thinking:  # the reasoning ends first
                close = marker(THINK_END, engine.grammars.specials)
                grammar = engine.grammars.lark(f'start: {close} "\\n\\n" %json{json.dumps(compact(schema))}\n')
        except GrammarError as exc:
            raise bad_request(str(exc), param) from None
    else:
        return None
    try:
        engine.grammars.check(grammar)
        return engine.grammars.matcher(grammar)
    except GrammarError as exc:
        raise bad_request(f"{param}: cannot constrain the output to it ({exc})", param) from None
    except ValueError as exc:  # no tokenizer
        raise bad_request(str(exc), param, "no_tokenizer") from None


def leaves_thinking(tokenizer: Any, prompt_ids: list[int]) -> bool:
    """Whether the prompt leaves the model inside its reasoning (a template that opens `<think>` itself)."""
    if tokenizer is None or not template_reasons(tokenizer.chat_template):
        return False
    return start_after(tokenizer.decode(prompt_ids[-PROMPT_TAIL_TOKENS:])) == "thinking"


def forces_a_call(request: ChatCompletionRequest) -> bool:
    return request.tool_choice == "required" or not isinstance(request.tool_choice, str | None)


def _tool_call_lark(engine: Any, request: ChatCompletionRequest, close_reasoning: bool) -> str:
    """Lark: one call of the named function, or of any tool for "required" (one or more while parallel calls are
    allowed), in the tool-call format the template teaches (Hermes / Qwen3 JSON or Qwen3-Coder XML)."""
    tools = [tool.function for tool in request.tools or []]
    if not tools:
        raise bad_request('tool_choice "required" or a named function needs "tools"', "tool_choice")
    if not isinstance(request.tool_choice, str):
        name = request.tool_choice.function.name
        tools = [tool for tool in tools if tool.name == name]
        if not tools:
            raise bad_request(f"tool_choice names {name!r}, which is not one of the request's tools", "tool_choice")
    several = request.parallel_tool_calls is not False and request.tool_choice == "required"
    fmt = tool_format(str(engine.tokenizer.chat_template))
    pairs = [(tool.name, tool.parameters or {}) for tool in tools]
    return forced_calls(fmt, pairs, several, close_reasoning, engine.grammars.specials)
