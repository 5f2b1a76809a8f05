"""Devices and dtypes by name, as the command line and the agent give them: the runtime answers, so that nothing
above it imports torch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

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


@contextlib.contextmanager
def one_thread_on_cpu(device: torch.device) -> Iterator[None]:
    """Runs the block on one intra-op thread when `device` is the CPU. A decode step is hundreds of small ops (one
    token's vectors): splitting each over threads costs more in their synchronisation than it saves, and measured
    on 2 cores the built-in model decodes 2.4x faster on one (BENCHMARKS.md). Prefill's large matrices keep them."""
    if device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
