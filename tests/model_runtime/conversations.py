"""A coding agent's conversation with a tool: system prompt, request, tool call, tool result (text that HTML escaping
or \\u escapes would change)."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read <path> & return it (ünïcode)",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]
MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Show me a.py"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "a.py"}}}],
    },
    {"role": "tool", "content": "print('hi')"},
]
