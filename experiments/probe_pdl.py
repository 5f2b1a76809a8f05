"""When do a PDL secondary's programs start? A 1-program kernel spins for 20 us (recording its start and end on
the global timer); the next kernel, launched with PDL, records per program the time it started and the time its
`gdc_wait` returned. Printed relative to the spinner's start, in a plain stream and in a CUDA graph.
Then the same for a GEMV of o_proj's shape written like kernels/gemv.py (weights loaded before `gdc_wait`), with
per-program stamps: start, weights arrived (a dependent read of them), wait passed, output stored.

    python experiments/probe_pdl.py
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from warpcode.bench.timing import capture_graph


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _spinner(times_ptr, ns, WAIT_FIRST: tl.constexpr):
    if WAIT_FIRST:
        tl.extra.cuda.gdc_wait()
    tl.extra.cuda.gdc_launch_dependents()
    start = _now()
    now = start
    while now - start < ns:
        now = _now()
    tl.store(times_ptr, start)
    tl.store(times_ptr + 1, now)


@triton.jit
def _secondary(times_ptr):
    t0 = _now()
    tl.extra.cuda.gdc_wait()
    t1 = _now()
    pid = tl.program_id(0)
    tl.store(times_ptr + 2 * pid, t0)
    tl.store(times_ptr + 2 * pid + 1, t1)


@triton.jit
def _gemv_probe(x_ptr, w_ptr, y_ptr, times_ptr, N, H: tl.constexpr, BLOCK_N: tl.constexpr):
    t0 = _now()
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, H)
    w = tl.load(w_ptr + rows[:, None] * H + cols[None, :], mask=(rows < N)[:, None], other=0.0)
    first = tl.sum(tl.sum(w.to(tl.float32), axis=1), axis=0)  # depends on every weight: the loads have landed
    t1 = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [first], dtype=tl.int64, is_pure=False,
                                   pack=1)  # fmt: skip
    tl.extra.cuda.gdc_wait()
    t2 = _now()
    x = tl.load(x_ptr + cols).to(tl.float32)
    y = tl.sum(w.to(tl.float32) * x[None, :], axis=1)
    tl.store(y_ptr + rows, y.to(tl.bfloat16), mask=rows < N)
    t3 = _now()
    tl.store(times_ptr + 4 * pid, t0)
    tl.store(times_ptr + 4 * pid + 1, t1)
    tl.store(times_ptr + 4 * pid + 2, t2)
    tl.store(times_ptr + 4 * pid + 3, t3)


def gemv_timeline(spin_us: float, block_n: int, warps: int) -> str:
    n, hidden = 2048, 4096
    programs = n // block_n
    spin_times = torch.zeros(2, dtype=torch.int64, device="cuda")
    times = torch.zeros(4 * programs, dtype=torch.int64, device="cuda")
    w = torch.randn(n, hidden, device="cuda").bfloat16()
    x = torch.randn(hidden, device="cuda").bfloat16()
    y = torch.empty(n, device="cuda").bfloat16()

    def body():
        _spinner[(1,)](spin_times, int(spin_us * 1000), WAIT_FIRST=True, num_warps=1, launch_pdl=True)
        _gemv_probe[(programs,)](x, w, y, times, n, H=hidden, BLOCK_N=block_n, num_warps=warps, launch_pdl=True)

    body()
    torch.cuda.synchronize()
    g = capture_graph(body)
    w.copy_(torch.randn_like(w))  # out of L2 is not guaranteed (16.8 MB), but a fresh write leaves it dirty
    g.replay()
    torch.cuda.synchronize()
    end = spin_times[1].item()
    t = ((times.view(programs, 4) - end).float() / 1000).cpu()  # relative to the spinner's end

    def span(column):
        q = torch.quantile(t[:, column], torch.tensor([0.0, 0.5, 0.9, 1.0]))
        return "/".join(f"{v:.1f}" for v in q.tolist())

    return (
        f"GEMV {programs} programs x {warps} warps after a {spin_us} us spinner (us after it ended, "
        f"min/median/p90/max): start {span(0)}, weights in {span(1)}, wait passed {span(2)}, stored {span(3)}"
    )


def run(programs: int, pdl: bool, graph: bool, wait_first: bool) -> str:
    spin_times = torch.zeros(2, dtype=torch.int64, device="cuda")
    times = torch.zeros(2 * programs, dtype=torch.int64, device="cuda")
    options = {"launch_pdl": True} if pdl else {}

    def body():
        _spinner[(1,)](spin_times, 20_000, WAIT_FIRST=wait_first, num_warps=1, **options)
        _secondary[(programs,)](times, num_warps=4, **options)

    body()
    torch.cuda.synchronize()
    if graph:
        capture_graph(body).replay()
    else:
        body()
    torch.cuda.synchronize()
    start, end = spin_times.tolist()
    t = (times.view(programs, 2) - start).float() / 1000
    return (
        f"programs {programs:4d} pdl {pdl!s:5} graph {graph!s:5} wait_first {wait_first!s:5}: spinner ends at "
        f"{(end - start) / 1000:.1f} us; secondary programs start {t[:, 0].min():.1f}..{t[:, 0].max():.1f} us, "
        f"pass gdc_wait {t[:, 1].min():.1f}..{t[:, 1].max():.1f} us"
    )


def main() -> None:
    for programs in (132, 1024):
        for pdl in (False, True):
            for graph in (False, True):
                for wait_first in (False, True) if graph else (True,):
                    print(run(programs, pdl, graph, wait_first), flush=True)
    for block_n, warps in ((4, 8), (2, 4), (8, 8)):
        for spin_us in (5.0, 20.0):
            print(gemv_timeline(spin_us, block_n, warps), flush=True)


if __name__ == "__main__":
    main()
