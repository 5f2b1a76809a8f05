"""The expert-centric path's alignment kernel (CPU: TRITON_INTERPRET=1): every slot lands exactly once in its
expert's group, in slot order, groups follow expert order from block boundaries, and blocks name their experts."""

import pytest
import torch

from warpcode.kernels.expert_centric import align_slots_by_expert


def check_alignment(topk_ids: torch.Tensor, experts: int, block_m: int) -> None:
    sorted_slots, block_expert = align_slots_by_expert(topk_ids, experts, block_m)
    flat = topk_ids.reshape(-1).long()
    slots = flat.numel()
    counts = torch.bincount(flat, minlength=experts)
    blocks_per_expert = (counts + block_m - 1) // block_m
    assert sorted_slots.shape == (slots + experts * (block_m - 1),)
    assert block_expert.shape == (sorted_slots.numel() // block_m,)
    expected_experts = torch.repeat_interleave(torch.arange(experts), blocks_per_expert)
    used = expected_experts.numel()
    assert block_expert[:used].tolist() == expected_experts.tolist()
    assert (block_expert[used:] == experts).all(), "blocks past the last group must name no expert"
    real = sorted_slots[sorted_slots != slots]
    assert sorted(real.tolist()) == list(range(slots)), "every slot exactly once"
    assert (sorted_slots[used * block_m :] == slots).all()
    groups = sorted_slots[: used * block_m].view(used, block_m)
    for block, expert in enumerate(block_expert[:used].tolist()):
        members = groups[block][groups[block] != slots]
        assert (flat[members] == expert).all(), f"block {block} holds slots of another expert"
    group_starts = torch.cumsum(blocks_per_expert, 0) - blocks_per_expert
    for expert in range(experts):  # the padding of a group comes after its slots
        first = int(group_starts[expert]) * block_m
        group = sorted_slots[first : first + int(blocks_per_expert[expert]) * block_m]
        assert (group[: int(counts[expert])] != slots).all() and (group[int(counts[expert]) :] == slots).all()
        members = group[: int(counts[expert])]
        assert (members[1:] > members[:-1]).all(), f"expert {expert}'s slots are not in slot order"


@pytest.mark.parametrize("tokens, top_k, experts, block_m", [(1, 1, 1, 16), (3, 2, 5, 4), (33, 3, 6, 16), (7, 8, 8, 2)])
def test_random_routing(tokens, top_k, experts, block_m):
    generator = torch.Generator().manual_seed(tokens)
    ids = torch.stack([torch.randperm(experts, generator=generator)[:top_k] for _ in range(tokens)])
    check_alignment(ids, experts, block_m)


def test_every_slot_on_one_expert_and_empty_experts():
    check_alignment(torch.full((40, 1), 3), 7, 16)


def test_more_slots_than_one_program_tile_and_int32_ids():
    # 1,300 slots walk the kernel's 1,024-slot tiles twice; 130 experts pad the expert axis to 256.
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 130, (650, 2), generator=generator, dtype=torch.int32)
    check_alignment(ids, 130, 8)


@pytest.mark.slow
def test_several_sub_tiles_a_program():
    # 5,000 slots: 32 programs of 192 slots, each ranking three 64-slot sub-tiles after the ones before it.
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 128, (625, 8), generator=generator)
    check_alignment(ids, 128, 32)
