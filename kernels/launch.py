"""Launch options: programmatic dependent launch (PDL) on Hopper and newer, register caps.

With PDL a kernel's blocks may start while the previous kernel drains; kernels launched this way call
`gdc_wait` before reading anything an earlier kernel wrote, so the option never changes results.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

# Triton decides at import whether kernels run in its CPU interpreter (tests set this before importing kernels).
INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def _supports_pdl(device_index: int) -> bool:
    if INTERPRETER or os.environ.get("WARPCODE_DISABLE_PDL") == "1":
        return False
    return torch.cuda.get_device_capability(device_index)[0] >= 9


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """The SMs a launch spreads its programs over: the GPU's, or 1 off the GPU and in the CPU interpreter."""
    if device.type != "cuda" or INTERPRETER:
        return 1
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def pdl_options(device: torch.device) -> dict:
    """Keyword arguments for a Triton launch: `USE_PDL` for the kernel and `launch_pdl` for the runtime."""
    if device.type != "cuda" or not _supports_pdl(device.index if device.index is not None else 0):
        return {"USE_PDL": False}
    return {"USE_PDL": True, "launch_pdl": True}


def register_cap(max_registers: int | None) -> dict:
    """Keyword arguments for a Triton launch capping the registers a thread (ptxas' maxnreg; None: no cap). Fewer
    registers let more programs share an SM; below what the kernel needs, ptxas spills."""
    return {"maxnreg": max_registers} if max_registers else {}


def check_register_cap(config: object, name: str) -> None:
    """Raises ValueError unless the launch config's `name` is None or a register count ptxas accepts (24-255)."""
    value = getattr(config, name)
    if value is not None and not 24 <= value <= 255:
        raise ValueError(f"{type(config).__name__}.{name} must be None or 24-255 registers a thread, got {value}")


@triton.jit
def wait_for_inputs(USE_PDL: tl.constexpr):
    """The prologue of a kernel whose every input may come from the kernel launched just before: under PDL, wait
    for that kernel to finish, then let the next kernel's blocks start gathering."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def as_int64(value):
    """An integer kernel argument as int64: Triton passes 1 as a constexpr int (no `.to`), other values as tensors."""
    return tl.zeros([], dtype=tl.int64) + value
