"""MCP tools as the model sees them, and their results as the observations it reads.

A tool's input schema goes to the model as the server wrote it (nested objects, `$defs` and `$ref` included):
the server validates its own arguments and answers a bad call with an error result the model can read. Its
description says which server it comes from, cut at MAX_DESCRIPTION_CHARS (a server's descriptions are its
words in every request's prompt); a schema longer than MAX_SCHEMA_CHARS as JSON is replaced by an open one (any
object), which the description says. A result's text blocks are joined; images, audio and binary resources are
described, not inlined (the model reads text); an `isError` result is a failed call. The loop cuts long
observations to `tool_output_tokens` as it does ours.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DESCRIPTION_CHARS = 2_048
MAX_SCHEMA_CHARS = 32_768
EMPTY_SCHEMA = {"type": "object", "properties": {}}


def tool_spec(name: str, server: str, tool: Any) -> dict[str, Any]:
    """`tool` (an MCP Tool) in the OpenAI function-tool format our backends and chat templates take."""
    description = (tool.description or tool.title or "").strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
    description = f"{description} (MCP server {server})" if description else f"A tool of the MCP server {server}."
    schema = tool.input_schema if isinstance(tool.input_schema, dict) and tool.input_schema else EMPTY_SCHEMA
    if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
        schema = {"type": "object"}
        description += " Its argument schema is too long to show: pass the arguments its description names."
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def observation(result: Any) -> tuple[bool, str]:
    """(ok, text) of a CallToolResult: its content as text; not ok when the server flagged it `isError`."""
    parts = [describe(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text = "\n".join(parts) or "(the tool returned nothing)"
    return not result.is_error, text


def describe(block: Any) -> str:
    """One content block as text."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_decoded_size(block.data):,} bytes, not shown]"
    if kind == "resource_link":
        return f"[resource {block.name}: {block.uri}]"
    if kind == "resource":
        resource = block.resource
        if getattr(resource, "text", None) is not None:
            return f'<resource uri="{resource.uri}">\n{resource.text}\n</resource>'
        mime = f", {resource.mime_type}" if getattr(resource, "mime_type", None) else ""
        return f"[binary resource {resource.uri}{mime}, not shown]"
    return f"[{kind or 'unknown'} content, not shown]"


def _decoded_size(base64_text: str) -> int:
    return len(base64_text) * 3 // 4 - base64_text[-2:].count("=")
