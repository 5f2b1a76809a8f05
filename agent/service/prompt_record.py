"""A user prompt as the session log keeps it: the content blocks as the client sent them (text, resource links,
embedded resources), the message id they were given, and the text the model was shown (flattened).

Replay (session/load) sends the blocks back as they came, one `user_message_chunk` per block, all with the
prompt's message id. Logs written before blocks were kept hold only the text: it is replayed as one text block.
The session's title is its first prompt's words (its text blocks; without any, the names of what it attached).
"""

from __future__ import annotations

from typing import Any

from acp import schema

from warpcode.agent.service.update_stream import DUMP

TITLE_CHARS = 80


def prompt_record(blocks: list[Any], text: str, message_id: str) -> dict[str, Any]:
    """The log record of a prompt; `text` is what the model was shown. "type" comes first: the store counts
    prompts by that head (session_store.py)."""
    return {"type": "prompt", "text": text, "messageId": message_id, "blocks": [b.model_dump(**DUMP) for b in blocks]}


def prompt_updates(record: dict[str, Any], message_id: str) -> list[schema.UserMessageChunk]:
    """The prompt as the user's message chunks, one per block; `message_id` stands in for a record without one."""
    blocks = record.get("blocks") or [{"type": "text", "text": record["text"]}]
    message_id = record.get("messageId") or message_id
    return [
        schema.UserMessageChunk.model_validate(
            {"sessionUpdate": "user_message_chunk", "content": block, "messageId": message_id}
        )
        for block in blocks
    ]


def prompt_title(record: dict[str, Any]) -> str | None:
    """The title a session with this first prompt gets; None when the prompt says nothing to name it by."""
    blocks = record.get("blocks")
    if blocks is None:
        words = record.get("text", "")
    else:
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        named = [b.get("name") or b.get("uri", "") for b in blocks if b.get("type") == "resource_link"]
        embedded = [b.get("resource", {}).get("uri", "") for b in blocks if b.get("type") == "resource"]
        words = " ".join(texts) if any(t.strip() for t in texts) else " ".join(named + embedded)
    title = " ".join(words.split())[:TITLE_CHARS]
    return title or None
