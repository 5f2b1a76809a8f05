"""The same checkpoints on a CUDA device: weights load straight to the GPU and agree with the CPU run."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime import load

pytestmark = pytest.mark.gpu


def test_cuda_matches_cpu(hf_checkpoints):
    path = hf_checkpoints["qwen3_moe"][1]
    cpu = load(path, device="cpu", dtype=torch.float32, show_progress=False)
    gpu = load(path, device="cuda", dtype=torch.bfloat16, show_progress=False)
    assert gpu.model.model.layers[0].mlp.experts.w13.is_cuda
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    expected = cpu.logits(ids)
    error = (gpu.logits(ids).cpu() - expected).norm() / expected.norm()
    assert error < 5e-2  # bf16 weights and activations


def test_cuda_batch_equals_one_at_a_time(hf_checkpoints):
    engine = load(hf_checkpoints["mixtral"][1], device="cuda", dtype=torch.float32, show_progress=False)
    prompts = [[5, 9, 2], [7, 1, 8, 8, 3, 4, 6, 0, 2, 11], [3, 3, 4, 5, 6]]
    assert engine.generate_batch(prompts, 12, stop_token_ids=[]) == [
        engine.generate(p, 12, stop_token_ids=[]) for p in prompts
    ]


def test_cuda_float32_matches_cpu_on_both_moe_paths(hf_checkpoints):
    """Prefill (the expert-centric path, fp32 tensor-core products) and decode (warp decode) stay fp32-exact."""
    path = hf_checkpoints["qwen3_moe"][1]
    cpu = load(path, device="cpu", dtype=torch.float32, show_progress=False)
    gpu = load(path, device="cuda", dtype=torch.float32, show_progress=False)
    for shape in ((4, 16), (1, 1)):
        ids = torch.randint(0, 128, shape, generator=torch.Generator().manual_seed(1))
        expected = cpu.logits(ids)
        assert (gpu.logits(ids).cpu() - expected).norm() / expected.norm() < 1e-4
