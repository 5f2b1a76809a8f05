"""Tool calls as grammars: the Lark text (llguidance's dialect) of a call to one of the given tools, in the format a
chat template teaches its model, with arguments that are valid against the tool's schema and that our own parsers
read back as they were written.

Two shapes:
- `forced_calls`: the answer is one call (or several), nothing else: serve-model's `tool_choice` "required" or a
  named function.
- `text_with_calls`: any text, but wherever the model opens a call (`<tool_call>`) the call must be a whole, valid
  call of one of the tools; then any text again, more calls, or the end. The `local:` backend's answers. Text runs
  up to a marker as a lazy lexeme (llguidance's pattern for tool calling in plain text), and a reasoning block
  (`<think>` ... `</think>`) is free text whatever it holds: the parsers read no calls in the reasoning either.

The formats (toolcall_parsers.py reads both):
- Hermes / Qwen3 JSON: `<tool_call>`, a newline, the JSON object {"name": ..., "arguments": {...}} with the
  arguments valid against the tool's schema, a newline, `</tool_call>`.
- Qwen3-Coder XML: `<tool_call>`, `<function=NAME>`, then each `<parameter=P>`, its value and `</parameter>`, then
  `</function>` and `</tool_call>`, each tag and value on lines of their own. The parameters come in the schema's
  order (the required ones always, the others optional). A parameter that takes a string is raw text that never
  holds `</parameter>` (so the parser's reading is never in doubt) and is not `null` (which the parser reads as
  None); its `enum` / `const` become the only texts allowed, and `minLength`, `maxLength` and `pattern` bound it.
  Any other parameter is JSON valid against its schema.

JSON in a call is written as the templates write past calls (Jinja's `tojson`: `", "` and `": "` between items, no
other whitespace), the form the model learnt, not the compact form of response_format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from warpcode.model_runtime.chat.reasoning import THINK_END, THINK_START
from warpcode.model_runtime.chat.toolcall_values import schema_types

# Compact JSON (no free whitespace): the model cannot spend its tokens on spaces and newlines, so a bounded schema
# gives a bounded answer.
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
TEMPLATE_JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
QWEN3_CODER = "qwen3_coder"
HERMES = "hermes"
# Raw text without `</parameter>` anywhere, then the parameter's end: a lazy lexeme ends at the first such end.
_RAW_TEXT = r"/(?s:.*)/ & ~/(?s:.*)<\/parameter>(?s:.*)/ & ~/\s*[nN][uU][lL][lL]\s*/"
OPEN, CLOSE = "<tool_call>", "</tool_call>"
FUNCTION_OPEN = "<function="  # Qwen3-Coder's call head, inside the call markers
Specials = frozenset[str]  # the markers a tokenizer holds as single special tokens
_VALUE_END = '"\\n</parameter>\\n"'

Tool = tuple[str, dict[str, Any]]  # (name, its parameters' JSON schema)


def tool_format(template: str) -> str:
    """The tool-call format a chat template teaches (as parser_for_template decides it)."""
    return QWEN3_CODER if "<function=" in template else HERMES


def forced_calls(
    fmt: str, tools: Sequence[Tool], several: bool, close_reasoning: bool = False, specials: Specials = frozenset()
) -> str:
    """Lark: one call of one of `tools`, or one or more when `several`; nothing else. `close_reasoning`: the prompt
    leaves the model thinking, so the answer starts by ending the reasoning. `specials`: the markers that are single
    special tokens of the tokenizer (`special_markers`)."""
    mark = _Marks(specials)
    start = "start: " + (f'{mark(THINK_END)} "\\n\\n" ' if close_reasoning else "") + "call"
    start += ' ("\\n" call)*' if several else ""
    return "\n".join([start, f"call: {mark(OPEN)} call_body", *_call_rules(fmt, tools, mark)]) + "\n"


def text_with_calls(fmt: str, tools: Sequence[Tool], thinking: bool = False, specials: Specials = frozenset()) -> str:
    """Lark: any text in which every `<tool_call>` opens a whole, valid call of one of `tools`, and reasoning
    blocks are free. `thinking`: the prompt leaves the model inside its reasoning, which the answer first ends.
    `specials`: as for forced_calls.

    Plain text may hold no marker that opens something (a call, a reasoning block; in Qwen3-Coder's format also the
    `<function=` a call starts with, which outside a call the parser would leave as text). A marker that is text
    ends the plain text as a lazy lexeme that includes it; one that is a special token follows the text as a token
    of its own (a special token is never part of a text lexeme)."""
    mark = _Marks(specials)
    # Qwen3-Coder's `<function=` outside a `<tool_call>` is a call the parser cannot read: never plain text either
    openers = (OPEN, THINK_START, FUNCTION_OPEN) if fmt == QWEN3_CODER else (OPEN, THINK_START)
    texts = [m for m in openers if m not in specials]
    plain = "/(?s:.*)/" if not texts else f"(/(?s:.*)/ & ~/(?s:.*)({'|'.join(texts)})(?s:.*)/)"
    start = "start: " + ("reasoning_end " if thinking else "") + "(call | reasoning)* PLAIN?"
    rules = [start, f"PLAIN: {plain} & /(?s:.+)/"]
    rules.append(f"call: {_opening('call', OPEN, mark, rules)} call_body")
    rules.append(f"reasoning: {_opening('reasoning', THINK_START, mark, rules)} reasoning_end")
    if THINK_END in specials:  # inside reasoning the tool-call tokens are words like any other
        inside = " | ".join(["/(?s:.+)/", *(mark(m) for m in (OPEN, CLOSE) if m in specials)])
        rules.append(f"reasoning_end: ({inside})* {mark(THINK_END)}")
    else:
        rules.append("reasoning_end[lazy]: /(?s:.*)<\\/think>/")
    return "\n".join([*rules, *_call_rules(fmt, tools, mark)]) + "\n"


def special_markers(is_special_token: Callable[[str], bool]) -> Specials:
    """The format markers that a tokenizer holds as single special tokens (as llguidance sees them): a grammar
    must name those as tokens, since a grammar's text never matches a special token."""
    return frozenset(m for m in (OPEN, CLOSE, THINK_START, THINK_END) if is_special_token(m))


def marker(text: str, specials: Specials) -> str:
    """A marker as a grammar writes it: `<tool_call>` (the special token) or `"<tool_call>"` (text)."""
    return text if text in specials else json.dumps(text)


class _Marks:
    """`marker` over one tokenizer's specials."""

    def __init__(self, specials: Specials) -> None:
        self.specials = specials

    def __call__(self, text: str) -> str:
        return marker(text, self.specials)


def _opening(name: str, marker: str, mark: _Marks, rules: list[str]) -> str:
    """Plain text up to and including `marker`: rules added to `rules`, the items returned."""
    if marker in mark.specials:
        return f"PLAIN? {mark(marker)}"
    rules += [f"{name}_opens[lazy]: {name.upper()}_OPENS", f"{name.upper()}_OPENS: PLAIN? {mark(marker)}"]
    return f"{name}_opens"


def _call_rules(fmt: str, tools: Sequence[Tool], mark: _Marks) -> list[str]:
    """`call_body`: what follows `<tool_call>` in `fmt`, for any of `tools`."""
    if not tools:
        raise ValueError("a tool-call grammar needs at least one tool")
    if fmt == HERMES:  # each tool's head written out, its arguments a schema of their own (so its $refs resolve)
        rules = ["call_body: " + " | ".join(f"arguments_{i}" for i in range(len(tools)))]
        for i, (name, parameters) in enumerate(tools):
            head = json.dumps('\n{"name": ' + json.dumps(name) + ', "arguments": ')
            schema = json.dumps(_as_written(parameters or {"type": "object"}))
            rules.append(f'arguments_{i}: {head} %json{schema} "}}\\n" {mark(CLOSE)}')
        return rules
    rules = ["call_body: " + " | ".join(f"function_{i}" for i in range(len(tools)))]
    for i, (name, parameters) in enumerate(tools):
        rules += _coder_function(i, name, parameters or {}, mark)
    return rules


def _coder_function(index: int, name: str, parameters: dict[str, Any], mark: _Marks) -> list[str]:
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    parts, rules = [], []
    for j, (param, schema) in enumerate(properties.items()):
        rule = f"param_{index}_{j}"
        parts.append(rule if param in required else f"{rule}?")
        rules += _coder_parameter(rule, param, schema if isinstance(schema, dict) else {})
    body = " ".join(parts)
    head = json.dumps(f"\n<function={name}>\n")
    return [f'function_{index}: {head} {body} "</function>\\n" {mark(CLOSE)}', *rules]


def _coder_parameter(rule: str, param: str, schema: dict[str, Any]) -> list[str]:
    tag = json.dumps(f"<parameter={param}>\n")
    types = schema_types(schema)
    if types and "string" not in types:  # a number, a boolean, an object, ...: JSON, as the parser reads it
        return [f"{rule}: {tag} %json{json.dumps(_as_written(schema))} {_VALUE_END}"]
    choices = [schema["const"]] if "const" in schema else schema.get("enum")
    if choices is not None and all(isinstance(c, str) for c in choices):
        texts = " | ".join(json.dumps(c) for c in choices)
        return [f"{rule}: {tag} ({texts}) {_VALUE_END}"]
    text = _RAW_TEXT
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if low or high is not None:
        text = f"/(?s:.){{{low},{'' if high is None else high}}}/ & {text}"
    if isinstance(schema.get("pattern"), str):
        text = f"{_pattern(schema['pattern'])} & {text}"
    terminal = rule.upper() + "_TEXT"
    return [f"{rule}: {tag} {rule}_value", f"{rule}_value[lazy]: {terminal}", f"{terminal}: ({text}) {_VALUE_END}"]


def _pattern(pattern: str) -> str:
    """A JSON schema `pattern` (found anywhere in the string unless anchored) as a Lark regex over the whole value."""
    body = pattern[1:] if pattern.startswith("^") else "(?s:.*)" + pattern
    body = body[:-1] if body.endswith("$") and not body.endswith("\\$") else body + "(?s:.*)"
    escaped = "".join("\\/" if c == "/" and (i == 0 or body[i - 1] != "\\") else c for i, c in enumerate(body))
    return f"/{escaped}/"


def _as_written(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with the templates' JSON spacing (a schema's own x-guidance options win)."""
    return {**schema, "x-guidance": {**TEMPLATE_JSON_OPTIONS, **schema.get("x-guidance", {})}}


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with the compact JSON options (a schema's own x-guidance options win)."""
    return {**schema, "x-guidance": {**JSON_OPTIONS, **schema.get("x-guidance", {})}}
