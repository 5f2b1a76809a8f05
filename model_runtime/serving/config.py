"""The serving engine's settings, checked when built."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from warpcode.model_runtime.kv_blocks import default_block_size
from warpcode.model_runtime.speculative import SpeculativeConfig


@dataclass
class EngineConfig:
    block_size: int | None = None  # tokens per KV-cache block, the prefix cache's granularity; None: by device
    kv_cache_gb: float | None = None  # the pool's size; None: kv_cache_fraction of free GPU memory (1 GB on a CPU)
    kv_cache_fraction: float = 0.5
    num_blocks: int | None = None  # the pool's size in blocks, overriding the two above (tests)
    max_num_seqs: int = 64  # sequences holding cache blocks at once (prefilling or decoding)
    max_model_len: int | None = None  # tokens per sequence; None: the model's context (ModelConfig.context_length)
    max_prefill_tokens: int = 16384  # prompt tokens per forward pass while nothing decodes
    interleaved_prefill_tokens: int = 1024  # per forward pass while streams decode,
    prefill_layers_per_step: int = 4  # run between two decode steps: with the above, bounds the streams' gaps
    use_graphs: bool | None = None  # CUDA graphs for decode steps; None: on the GPU
    prefill_graphs: bool | None = None  # CUDA graphs for one sequence's chunk of up to 1,024 tokens; None: as above
    speculative: SpeculativeConfig | None = None  # model-free speculative decoding; None: the device's default

    def __post_init__(self) -> None:
        positive = {
            "block_size": 1 if self.block_size is None else self.block_size,
            "max_num_seqs": self.max_num_seqs,
            "max_prefill_tokens": self.max_prefill_tokens,
            "interleaved_prefill_tokens": self.interleaved_prefill_tokens,
            "prefill_layers_per_step": self.prefill_layers_per_step,
        }
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.kv_cache_gb is not None and not self.kv_cache_gb > 0:
            raise ValueError(f"kv_cache_gb must be positive, got {self.kv_cache_gb}")
        if not 0 < self.kv_cache_fraction < 1:
            raise ValueError(f"kv_cache_fraction must be in (0, 1), got {self.kv_cache_fraction}")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise ValueError(f"num_blocks must be positive, got {self.num_blocks}")
        if self.speculative is not None and not isinstance(self.speculative, SpeculativeConfig):
            raise ValueError(f"speculative must be a SpeculativeConfig or None, got {self.speculative!r}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError(f"max_model_len must be at least 2, got {self.max_model_len}")

    def block_size_on(self, device: torch.device) -> int:
        return self.block_size or default_block_size(device)
