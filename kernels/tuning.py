"""Launch parameters of the MoE kernels (warp decode, the expert-centric grouped GEMMs) and the token count where
the dispatcher switches paths.

Measured values live in `warp_decode_configs.json` beside this file, written on the GPU by the tuners in bench/:
`python -m warpcode.bench.tune_warp_decode --write kernels/warp_decode_configs.json` ("configs",
"crossover") and `python -m warpcode.bench.tune_expert_centric --write kernels/warp_decode_configs.json`
("expert_centric"), see BENCHMARKS.md. Keys are "H,I,E,K" plus a token-count bucket; warp decode's entries for
MXFP8 weights are keyed "H,I,E,K,mx" (`--weights mxfp8`). Shapes that were never measured get a heuristic (MXFP8:
the bf16 config with twice the columns, the same bytes per tile).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import triton

from warpcode.kernels.launch import check_register_cap

CONFIG_FILE = Path(__file__).parent / "warp_decode_configs.json"
TOKEN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
# Prefill chunks are padded to these row counts (model_runtime/prefill_graphs.py): past 256 the projections and the
# experts' GEMMs do work in proportion to the padded rows, so they step by 64 to 512 and by 128 to 1,024.
PREFILL_BUCKETS = (16, 32, 64, 128, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024)
# The grouped GEMMs serve decode batches and prefill chunks.
GROUPED_GEMM_BUCKETS = tuple(sorted({*TOKEN_BUCKETS, *PREFILL_BUCKETS}))


def require_powers_of_two(config: object, names: tuple[str, ...]) -> None:
    """Raises ValueError naming the first of `names` whose value on the launch config is not a power of two."""
    for name in names:
        value = getattr(config, name)
        if value < 1 or value & (value - 1):
            raise ValueError(f"{type(config).__name__}.{name} must be a power of two, got {value}")


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
    # MXFP8 weights, fp16 intermediates: kernel 2 on tensor cores (kernels/mx_down.py), a program per routed slot
    # and block of down_rows output rows, down_cols of I per tile
    down_on_mma: bool = False
    down_max_registers: int | None = None  # kernel 2's cap a thread (maxnreg): more programs an SM, or spills
    # kernel 2 on tensor cores loads its first weight tile before its PDL wait (as on CUDA cores, always): earlier
    # bytes, or more registers held across the wait
    down_first_tile_early: bool = False

    def __post_init__(self) -> None:
        require_powers_of_two(
            self, ("gate_up_rows", "gate_up_cols", "down_rows", "down_cols", "gate_up_warps", "down_warps")
        )
        if self.gate_up_stages < 1 or self.down_stages < 1:
            raise ValueError("WarpDecodeConfig stages must be >= 1")
        if self.down_on_mma and (self.down_rows < 16 or self.down_cols < 32):
            raise ValueError(f"WarpDecodeConfig.down_on_mma needs down_rows >= 16 and down_cols >= 32, got {self}")
        if self.down_first_tile_early and not self.down_on_mma:
            raise ValueError(
                "WarpDecodeConfig.down_first_tile_early is an option of kernel 2 on tensor cores (down_on_mma)"
            )
        check_register_cap(self, "down_max_registers")


@dataclass(frozen=True)
class GroupedGemmConfig:
    """Tiles of the expert-centric path's grouped GEMMs (both use one config)."""

    block_m: int  # routed slots per block (each expert's slots are padded to a multiple of it)
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    max_registers: int | None = None  # a thread (maxnreg), both GEMMs: more programs an SM, or spills

    def __post_init__(self) -> None:
        require_powers_of_two(self, ("block_m", "block_n", "block_k", "num_warps"))
        if min(self.block_m, self.block_n, self.block_k) < 16:
            raise ValueError(f"GroupedGemmConfig blocks must be >= 16 (tl.dot), got {self}")
        if self.num_stages < 1:
            raise ValueError(f"GroupedGemmConfig.num_stages must be >= 1, got {self.num_stages}")
        check_register_cap(self, "max_registers")


# The config file's sections of launch configs, and the class of their entries.
CONFIG_SECTIONS = {"configs": WarpDecodeConfig, "expert_centric": GroupedGemmConfig}


def config_entry(config: WarpDecodeConfig | GroupedGemmConfig) -> dict:
    """The config's fields as the config file holds them: options left off (None, as no register cap, or False, as
    kernel 2 on CUDA cores) left out."""
    return {name: value for name, value in asdict(config).items() if value is not None and value is not False}


def shape_key(hidden: int, intermediate: int, experts: int, top_k: int, mx: bool = False) -> str:
    """ "H,I,E,K", with the suffix ",mx" for MXFP8-weight entries."""
    return f"{hidden},{intermediate},{experts},{top_k}" + (",mx" if mx else "")


def token_bucket(tokens: int, buckets: tuple[int, ...] = TOKEN_BUCKETS) -> int:
    return next((bucket for bucket in buckets if tokens <= bucket), buckets[-1])


def update_config_file(path: Path, section: str, key: str, entries: object, replace: bool) -> None:
    """Writes `entries` under data[section][key] of the JSON config file at `path` (created if missing), replacing
    what the key held or merging into it; the file's other sections and keys stay as they were."""
    data = json.loads(path.read_text()) if path.exists() else {}
    held = data.setdefault(section, {})
    if replace:
        held[key] = entries
    else:
        held.setdefault(key, {}).update(entries)
    write_config_file(path, data)


def write_config_file(path: Path, data: dict) -> None:
    """The config file's text: sorted keys, one space of indent (diffs stay small), created with its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


@functools.cache
def measured() -> dict:
    """{"configs": {shape_key: {bucket: config fields}}, "crossover": {shape_key: tokens}, "expert_centric":
    {shape_key: {bucket: config fields}}} from the config file (or the file named by WARPCODE_WARP_DECODE_CONFIGS)."""
    path = Path(os.environ.get("WARPCODE_WARP_DECODE_CONFIGS") or CONFIG_FILE)
    if not path.exists():
        return {"configs": {}, "crossover": {}, "expert_centric": {}}
    data = json.loads(path.read_text())
    for section, config_class in CONFIG_SECTIONS.items():
        known = {field.name for field in fields(config_class)}
        for shape, buckets in data.get(section, {}).items():
            for bucket, values in buckets.items():
                if set(values) - known:
                    raise ValueError(
                        f"{path}: {section} {shape} / {bucket} has unknown fields {sorted(set(values) - known)}"
                    )
    return {section: data.get(section, {}) for section in ("configs", "crossover", "expert_centric")}


def warp_decode_config(
    hidden: int, intermediate: int, experts: int, top_k: int, tokens: int, mx: bool = False
) -> WarpDecodeConfig:
    """The measured entry of the token count's bucket (MXFP8 weights: the shape's ",mx" entries), else a heuristic."""
    return _config_for_bucket(hidden, intermediate, experts, top_k, token_bucket(tokens), mx)


@functools.cache  # asked for every MoE layer of every decode step: look each shape and bucket up once
def _config_for_bucket(
    hidden: int, intermediate: int, experts: int, top_k: int, bucket: int, mx: bool = False
) -> WarpDecodeConfig:
    tuned = measured()["configs"].get(shape_key(hidden, intermediate, experts, top_k, mx), {})
    values = tuned.get(str(bucket))
    if values is not None:
        return WarpDecodeConfig(**values)
    if mx:  # the bf16 tile of the same bytes: twice the fp8 columns, whole scale groups (>= 32), no wider than K
        plain = _config_for_bucket(hidden, intermediate, experts, top_k, bucket)
        return replace(
            plain,
            gate_up_cols=max(32, min(2 * plain.gate_up_cols, triton.next_power_of_2(hidden))),
            down_cols=max(32, min(2 * plain.down_cols, triton.next_power_of_2(intermediate))),
        )
    return WarpDecodeConfig(
        gate_up_rows=min(8, triton.next_power_of_2(intermediate)),
        gate_up_cols=min(512, triton.next_power_of_2(hidden)),
        down_rows=min(4, triton.next_power_of_2(hidden)),
        down_cols=min(128, triton.next_power_of_2(intermediate)),
    )


@functools.cache
def warp_decode_max_tokens(hidden: int, intermediate: int, experts: int, top_k: int, mx: bool = False) -> int:
    """The largest token count at which warp decode beats the expert-centric path: measured where the config
    file has the shape (MXFP8 weights: its ",mx" entry, else the bf16 one), else while each expert sees about two
    tokens on average."""
    crossovers = measured()["crossover"]
    for key in (shape_key(hidden, intermediate, experts, top_k, mx), shape_key(hidden, intermediate, experts, top_k)):
        if key in crossovers:
            return int(crossovers[key])
    return max(1, 2 * experts // top_k)


def grouped_gemm_config(
    hidden: int, intermediate: int, experts: int, top_k: int, tokens: int, mx: bool = False
) -> GroupedGemmConfig:
    """The measured entry of the token count's bucket (GROUPED_GEMM_BUCKETS, prefill chunks included), else by the
    slots each expert sees on average (more: taller blocks). Past the largest bucket the heuristic decides. MXFP8
    weights (mx) have entries of their own (key suffix ",mx"; `tune_expert_centric --weights mxfp8`), else bf16's
    tiles with block_k at least one scale group (32)."""
    if tokens <= GROUPED_GEMM_BUCKETS[-1]:
        bucket = token_bucket(tokens, GROUPED_GEMM_BUCKETS)
        tuned = _measured_grouped_gemm_config(hidden, intermediate, experts, top_k, bucket, mx)
        if tuned is None and mx:
            tuned = _measured_grouped_gemm_config(hidden, intermediate, experts, top_k, bucket)
        if tuned is not None:
            return replace(tuned, block_k=max(32, tuned.block_k)) if mx else tuned
    slots_per_expert = tokens * top_k / experts  # the heuristic's block_k (>= 64) holds whole MX scale groups
    if slots_per_expert <= 16:
        return GroupedGemmConfig(block_m=16, block_n=64, block_k=128, num_warps=4, num_stages=4)
    if slots_per_expert <= 64:
        return GroupedGemmConfig(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=4)
    return GroupedGemmConfig(block_m=64, block_n=128, block_k=64, num_warps=8, num_stages=3)


@functools.cache
def _measured_grouped_gemm_config(
    hidden: int, intermediate: int, experts: int, top_k: int, bucket: int, mx: bool = False
) -> GroupedGemmConfig | None:
    values = measured()["expert_centric"].get(shape_key(hidden, intermediate, experts, top_k, mx), {}).get(str(bucket))
    return None if values is None else GroupedGemmConfig(**values)
