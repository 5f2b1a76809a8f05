"""warpcode.model_runtime: MoE decoder, checkpoint loading, tokenizer, KV cache, sampling and engine.

from warpcode.model_runtime import load
engine = load(path, device="cpu" | "cuda", dtype=torch.float32 | torch.bfloat16, weights="bf16" | "mxfp8")
engine.logits(input_ids)                                   # LongTensor[B, T] -> FloatTensor[B, T, V]
engine.generate(prompt_ids, max_new_tokens, temperature=0.0, ...) -> list[int]
handle = engine.submit(prompt_ids, max_new_tokens, SamplingParams(...))   # the serving engine, from any thread
for output in handle: ...                                                   # or `async for`; handle.cancel()

Names load on first use (PEP 562), so that the torch-free parts (chat/: templates and tool-call parsers;
openai_server/: serve-model's HTTP side; weight_formats.py) serve the agent without importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

# Exported name -> the module of warpcode.model_runtime defining it. No name may be a module's too: importing a
# submodule sets the package's attribute of that name, which would then hide the lazily loaded value.
_HOME = {
    "PRESETS": "presets",
    "CheckpointError": "checkpoint_error",
    "Engine": "engine",
    "EngineConfig": "serving.config",
    "GenerationStats": "engine",
    "ModelConfig": "config",
    "RequestHandle": "serving.request",
    "RequestOutput": "serving.request",
    "RequestRefused": "serving.request",
    "SamplingParams": "sampling",
    "UnsupportedConfigError": "config",
    "get_preset": "presets",
    "load": "engine",
    "load_random": "engine",
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'warpcode.model_runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"warpcode.model_runtime.{module}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return __all__
