"""Launch parameters for the warp-decode kernels: a table measured on the device, and a heuristic elsewhere.

Table rows come from `python -m warpcode.kernels.tune_warp_decode` on an H200 (see BENCHMARKS.md); keys are
(H, I, E, K) and a token-count bucket, so a shape that is not in the table still gets sensible blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton


@dataclass(frozen=True)
class WarpDecodeConfig:
    gate_up_rows: int = 8  # intermediate rows per kernel-1 program (gate and up each)
    gate_up_cols: int = 512  # H elements per loaded tile
    gate_up_warps: int = 4
    gate_up_stages: int = 1
    down_rows: int = 4  # output rows per kernel-2 program
    down_cols: int = 128  # I elements per loaded tile (times K experts at once)
    down_warps: int = 4
    down_stages: int = 1

    def __post_init__(self) -> None:
        for name in ("gate_up_rows", "gate_up_cols", "down_rows", "down_cols", "gate_up_warps", "down_warps"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"WarpDecodeConfig.{name} must be a power of two, got {value}")
        if self.gate_up_stages < 1 or self.down_stages < 1:
            raise ValueError("WarpDecodeConfig stages must be >= 1")


TOKEN_BUCKETS = (1, 2, 4, 8, 16, 32, 64)

# (H, I, E, K, token bucket) -> config, measured on an H200 (BENCHMARKS.md, "warp decode tuning").
TUNED: dict[tuple[int, int, int, int, int], WarpDecodeConfig] = {}


def token_bucket(tokens: int) -> int:
    return next((bucket for bucket in TOKEN_BUCKETS if tokens <= bucket), TOKEN_BUCKETS[-1])


def warp_decode_config(hidden: int, intermediate: int, experts: int, top_k: int, tokens: int) -> WarpDecodeConfig:
    tuned = TUNED.get((hidden, intermediate, experts, top_k, token_bucket(tokens)))
    if tuned is not None:
        return tuned
    return WarpDecodeConfig(
        gate_up_rows=min(8, triton.next_power_of_2(intermediate)),
        gate_up_cols=min(512, triton.next_power_of_2(hidden)),
        down_rows=min(4, triton.next_power_of_2(hidden)),
        down_cols=min(128, triton.next_power_of_2(intermediate)),
    )


# (H, I, E, K) -> the largest token count at which warp decode beats the expert-centric path on an H200
# (BENCHMARKS.md, "crossover"). Unmeasured shapes: while each expert sees at most a couple of tokens on average.
CROSSOVER_TOKENS: dict[tuple[int, int, int, int], int] = {}


def warp_decode_max_tokens(hidden: int, intermediate: int, experts: int, top_k: int) -> int:
    measured = CROSSOVER_TOKENS.get((hidden, intermediate, experts, top_k))
    if measured is not None:
        return measured
    return max(1, 2 * experts // top_k)
