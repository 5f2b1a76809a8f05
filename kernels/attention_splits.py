"""How decode attention cuts a row's keys among programs: tile, warps, pipeline stages and the number of splits.

Two shapes of split, chosen per launch from (B, Hkv, S) and the SM count:
- one-tile splits: where B * Hkv * cdiv(S, tile) programs fit on the SMs at once, one program per SM at most, each
  split is one tile of one_tile_blocks[0] keys (the next where it would not fit). Every program fetches all its keys
  and values before its `gdc_wait`, under PDL while the kernels before it still run: the RoPE kernel lets attention
  launch as soon as it starts (`fetches_before_wait` tells decode_step so), so the keys stream during the q/k/v
  projection. Only the newest key, which the RoPE kernel writes, is read again after the wait.
- streaming splits: otherwise (larger batches, longer caches) about programs_per_sm programs per SM, each looping
  over block_n-key tiles, the first fetched before the wait and the others pipelined.
The settings are the device's measured "decode_attention" section (kernels/tuning.py), read once per process;
tests and experiments pass a DecodeAttentionSettings of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import triton

from warpcode.kernels.launch import sm_count
from warpcode.kernels.tuning import TunedTables, kernel_settings


@dataclass(frozen=True)
class DecodeAttentionSettings:
    """The defaults are the heuristic choices for devices without measurements (as measured on the H200)."""

    one_tile_blocks: tuple[int, ...] = (128, 256)  # keys per tile, the first whose splits fit one program per SM
    one_tile_warps: int = 8  # fewer spill at 256-key tiles
    # Streaming splits.
    block_n: int = 64  # keys per iteration (D = 128: one 16 KB bf16 K tile and one V tile per step)
    num_warps: int = 2
    num_stages: int = 2
    programs_per_sm: int = 2  # the split heuristic aims at about this many programs per SM
    # The merge: from this many splits on a merge kernel over (row, query head) follows the split kernel (more
    # programs share the merge); below it the last program of each (row, KV head) merges in the same launch.
    merge_kernel_min_splits: int = 33
    merge_elements: int = 8192  # partial-accumulator elements (heads x splits x D) a merge program reads per step
    merge_warps: int = 4

    def __post_init__(self) -> None:
        object.__setattr__(self, "one_tile_blocks", tuple(self.one_tile_blocks))  # a list in the data file


def attention_settings(tables: TunedTables | None = None) -> DecodeAttentionSettings:
    return kernel_settings(DecodeAttentionSettings, "decode_attention", tables)


class Launch(NamedTuple):
    block_n: int
    num_warps: int
    num_stages: int
    num_splits: int


def default_num_splits(
    batch: int, kv_heads: int, slots: int, block_n: int, sm_count: int, programs_per_sm: int | None = None
) -> int:
    """Streaming splits: about programs_per_sm * sm_count programs (the settings' by default), at most one split per
    block_n tile of S, and a whole number of tiles per split, so that no split is empty when a row is full. Two
    programs per SM rather than more: every split's partials are read back by the merge, so more splits lengthen it
    (serially per group on the one-launch path)."""
    per_sm = programs_per_sm or attention_settings().programs_per_sm
    tiles = triton.cdiv(slots, block_n)
    wanted = max(1, min(tiles, per_sm * sm_count // (batch * kv_heads)))
    return triton.cdiv(tiles, triton.cdiv(tiles, wanted))


def one_tile_block(
    batch: int, kv_heads: int, slots: int, sm_count: int, settings: DecodeAttentionSettings | None = None
) -> int | None:
    """The first tile of one_tile_blocks whose one-tile splits fit one program per SM, if any does."""
    blocks = (settings or attention_settings()).one_tile_blocks
    return next((b for b in blocks if batch * kv_heads * triton.cdiv(slots, b) <= sm_count), None)


def launch_config(
    batch: int,
    kv_heads: int,
    slots: int,
    sm_count: int,
    num_splits: int | None,
    settings: DecodeAttentionSettings | None = None,
) -> Launch:
    """One-tile splits where they fit, unless the caller sets the split count; else streaming splits
    (default_num_splits of block_n tiles, or the caller's count)."""
    settings = settings or attention_settings()
    block_n = None if num_splits is not None else one_tile_block(batch, kv_heads, slots, sm_count, settings)
    if block_n is not None:
        return Launch(block_n, settings.one_tile_warps, 1, triton.cdiv(slots, block_n))
    if num_splits is None:
        num_splits = default_num_splits(batch, kv_heads, slots, settings.block_n, sm_count, settings.programs_per_sm)
    return Launch(settings.block_n, settings.num_warps, settings.num_stages, num_splits)


def fetches_before_wait(batch: int, kv_heads: int, slots: int, device: torch.device, sms: int | None = None) -> bool:
    """Whether decode attention runs one-tile splits for these shapes on `sms` SMs (default: the device's): each
    program then fetches all its keys and values before its wait, so the kernel before it gains from letting it
    launch early (see rope_cache)."""
    return one_tile_block(batch, kv_heads, slots, sm_count(device) if sms is None else sms) is not None
