"""The key/value cache a full forward pass writes (prefill): views of the decode state's static cache.

The forward writes its T tokens to the next T slots of every row; `key_valid` records which slots hold real
tokens (prompts are right-padded to the longest), so attention never looks at padding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class KVCache:
    keys: list[torch.Tensor]  # per layer [B, kv_heads, capacity, head_dim]
    values: list[torch.Tensor]  # per layer [B, kv_heads, capacity, head_dim]
    key_valid: torch.Tensor  # bool [B, capacity]: the slot holds a real (non-padding) token
    length: int = 0  # slots written so far, the same for every sequence

    @property
    def capacity(self) -> int:
        return self.key_valid.shape[1]

    def append_validity(self, token_valid: torch.Tensor) -> None:
        """Marks the slots the next forward writes ([B, T] bool); call once per forward, before the layers run."""
        end = self.length + token_valid.shape[1]
        if end > self.capacity:
            raise ValueError(f"KV cache full: {end} tokens exceed its capacity of {self.capacity}")
        self.key_valid[:, self.length : end] = token_valid

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stores k, v [B, kv_heads, T, head_dim] at the next T slots; returns all keys and values so far."""
        end = self.length + k.shape[2]
        self.keys[layer][:, :, self.length : end] = k
        self.values[layer][:, :, self.length : end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, tokens: int) -> None:
        """Called once every layer has written the current forward's tokens."""
        self.length += tokens
