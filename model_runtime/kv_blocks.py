"""The KV cache's block size by device, shared by the static decode path (decode_runner.py) and the serving engine
(serving/config.py): both run one attention kernel over the same paged layout."""

from __future__ import annotations

import torch

# H200, static decode at 512 / 8K keys (BENCHMARKS.md): blocks of 256 run at the pre-paging speed (a 64-256-key
# decode-attention tile always lies inside one block: one table entry per tile); blocks of 64 cost 0.5-2% at batch 1.
GPU_BLOCK_SIZE = 256
CPU_BLOCK_SIZE = 64


def default_block_size(device: torch.device) -> int:
    return GPU_BLOCK_SIZE if device.type == "cuda" else CPU_BLOCK_SIZE
