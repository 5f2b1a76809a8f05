"""warpcode.model_runtime.chat: what a chat model reads and writes as text, without torch, shared by the agent's
local backend and serve-model.

messages.py (the conversation: Message, ToolCall), template.py (a checkpoint's Jinja chat template, rendered as
transformers does), prompt.py (a conversation -> the template's prompt ids), deltas.py (streamed text and thought
pieces), reasoning.py (`<think>` split from the answer), toolcall_parsers.py (Hermes and Qwen3-Coder tool calls read
as they stream; qwen3_coder_calls.py, toolcall_values.py and markers.py are theirs).
"""
