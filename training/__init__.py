"""warpcode.training: how the built-in model (`--model builtin`) is made, reproducibly, and nothing the product
calls (no other package imports it).

A small qwen3_moe coding model: a BPE tokenizer trained on Python sources, pre-training on permissively licensed
Python code, then fine-tuning on synthetic agent trajectories (made-up repositories, one instruction, the tool calls
that solve it through the real tools, rendered exactly as the agent sends them), written out as a Hugging Face
checkpoint directory.
"""
