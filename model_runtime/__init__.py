"""warpcode.model_runtime: MoE decoder, checkpoint loading, tokenizer, KV cache, sampling and engine.

from warpcode.model_runtime import load
engine = load(path, device="cpu" | "cuda", dtype=torch.float32 | torch.bfloat16, weights="bf16" | "mxfp8")
engine.logits(input_ids)                                   # LongTensor[B, T] -> FloatTensor[B, T, V]
engine.generate(prompt_ids, max_new_tokens, temperature=0.0, ...) -> list[int]
handle = engine.submit(prompt_ids, max_new_tokens, SamplingParams(...))   # the serving engine, from any thread
for output in handle: ...                                                   # or `async for`; handle.cancel()
"""

from warpcode.model_runtime.config import ModelConfig, UnsupportedConfigError
from warpcode.model_runtime.engine import Engine, GenerationStats, load, load_random
from warpcode.model_runtime.presets import PRESETS, get_preset
from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.serving.config import EngineConfig
from warpcode.model_runtime.serving.request import RequestHandle, RequestOutput, RequestRefused
from warpcode.model_runtime.weights import CheckpointError

__all__ = [
    "PRESETS",
    "CheckpointError",
    "Engine",
    "EngineConfig",
    "GenerationStats",
    "ModelConfig",
    "RequestHandle",
    "RequestOutput",
    "RequestRefused",
    "SamplingParams",
    "UnsupportedConfigError",
    "get_preset",
    "load",
    "load_random",
]
