"""Hopper's bulk L2 prefetch (`cp.async.bulk.prefetch.L2.global`) from inside a Triton kernel.

One instruction per element asks the SM's copy engine to bring `size` bytes at `address` into L2 and returns at
once: nothing waits for it and nothing reads its result, so it changes no value and needs no ordering against the
kernels that write or read that memory. It pays where device memory would otherwise idle while a later kernel's
bytes are already known: the route kernel prefetches the first rows of the experts it picked (route.py) during the
kernel boundary and ramp before warp decode's own loads arrive.

Inline assembly does not run in Triton's CPU interpreter and the instruction needs sm_90: `supports_bulk_prefetch`
tells launchers whether to use it.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from warpcode.kernels.launch import INTERPRETER


@functools.cache
def _is_hopper_or_newer(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index)[0] >= 9


def supports_bulk_prefetch(device: torch.device) -> bool:
    """Whether kernels on `device` may issue `bulk_prefetch_l2` (CUDA, sm_90 or newer, not the interpreter)."""
    if device.type != "cuda" or INTERPRETER:
        return False
    return _is_hopper_or_newer(device.index if device.index is not None else torch.cuda.current_device())


@triton.jit
def bulk_prefetch_l2(addresses, sizes):
    """One L2 bulk prefetch per element: `sizes` bytes (int32, a multiple of 16; <= 0 skips) at `addresses`
    (16-byte aligned pointers)."""
    tl.inline_asm_elementwise(
        "{\n .reg .pred p;\n setp.gt.s32 p, $2, 0;\n @p cp.async.bulk.prefetch.L2.global [$1], $2;\n mov.u32 $0, 0;\n}",
        "=r,l,r",
        [addresses, sizes],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )
