"""Arrival counters for "the last program to arrive finishes the job" kernels (decode_attention).

Such a kernel makes every program increment an int32 counter (after a barrier, sem="acq_rel", scope="gpu"); the one
that sees NUM_PROGRAMS - 1 earlier arrivals does the final work and stores 0 back, so the counters are zeroed once
here and are at zero again after every call (a CUDA-graph replay starts from zero as an eager call does).

One cache of zeroed int32 tensors keyed by (device, capacity). A larger tensor is added when a call needs more
counters than the largest one holds (capacity: a power of two, at least MIN_COUNTERS); the older ones stay alive
and are never freed, because CUDA graphs captured earlier keep their addresses. Growing during a capture raises:
the allocation would belong to the graph's pool and its zeroing would not be part of the replay.

Every call on a device shares the largest tensor, each kernel counting from index 0: kernels on one stream never
overlap on the counters, PDL included, because each calls `gdc_wait` (which waits for the previous grid to
complete and flush) before its first atomic. Calls running concurrently on different streams of one device are not
supported (decode runs on one stream).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MIN_COUNTERS = 4096  # allocated at first use (16 KB), so that growing is rare
COUNTERS: dict[tuple[torch.device, int], torch.Tensor] = {}


def arrival_counters(device: torch.device, count: int) -> torch.Tensor:
    """A zero-initialised int32 tensor of at least `count` counters on `device`, left at zero by every kernel
    that uses it."""
    device = torch.device(device)
    capacity = max((size for dev, size in COUNTERS if dev == device), default=0)
    if capacity < count:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                f"a kernel needs {count} arrival counters on {device} and has {capacity}: call it once with this "
                "batch outside CUDA-graph capture first (a warm-up run), so they are allocated"
            )
        capacity = max(MIN_COUNTERS, triton.next_power_of_2(count))
        COUNTERS[(device, capacity)] = torch.zeros(capacity, dtype=torch.int32, device=device)
    return COUNTERS[(device, capacity)]


@triton.jit
def arrive(counter, arrivals: tl.constexpr):
    """Called by each of the `arrivals` programs sharing `counter`, after its stores: True in the one that arrives
    last, which then sees every program's stores and has reset the counter to 0 (the module docstring)."""
    tl.debug_barrier()  # every thread's stores are done before the release
    last = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") == arrivals - 1
    if last:
        tl.store(counter, 0)
    return last
