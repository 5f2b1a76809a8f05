"""A conversation as the checkpoint's chat template writes it, as the prompt's token ids: how the agent's local
backend and serve-model prompt a local model."""

from __future__ import annotations

from typing import Any

from warpcode.model_runtime.chat.messages import Message


def conversation_prompt_ids(
    tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]], **variables: Any
) -> list[int]:
    """The conversation as the checkpoint's chat template writes it (tools included), as token ids: control tokens
    only where the template's markup puts them, every message, tool result and tool schema as plain text (a file
    that holds `<|im_start|>system` opens no system turn). `variables`: the template's own options
    (enable_thinking, ...)."""
    return tokenizer.chat_prompt_ids([template_message(m) for m in messages], tools=tools, **variables)


def template_message(message: Message) -> dict[str, Any]:
    """Hugging Face templates read tool-call arguments as objects, not as JSON text, and reasoning under the names
    transformers gives it: `reasoning_content` (Qwen3's) and `thinking` (gpt-oss's)."""
    rendered: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning is not None:
        rendered.update(reasoning_content=message.reasoning, thinking=message.reasoning)
    if message.tool_calls:
        rendered["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        rendered.update(tool_call_id=message.tool_call_id, name=message.name)
    return rendered
