"""How decode attention cuts the keys among programs (kernels/attention_splits.py), at the H200's 132 SMs."""

import torch

from warpcode.kernels import attention_splits as splits


def test_default_num_splits():
    """H200 (132 SMs): about 2 programs per SM, never more splits than 64-key tiles, whole tiles per split."""
    for batch, slots, expected in [(1, 8192, 64), (8, 8192, 8), (32, 8192, 2), (1, 512, 8), (256, 8192, 1)]:
        num_splits = splits.default_num_splits(batch, 4, slots, 64, 132)
        assert num_splits == expected, (batch, slots, num_splits)
        tiles = -(-slots // 64)
        per_split = -(-tiles // num_splits)
        assert per_split * (num_splits - 1) < tiles <= per_split * num_splits  # a full row leaves no split empty
    assert splits.default_num_splits(1, 1, 5, 64, 1) == 1


def test_launch_config():
    """H200 (132 SMs), qwen3's 4 KV heads: one-tile splits of 128 keys where they fit one program per SM, else of
    256; streaming 64-key tiles past that, and whenever the caller sets the split count."""
    one_tile = {(1, 768): (128, 6), (1, 8448): (256, 33), (4, 1024): (128, 8), (8, 768): (256, 3)}
    for (batch, slots), (block_n, num_splits) in one_tile.items():
        expected = (block_n, splits.DecodeAttentionSettings().one_tile_warps, 1, num_splits)
        assert splits.launch_config(batch, 4, slots, 132, None) == expected
        assert splits.fetches_before_wait(batch, 4, slots, torch.device("cpu")) is False  # one SM off the GPU
        assert splits.one_tile_block(batch, 4, slots, 132) == block_n
    for batch, slots in [(1, 16384), (32, 768), (8, 8448)]:
        expected = splits.default_num_splits(batch, 4, slots, 64, 132)
        assert splits.launch_config(batch, 4, slots, 132, None) == (64, 2, 2, expected)
        assert splits.one_tile_block(batch, 4, slots, 132) is None
    assert splits.launch_config(1, 4, 768, 132, 5) == (64, 2, 2, 5)


def test_the_rope_kernel_lets_attention_start_early_exactly_for_one_tile_splits():
    cuda = torch.device("cuda", 0)  # never asked for its SM count: the call says 132
    assert splits.fetches_before_wait(1, 4, 8448, cuda, sms=132) and splits.fetches_before_wait(
        8, 4, 768, cuda, sms=132
    )
    assert not splits.fetches_before_wait(1, 4, 16384, cuda, sms=132)
    assert not splits.fetches_before_wait(32, 4, 768, cuda, sms=132)
