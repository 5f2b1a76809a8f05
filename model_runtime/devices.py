"""Devices and dtypes by name, as the command line and the agent give them: the runtime answers, so that nothing
above it imports torch."""

from __future__ import annotations

import torch


def cuda_available() -> bool:
    return torch.cuda.is_available()


def resolve_device(name: str = "auto") -> str:
    """ "auto": the GPU when there is one, else the CPU; any other name as given ("cpu", "cuda", "cuda:1")."""
    if name != "auto":
        return name
    return "cuda" if cuda_available() else "cpu"


def dtype_named(name: str | None) -> torch.dtype | None:
    """torch's dtype of that name ("bfloat16", "float32"), None for None (the checkpoint's own)."""
    return getattr(torch, name) if name else None


def release_cached_gpu_memory() -> None:
    """Hands the allocator's cached blocks back, so that a next model of another shape finds the memory free."""
    if cuda_available():
        torch.cuda.empty_cache()
