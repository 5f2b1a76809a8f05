"""Launch parameters for the warp-decode kernels and the token count where the dispatcher switches paths.

Measured values live in `warp_decode_configs.json` beside this file, written on the GPU by
`python -m warpcode.kernels.tune_warp_decode --write kernels/warp_decode_configs.json` (see BENCHMARKS.md).
Keys are "H,I,E,K" plus a token-count bucket; shapes that were never measured get a heuristic.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, fields
from pathlib import Path

import triton

CONFIG_FILE = Path(__file__).parent / "warp_decode_configs.json"
TOKEN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


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


def shape_key(hidden: int, intermediate: int, experts: int, top_k: int) -> str:
    return f"{hidden},{intermediate},{experts},{top_k}"


def token_bucket(tokens: int) -> int:
    return next((bucket for bucket in TOKEN_BUCKETS if tokens <= bucket), TOKEN_BUCKETS[-1])


@functools.cache
def measured() -> dict:
    """{"configs": {shape_key: {bucket: config fields}}, "crossover": {shape_key: tokens}} from the config file
    (or from the file named by WARPCODE_WARP_DECODE_CONFIGS)."""
    path = Path(os.environ.get("WARPCODE_WARP_DECODE_CONFIGS") or CONFIG_FILE)
    if not path.exists():
        return {"configs": {}, "crossover": {}}
    data = json.loads(path.read_text())
    known = {field.name for field in fields(WarpDecodeConfig)}
    for shape, buckets in data.get("configs", {}).items():
        for bucket, values in buckets.items():
            if set(values) - known:
                raise ValueError(f"{path}: config {shape} / {bucket} has unknown fields {sorted(set(values) - known)}")
    return {"configs": data.get("configs", {}), "crossover": data.get("crossover", {})}


def warp_decode_config(hidden: int, intermediate: int, experts: int, top_k: int, tokens: int) -> WarpDecodeConfig:
    return _config_for_bucket(hidden, intermediate, experts, top_k, token_bucket(tokens))


@functools.cache  # asked for every MoE layer of every decode step: look each shape and bucket up once
def _config_for_bucket(hidden: int, intermediate: int, experts: int, top_k: int, bucket: int) -> WarpDecodeConfig:
    tuned = measured()["configs"].get(shape_key(hidden, intermediate, experts, top_k), {})
    values = tuned.get(str(bucket))
    if values is not None:
        return WarpDecodeConfig(**values)
    return WarpDecodeConfig(
        gate_up_rows=min(8, triton.next_power_of_2(intermediate)),
        gate_up_cols=min(512, triton.next_power_of_2(hidden)),
        down_rows=min(4, triton.next_power_of_2(hidden)),
        down_cols=min(128, triton.next_power_of_2(intermediate)),
    )


@functools.cache
def warp_decode_max_tokens(hidden: int, intermediate: int, experts: int, top_k: int) -> int:
    """The largest token count at which warp decode beats the expert-centric path: measured where the config
    file has the shape, else while each expert sees about two tokens on average."""
    crossover = measured()["crossover"].get(shape_key(hidden, intermediate, experts, top_k))
    if crossover is not None:
        return int(crossover)
    return max(1, 2 * experts // top_k)
