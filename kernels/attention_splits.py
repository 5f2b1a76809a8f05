"""How decode attention cuts a row's keys among programs: tile, warps, pipeline stages and the number of splits.

Two shapes of split, chosen per launch from (B, Hkv, S) and the SM count:
- one-tile splits: where B * Hkv * cdiv(S, tile) programs fit on the SMs at once, one program per SM at most, each
  split is one tile of 128 keys (256 where 128 would not fit). Every program fetches all its keys and values
  before its `gdc_wait`, under PDL while the kernels before it still run: the RoPE kernel lets attention launch as
  soon as it starts (`fetches_before_wait` tells decode_step so), so the keys stream during the q/k/v projection.
  Only the newest key, which the RoPE kernel writes, is read again after the wait.
- streaming splits: otherwise (larger batches, longer caches) about PROGRAMS_PER_SM programs per SM, each looping
  over 64-key tiles, the first fetched before the wait and the others pipelined.
The settings are read at every launch (the sweep scripts and tests change them); a captured graph keeps its own.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton

from warpcode.kernels.launch import sm_count

# One-tile splits. H200, qwen3 batch 1, the decode step in its CUDA graph (experiments/sweep_decode_variants.py), with
# the RoPE kernel letting attention launch early: 128 keys x 8 warps 2.41-2.42 ms per step at 512 keys (streaming
# splits 2.45-2.47; 256-key tiles 2.45-2.50), 256 keys x 8 warps 2.63-2.64 ms at 8K (streaming 2.81-2.82; 128-key
# tiles, two per split, 2.70).
ONE_TILE_BLOCKS = (128, 256)  # keys per tile, the first whose splits fit one program per SM
ONE_TILE_WARPS = 8  # 4: 2.55 / 3.16 ms at 512 / 8K keys (1.4 KB of spills at 256 keys); 16: 2.63 / 2.71
# Streaming splits.
BLOCK_N = 64  # keys per iteration (D = 128: one 16 KB bf16 K tile and one V tile per step)
NUM_WARPS = 2  # measured on the H200 (batch 1): 5.0 us at 512 tokens, 14.3 at 8K, against 5.6 and 16.2 with 4
NUM_STAGES = 2
PROGRAMS_PER_SM = 2  # the split heuristic aims at about this many programs per SM


class Launch(NamedTuple):
    block_n: int
    num_warps: int
    num_stages: int
    num_splits: int


sms = sm_count  # the SMs the splits fill (tests set it)


def default_num_splits(batch: int, kv_heads: int, slots: int, block_n: int, sm_count: int) -> int:
    """Streaming splits: about PROGRAMS_PER_SM * sm_count programs, at most one split per BLOCK_N tile of S, and a
    whole number of tiles per split, so that no split is empty when a row is full. Two programs per SM rather than
    more: every split's partials are read back by the merge, so more splits lengthen it (serially per group on the
    one-launch path)."""
    tiles = triton.cdiv(slots, block_n)
    wanted = max(1, min(tiles, PROGRAMS_PER_SM * sm_count // (batch * kv_heads)))
    return triton.cdiv(tiles, triton.cdiv(tiles, wanted))


def one_tile_block(batch: int, kv_heads: int, slots: int, sm_count: int) -> int | None:
    """The first tile of ONE_TILE_BLOCKS whose one-tile splits fit one program per SM, if any does."""
    return next((b for b in ONE_TILE_BLOCKS if batch * kv_heads * triton.cdiv(slots, b) <= sm_count), None)


def launch_config(batch: int, kv_heads: int, slots: int, sm_count: int, num_splits: int | None) -> Launch:
    """One-tile splits where they fit, unless the caller sets the split count; else streaming splits
    (default_num_splits of BLOCK_N tiles, or the caller's count)."""
    block_n = None if num_splits is not None else one_tile_block(batch, kv_heads, slots, sm_count)
    if block_n is not None:
        return Launch(block_n, ONE_TILE_WARPS, 1, triton.cdiv(slots, block_n))
    if num_splits is None:
        num_splits = default_num_splits(batch, kv_heads, slots, BLOCK_N, sm_count)
    return Launch(BLOCK_N, NUM_WARPS, NUM_STAGES, num_splits)


def fetches_before_wait(batch: int, kv_heads: int, slots: int, device: torch.device) -> bool:
    """Whether decode attention runs one-tile splits for these shapes: each program then fetches all its keys and
    values before its wait, so the kernel before it gains from letting it launch early (see rope_cache)."""
    return one_tile_block(batch, kv_heads, slots, sms(device)) is not None
