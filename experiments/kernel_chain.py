"""What kernel boundaries cost inside a CUDA graph.

1. A chain of N tiny dependent Triton kernels (each reads the value the previous one wrote, the way the decode
   step's small kernels depend on each other), timed per kernel with and without programmatic dependent launch
   (PDL), with 1 or one-per-SM programs.
2. Whether a weight-streaming GEMV (o_proj's shape, its first weight tiles fetched before `gdc_wait`) overlaps
   the kernel before it: 48 layers of [a kernel that spins for S us, then the GEMV reading the spinner's output]
   against the spinners alone and the GEMVs alone. With full overlap the pair costs max(S, GEMV).

    python experiments/kernel_chain.py [--kernels 480] [--spin-us 2,5]
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

from warpcode.bench.timing import capture_graph
from warpcode.kernels.launch import wait_for_inputs


@triton.jit
def _step_kernel(src_ptr, dst_ptr, USE_PDL: tl.constexpr):
    wait_for_inputs(USE_PDL)
    pid = tl.program_id(0)
    tl.store(dst_ptr + pid, tl.load(src_ptr + pid) + 1.0)


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _spin_kernel(src_ptr, dst_ptr, ns, USE_PDL: tl.constexpr):
    """Stands in for a latency-bound kernel (attention at short context): busy for `ns`, then writes dst."""
    wait_for_inputs(USE_PDL)
    start = _globaltimer()
    now = start
    while now - start < ns:
        now = _globaltimer()
    tl.store(dst_ptr, tl.load(src_ptr) + 1.0)


def graph_us(body, replays: int = 20) -> float:
    """Microseconds per replay of a CUDA graph of body()."""
    body()
    torch.cuda.synchronize()
    graph = capture_graph(body)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / replays


def overlap(spin_us: float, layers: int = 48) -> None:
    from warpcode.kernels.gemv import gemv

    n, hidden = 2048, 4096  # o_proj: 16.8 MB of bf16 weights per layer, 3.9 us at 4.27 TB/s
    weights = [torch.randn(n, hidden, device="cuda").bfloat16() for _ in range(layers)]
    xs = [torch.zeros(1, hidden, device="cuda").bfloat16() for _ in range(layers + 1)]
    ys = [torch.empty(1, n, device="cuda").bfloat16() for _ in range(layers)]
    ns = int(spin_us * 1000)

    def spin(i):
        _spin_kernel[(1,)](xs[i], xs[i + 1], ns, num_warps=1, USE_PDL=True, launch_pdl=True)

    spins = graph_us(lambda: [spin(i) for i in range(layers)]) / layers
    gemvs = graph_us(lambda: [gemv(xs[i], weights[i], out=ys[i]) for i in range(layers)]) / layers
    pairs = graph_us(lambda: [(spin(i), gemv(xs[i + 1], weights[i], out=ys[i])) for i in range(layers)])
    pairs /= layers
    print(
        f"spin {spin_us} us: spinner {spins:.2f} us, GEMV alone {gemvs:.2f} us, "
        f"pair {pairs:.2f} us "
        f"-> the GEMV adds {pairs - spins:.2f} us after the spinner (full overlap: {max(spins, gemvs) - spins:.2f})"
    )


def per_kernel_us(kernels: int, programs: int, pdl: bool) -> float:
    buffers = [torch.zeros(programs, device="cuda") for _ in range(2)]
    options = {"USE_PDL": True, "launch_pdl": True} if pdl else {"USE_PDL": False}

    def chain():
        for i in range(kernels):
            _step_kernel[(programs,)](buffers[i % 2], buffers[(i + 1) % 2], num_warps=1, **options)

    return graph_us(chain) / kernels


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=480)
    parser.add_argument("--spin-us", default="2,5")
    args = parser.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for programs in (1, sms):
        for pdl in (False, True):
            us = per_kernel_us(args.kernels, programs, pdl)
            print(f"{args.kernels} chained kernels, {programs:4d} programs, PDL {pdl!s:5}: {us:.2f} us per kernel")
    for spin_us in args.spin_us.split(","):
        overlap(float(spin_us))


if __name__ == "__main__":
    main()
