"""GPU timing for memory-bound kernels: CUDA-graph replay over rotated inputs, and the copy-bandwidth ceiling."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

L2_BYTES = 60 * 2**20  # H200; rotation sizes its input sets to several times this


def measure_copy_bandwidth(device: torch.device, gigabytes: float = 2.0, repeats: int = 20) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written."""
    count = int(gigabytes * 2**30) // 4
    source = torch.randn(count, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        target.copy_(source)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / repeats
    del source, target
    return 2 * count * 4 / seconds


def time_per_call(
    call: Callable[..., object], argument_sets: Sequence[tuple], replays: int = 50, capture: bool = True
) -> tuple[float, str]:
    """Seconds per call (median of 5 rounds) over `argument_sets`, rotated so consecutive calls touch new memory.

    Captures all calls in one CUDA graph and times its replays (no launch gaps); paths that cannot be captured
    (host synchronisation inside, `capture=False`) are timed eagerly. Returns (seconds per call, "graph" | "eager").
    """
    for arguments in argument_sets:  # compile and autotune outside the timed region
        call(*arguments)
    torch.cuda.synchronize()
    run, mode = (lambda: [call(*arguments) for arguments in argument_sets]), "eager"
    if capture:
        run, mode = _captured(call, argument_sets)
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays // 5):
            run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / (replays // 5) / len(argument_sets))
    return sorted(times)[len(times) // 2], mode


def capture_graph(body: Callable[[], object]) -> torch.cuda.CUDAGraph:
    """A CUDA graph of body()'s launches, captured on a side stream (run body once before, to compile)."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        body()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


def _captured(call: Callable[..., object], argument_sets: Sequence[tuple]) -> tuple[Callable[[], object], str]:
    graph = capture_graph(lambda: [call(*arguments) for arguments in argument_sets])
    return graph.replay, "graph"
