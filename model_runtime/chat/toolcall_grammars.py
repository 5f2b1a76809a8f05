"""Tool calls as grammars: the Lark text (llguidance's dialect) of a call to one of the given tools, in the format a
chat template teaches its model, with arguments that are valid against the tool's schema and that our own parsers
read back as they were written.

Two shapes:
- `forced_calls`: the answer is one call (or several), nothing else: serve-model's `tool_choice` "required" or a
  named function.
- `text_with_calls`: any text, but wherever the model opens a call (`<tool_call>`) the call must be a whole, valid
  call of one of the tools; then any text again, more calls, or the end. The `local:` backend's answers. The free
  text is a lazy lexeme that ends at the first `<tool_call>`, llguidance's pattern for tool calling in plain text.

The formats (toolcall_parsers.py reads both):
- Hermes / Qwen3 JSON: `<tool_call>`, a newline, the compact JSON object {"name": ..., "arguments": {...}} valid
  against {name: the tool's name, arguments: its schema}, a newline, `</tool_call>`.
- Qwen3-Coder XML: `<tool_call>`, `<function=NAME>`, then each `<parameter=P>`, its value and `</parameter>`, then
  `</function>` and `</tool_call>`, each tag and value on lines of their own. The parameters come in the schema's
  order (the required ones always, the others optional). A parameter that takes a string is raw text that never
  holds `</parameter>` (so the parser's reading is never in doubt) and is not `null` (which the parser reads as
  None); its `enum` / `const` become the only texts allowed, and `minLength`, `maxLength` and `pattern` bound it.
  Any other parameter is compact JSON valid against its schema.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from warpcode.model_runtime.chat.toolcall_values import schema_types

# Compact JSON (no free whitespace): the model cannot spend its tokens on spaces and newlines, so a bounded schema
# gives a bounded answer.
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
QWEN3_CODER = "qwen3_coder"
HERMES = "hermes"
# Raw text without `</parameter>` anywhere, then the parameter's end: a lazy lexeme ends at the first such end.
_RAW_TEXT = r"/(?s:.*)/ & ~/(?s:.*)<\/parameter>(?s:.*)/ & ~/\s*[nN][uU][lL][lL]\s*/"
_VALUE_END = '"\\n</parameter>\\n"'

Tool = tuple[str, dict[str, Any]]  # (name, its parameters' JSON schema)


def tool_format(template: str) -> str:
    """The tool-call format a chat template teaches (as parser_for_template decides it)."""
    return QWEN3_CODER if "<function=" in template else HERMES


def forced_calls(fmt: str, tools: Sequence[Tool], several: bool, prefix: str = "") -> str:
    """Lark: `prefix` (literal text, e.g. the end of the reasoning), then one call of one of `tools`, or one or
    more when `several`; nothing else."""
    rules = _call_rules(fmt, tools)
    start = f"start: {json.dumps(prefix) if prefix else ''} call" + (' ("\\n" call)*' if several else "")
    return "\n".join([start, 'call: "<tool_call>" call_body', *rules]) + "\n"


def text_with_calls(fmt: str, tools: Sequence[Tool]) -> str:
    """Lark: any text in which every `<tool_call>` opens a whole, valid call of one of `tools`."""
    rules = _call_rules(fmt, tools)
    head = [
        "start: call* TEXT",
        "TEXT: /(?s:.*)/",
        "text_then_open[lazy]: /(?s:.*)<tool_call>/",
        "call: text_then_open call_body",
    ]
    return "\n".join([*head, *rules]) + "\n"


def _call_rules(fmt: str, tools: Sequence[Tool]) -> list[str]:
    """`call_body`: what follows `<tool_call>` in `fmt`, for any of `tools`."""
    if not tools:
        raise ValueError("a tool-call grammar needs at least one tool")
    if fmt == HERMES:
        calls = [
            {
                "type": "object",
                "properties": {"name": {"const": name}, "arguments": parameters or {"type": "object"}},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for name, parameters in tools
        ]
        return [f'call_body: "\\n" %json{json.dumps(compact({"anyOf": calls}))} "\\n</tool_call>"']
    rules = ["call_body: " + " | ".join(f"function_{i}" for i in range(len(tools)))]
    for i, (name, parameters) in enumerate(tools):
        rules += _coder_function(i, name, parameters or {})
    return rules


def _coder_function(index: int, name: str, parameters: dict[str, Any]) -> list[str]:
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    parts, rules = [], []
    for j, (param, schema) in enumerate(properties.items()):
        rule = f"param_{index}_{j}"
        parts.append(rule if param in required else f"{rule}?")
        rules += _coder_parameter(rule, param, schema if isinstance(schema, dict) else {})
    body = " ".join(parts)
    head = json.dumps(f"\n<function={name}>\n")
    return [f'function_{index}: {head} {body} "</function>\\n</tool_call>"', *rules]


def _coder_parameter(rule: str, param: str, schema: dict[str, Any]) -> list[str]:
    tag = json.dumps(f"<parameter={param}>\n")
    types = schema_types(schema)
    if types and "string" not in types:  # a number, a boolean, an object, ...: JSON, as the parser reads it
        return [f"{rule}: {tag} %json{json.dumps(compact(schema))} {_VALUE_END}"]
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


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with the compact JSON options (a schema's own x-guidance options win)."""
    return {**schema, "x-guidance": {**JSON_OPTIONS, **schema.get("x-guidance", {})}}
