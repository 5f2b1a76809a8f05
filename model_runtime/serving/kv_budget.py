"""How many KV-cache blocks the engine's pool gets: a budget in GB, a fraction of free GPU memory, or 1 GB on a CPU,
never more than every sequence could hold."""

from __future__ import annotations

import torch

from warpcode.model_runtime.model import MoeForCausalLM
from warpcode.model_runtime.serving.config import EngineConfig


def blocks_in_budget(model: MoeForCausalLM, config: EngineConfig) -> int:
    model_config = model.config
    parameter = next(model.parameters())
    per_block = (
        2 * model_config.num_hidden_layers * model_config.num_key_value_heads * config.block_size
        * model_config.head_dim * parameter.element_size()
    )  # fmt: skip
    if config.kv_cache_gb is not None:
        budget = config.kv_cache_gb * 2**30
    elif parameter.is_cuda:
        torch.cuda.empty_cache()  # memory the allocator caches (a static runner's cache, freed) counts as free
        free, _ = torch.cuda.mem_get_info(parameter.device)
        budget = config.kv_cache_fraction * free
    else:
        budget = 2**30
    context = config.max_model_len or model_config.context_length
    # More than every sequence could hold is waste; on a CPU, four full contexts are plenty.
    sequences = config.max_num_seqs if parameter.is_cuda or config.kv_cache_gb is not None else 4
    blocks = min(int(budget // per_block), sequences * -(-context // config.block_size))
    if blocks < 1:
        raise ValueError(f"the KV-cache budget of {budget / 2**30:.2f} GB holds no block of {per_block} bytes")
    return blocks
