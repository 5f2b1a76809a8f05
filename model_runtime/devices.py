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


ONE_THREAD_TOKENS = 768  # a CPU pass over fewer tokens than this runs on one intra-op thread


@contextlib.contextmanager
def one_thread_on_cpu(device: torch.device, tokens: int = 1) -> Iterator[None]:
    """Runs the block on one intra-op thread when `device` is the CPU and the pass is over fewer than
    ONE_THREAD_TOKENS tokens. A decode step, a verify step or a short prefill is hundreds of small ops: splitting
    each over threads costs more in their synchronisation than it saves. Measured on 2 cores with the built-in model
    (BENCHMARKS.md): it decodes 2.4x faster on one thread, prefills 64 new tokens 2.8x and 512 1.24x faster, while
    1,024 prefill 1.16x faster on two: long prompts keep every thread."""
    if device.type != "cpu" or tokens >= ONE_THREAD_TOKENS:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
