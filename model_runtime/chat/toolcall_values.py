"""A Qwen3-Coder parameter's raw text -> the value its JSON schema asks for.

Qwen3-Coder writes every argument as text between `<parameter=NAME>` tags, and its published chat templates show it
past calls written with Python's `str()` for non-string values: `True`/`False`/`None` in both revisions, and
`['a', 'b']` / `{'k': 1}` for lists and dicts in the first one. So a value is read as Qwen's own reference parser,
vLLM and SGLang read it: by the parameter's schema type, JSON first, then a Python literal. `null` is None whatever
the type (as Qwen's parser does); a value that fits none of the schema's types stays text, and the tool's
validation then says what is wrong with it.
"""

from __future__ import annotations

import ast
import json
from typing import Any

# JSON schema type names, and the spellings some tool authors use instead (vLLM's tests send "float")
_ALIASES = {
    "int": "integer",
    "float": "number",
    "double": "number",
    "bool": "boolean",
    "dict": "object",
    "list": "array",
}


def schema_types(schema: dict[str, Any] | None) -> set[str]:
    """Every type a schema accepts: `type` (a name or a list), `nullable`, `enum` values, and the members of
    `anyOf` / `oneOf` (what Pydantic and MCP servers generate for optional and union fields). Empty: anything."""
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else {t for t in declared or [] if isinstance(t, str)}
    if schema.get("nullable"):
        types.add("null")
    for value in schema.get("enum") or []:
        types.add(_json_type(value))
    for member in [*(schema.get("anyOf") or []), *(schema.get("oneOf") or [])]:
        types |= schema_types(member)
    return {_ALIASES.get(t, t) for t in types}


def typed_value(text: str, schema: dict[str, Any] | None) -> Any:
    """`text` as the schema's type; the text itself when the schema takes a string or says nothing."""
    types = schema_types(schema)
    if text.strip().lower() == "null":
        return None
    if not types - {"string", "null"}:  # a string (or no type at all): the text is the value
        return text
    bare = text.strip()
    if bare == "None" and ("null" in types or "string" not in types):
        return None
    # a string also allowed: the text stays text unless it is a list or an object the schema also takes
    tried = ("array", "object") if "string" in types else ("boolean", "integer", "number", "array", "object")
    for json_type in tried:
        if json_type in types and (value := _as(json_type, bare)) is not _NOT:
            return value
    return _literal(bare) if types - _KNOWN else text  # a type of its own (e.g. "any"): JSON or Python, if it is


_KNOWN = {"string", "null", "boolean", "integer", "number", "array", "object"}
_NOT = object()  # the text is not a value of the type asked


def _as(json_type: str, text: str) -> Any:
    if json_type == "boolean":
        return {"true": True, "false": False}.get(text.lower(), _NOT)
    if json_type == "integer":
        try:
            return int(text)
        except ValueError:
            return _NOT
    if json_type == "number":
        try:
            number = float(text)
        except ValueError:
            return _NOT
        return int(number) if number.is_integer() and "inf" not in text.lower() else number
    value = _literal(text)
    wanted = list if json_type == "array" else dict
    return value if isinstance(value, wanted) else _NOT


def _literal(text: str) -> Any:
    """JSON, else a Python literal (`['a', 'b']`, `{'k': True}`), else the text."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "object" if isinstance(value, dict) else "array"
