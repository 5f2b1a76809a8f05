"""Tuned launch parameters: one data file per device, the lookups that read it, and the MoE kernels' configs.

A device's measured tables live in `configs/<device name>.json` beside this file, the name as
`torch.cuda.get_device_name()` gives it with spaces as underscores (vLLM's rule): `configs/NVIDIA_H200.json`.
Each kernel reads its own section (TunedTables.section): "warp_decode" and "warp_decode_crossover", written by
`python -m warpcode.bench.tune_warp_decode --write FILE`; "expert_centric", by `python -m
warpcode.bench.tune_expert_centric --write FILE`; "gemv" and "gemv_mx" (kernels/gemv.py), "mx_linear"
(kernels/mx_linear.py), "decode_attention" (kernels/attention_splits.py), "prefill_attention", "route" and
"o_proj_router" (their kernels), measured by `python -m warpcode.bench.gemv` and the sweeps of experiments/ (see
BENCHMARKS.md). Keys of the MoE sections are "H,I,E,K" plus a token-count bucket, with the suffix ",mx" for MXFP8
weights. Shapes and devices without an entry get each kernel's heuristic (MXFP8 warp decode: the bf16 config with
twice the columns, the same bytes per tile).

The file is read once per process, for the device the process runs on; WARPCODE_TUNED_CONFIG_FOLDER names another
folder of such files (a variant to measure, as experiments/config_variant.py writes). A GPU without a file gets the
heuristics and one warning; off the GPU and in Triton's CPU interpreter there is nothing to tune: the heuristics,
silently. Tests and experiments pass a TunedTables (load_tables) explicitly instead.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import torch
import triton

from warpcode.kernels.launch import INTERPRETER, check_register_cap

CONFIG_FOLDER = Path(__file__).parent / "configs"
FOLDER_VARIABLE = "WARPCODE_TUNED_CONFIG_FOLDER"
TUNE_COMMAND = "python -m warpcode.bench.tune_warp_decode --write FILE (and the other tuners in warpcode.bench)"
TOKEN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
# Prefill chunks are padded to these row counts (model_runtime/prefill_graphs.py): past 256 the projections and the
# experts' GEMMs do work in proportion to the padded rows, so they step by 64 to 512 and by 128 to 1,024.
PREFILL_BUCKETS = (16, 32, 64, 128, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024)
# The grouped GEMMs serve decode batches and prefill chunks.
GROUPED_GEMM_BUCKETS = tuple(sorted({*TOKEN_BUCKETS, *PREFILL_BUCKETS}))

logger = logging.getLogger(__name__)
Config = TypeVar("Config")


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: the lookups' caches key on the tables
class TunedTables:
    """One device's measured tables: {section: entries} as the data file holds them."""

    path: Path | None = None  # None: no file (the heuristics everywhere)
    sections: dict = field(default_factory=dict)

    def section(self, name: str) -> dict:
        return self.sections.get(name, {})


NO_TABLES = TunedTables()


def device_file_name(device_name: str) -> str:
    """ "NVIDIA H200" -> "NVIDIA_H200.json"."""
    return device_name.replace(" ", "_") + ".json"


def load_tables(path: Path) -> TunedTables:
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a tuned-config file holds an object of sections, got {type(data).__name__}")
    return TunedTables(Path(path), data)


@functools.cache  # once per process: a launch never reads the file or the environment
def device_tables() -> TunedTables:
    """The tables of the GPU this process runs on (module docstring)."""
    if INTERPRETER or not torch.cuda.is_available():
        return NO_TABLES
    return tables_for(torch.cuda.get_device_name(), os.environ.get(FOLDER_VARIABLE))


def tables_for(device_name: str, named_folder: str | None = None) -> TunedTables:
    """The tables of the named device from the named folder (None: the shipped files); a device without a file
    gets none, and a warning."""
    path = Path(named_folder or CONFIG_FOLDER) / device_file_name(device_name)
    if path.exists():
        return load_tables(path)
    if named_folder:  # a variant that does not exist would silently measure the heuristics
        raise FileNotFoundError(
            f"{FOLDER_VARIABLE}={named_folder} holds no {path.name}: write it, or unset the variable"
        )
    logger.warning(
        "no tuned launch parameters for this GPU (%s): heuristics everywhere; tune with %s", path, TUNE_COMMAND
    )
    return NO_TABLES


def entry(cls: type[Config], section: str, key: str | None, values: dict, tables: TunedTables) -> Config:
    """cls(**values), a field it lacks or a bad value named with the file, section and key."""
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        where = " / ".join(part for part in (section, key) if part)
        raise ValueError(f"{tables.path}: {where}: {error}") from None


@functools.cache
def kernel_settings(cls: type[Config], section: str, tables: TunedTables | None = None) -> Config:
    """A kernel's launch settings: cls's defaults (the heuristic choices) with the section's measured values."""
    tables = tables or device_tables()
    return entry(cls, section, None, tables.section(section), tables)


@functools.cache
def bucket_entry(cls: type[Config], section: str, key: str, bucket: int, tables: TunedTables) -> Config | None:
    """The section's entry for a shape key and a bucket, if measured."""
    values = tables.section(section).get(key, {}).get(str(bucket))
    return None if values is None else entry(cls, section, f"{key} / {bucket}", values, tables)


def shape_key(hidden: int, intermediate: int, experts: int, top_k: int, mx: bool = False) -> str:
    """ "H,I,E,K", with the suffix ",mx" for MXFP8-weight entries."""
    return f"{hidden},{intermediate},{experts},{top_k}" + (",mx" if mx else "")


def token_bucket(tokens: int, buckets: tuple[int, ...] = TOKEN_BUCKETS) -> int:
    return next((bucket for bucket in buckets if tokens <= bucket), buckets[-1])


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


def warp_decode_config(
    hidden: int,
    intermediate: int,
    experts: int,
    top_k: int,
    tokens: int,
    mx: bool = False,
    tables: TunedTables | None = None,
) -> WarpDecodeConfig:
    """The measured entry of the token count's bucket (MXFP8 weights: the shape's ",mx" entries), else a heuristic."""
    return _config_for_bucket(hidden, intermediate, experts, top_k, token_bucket(tokens), mx, tables or device_tables())


@functools.cache  # asked for every MoE layer of every decode step: look each shape and bucket up once
def _config_for_bucket(
    hidden: int, intermediate: int, experts: int, top_k: int, bucket: int, mx: bool, tables: TunedTables
) -> WarpDecodeConfig:
    key = shape_key(hidden, intermediate, experts, top_k, mx)
    tuned = bucket_entry(WarpDecodeConfig, "warp_decode", key, bucket, tables)
    if tuned is not None:
        return tuned
    if mx:  # the bf16 tile of the same bytes: twice the fp8 columns, whole scale groups (>= 32), no wider than K
        plain = _config_for_bucket(hidden, intermediate, experts, top_k, bucket, False, tables)
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
def warp_decode_max_tokens(
    hidden: int, intermediate: int, experts: int, top_k: int, mx: bool = False, tables: TunedTables | None = None
) -> int:
    """The largest token count at which warp decode beats the expert-centric path: measured where the tables
    have the shape (MXFP8 weights: its ",mx" entry, else the bf16 one), else while each expert sees about two
    tokens on average."""
    crossovers = (tables or device_tables()).section("warp_decode_crossover")
    for key in (shape_key(hidden, intermediate, experts, top_k, mx), shape_key(hidden, intermediate, experts, top_k)):
        if key in crossovers:
            return int(crossovers[key])
    return max(1, 2 * experts // top_k)


def grouped_gemm_config(
    hidden: int,
    intermediate: int,
    experts: int,
    top_k: int,
    tokens: int,
    mx: bool = False,
    tables: TunedTables | None = None,
) -> GroupedGemmConfig:
    """The measured entry of the token count's bucket (GROUPED_GEMM_BUCKETS, prefill chunks included), else by the
    slots each expert sees on average (more: taller blocks). Past the largest bucket the heuristic decides. MXFP8
    weights (mx) have entries of their own (key suffix ",mx"; `tune_expert_centric --weights mxfp8`), else bf16's
    tiles with block_k at least one scale group (32)."""
    if tokens <= GROUPED_GEMM_BUCKETS[-1]:
        tables = tables or device_tables()
        bucket = token_bucket(tokens, GROUPED_GEMM_BUCKETS)
        own, plain = (
            shape_key(hidden, intermediate, experts, top_k, mx),
            shape_key(hidden, intermediate, experts, top_k),
        )
        for key in (own, plain) if mx else (own,):
            tuned = bucket_entry(GroupedGemmConfig, "expert_centric", key, bucket, tables)
            if tuned is not None:
                return replace(tuned, block_k=max(32, tuned.block_k)) if mx else tuned
    slots_per_expert = tokens * top_k / experts  # the heuristic's block_k (>= 64) holds whole MX scale groups
    if slots_per_expert <= 16:
        return GroupedGemmConfig(block_m=16, block_n=64, block_k=128, num_warps=4, num_stages=4)
    if slots_per_expert <= 64:
        return GroupedGemmConfig(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=4)
    return GroupedGemmConfig(block_m=64, block_n=128, block_k=64, num_warps=8, num_stages=3)
