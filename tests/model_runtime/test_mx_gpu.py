"""MXFP8 weights on a CUDA device: quantised on the device as they load (the same bits as the CPU definition), the
decode step's fused paths (GEMV prologue/epilogue, o_proj + router fold, warp decode) and CUDA graphs on MX weights
agree with the cache-free forward, and a real-shape random MX model fits in about its own size."""

from __future__ import annotations

import pytest
import torch

from warpcode.kernels import MXTensor
from warpcode.model_runtime import load, load_random
from warpcode.model_runtime.mx_weights import named_weights

pytestmark = pytest.mark.gpu


def greedy_without_cache(engine, prompt: list[int], new_tokens: int) -> list[int]:
    ids = list(prompt)
    for _ in range(new_tokens):
        ids.append(int(engine.logits([ids])[0, -1].argmax()))
    return ids[len(prompt) :]


def test_mx_weights_load_to_the_same_bits_on_cuda(hf_checkpoints):
    path = hf_checkpoints["qwen3_moe"][1]
    cpu = dict(named_weights(load(path, device="cpu", dtype=torch.float32, weights="mxfp8", show_progress=False).model))
    gpu = dict(
        named_weights(load(path, device="cuda", dtype=torch.float32, weights="mxfp8", show_progress=False).model)
    )
    for name, weight in cpu.items():
        if isinstance(weight, MXTensor):
            assert gpu[name].is_cuda
            assert torch.equal(gpu[name].data.view(torch.uint8).cpu(), weight.data.view(torch.uint8)), name
            assert torch.equal(gpu[name].scales.cpu(), weight.scales), name


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe", "mixtral"])
def test_mx_greedy_on_cuda_equals_cache_free_forward(model_type, hf_checkpoints):
    """fp32 activations: decode (GEMV, o_proj + router fold at one row, warp decode, graphs) and prefill (graphs)
    against the full forward (linear_mx, expert-centric), all on the same MX weights."""
    engine = load(
        hf_checkpoints[model_type][1], device="cuda", dtype=torch.float32, weights="mxfp8", show_progress=False
    )
    try:
        for prompt in ([3, 17, 29, 5, 88, 41], [7, 7, 2]):
            assert engine.generate(prompt, 16, stop_token_ids=[]) == greedy_without_cache(engine, prompt, 16)
        prompts = [[5, 9, 2], [7, 1, 8, 8, 3, 4, 6, 0, 2, 11], [3, 3, 4, 5, 6]]
        batched = engine.generate_batch(prompts, 10, stop_token_ids=[])
        assert batched == [greedy_without_cache(engine, p, 10) for p in prompts]
    finally:
        engine.shutdown()


def test_mx_cuda_logits_match_cpu(hf_checkpoints):
    path = hf_checkpoints["qwen3_moe"][1]
    cpu = load(path, device="cpu", dtype=torch.float32, weights="mxfp8", show_progress=False)
    gpu = load(path, device="cuda", dtype=torch.float32, weights="mxfp8", show_progress=False)
    for shape in ((4, 16), (1, 1), (3, 2)):
        ids = torch.randint(0, 128, shape, generator=torch.Generator().manual_seed(1))
        expected = cpu.logits(ids)
        assert (gpu.logits(ids).cpu() - expected).norm() / expected.norm() < 1e-4
    bf16 = load(path, device="cuda", dtype=torch.bfloat16, weights="mxfp8", show_progress=False)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(2))
    expected = cpu.logits(ids)
    assert (bf16.logits(ids).cpu() - expected).norm() / expected.norm() < 5e-2


def test_real_shape_random_mx_model_peaks_near_its_size():
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    engine = load_random("qwen3-30b-a3b", device="cuda", weights="mxfp8")
    size = sum(w.nbytes for _, w in named_weights(engine.model))
    peak = torch.cuda.max_memory_allocated() - before
    assert isinstance(engine.model.model.layers[0].mlp.experts.w13, MXTensor)
    assert size < 34 * 2**30  # ~31 GB of MX weights and bf16 embeddings, LM head, routers, norms (bf16: ~61 GB)
    assert peak < size + 2**30, (peak, size)  # quantised one expert / one tensor at a time
    try:
        tokens = engine.generate([1, 2, 3, 4], 8, stop_token_ids=[])
        assert len(tokens) == 8
    finally:
        engine.shutdown()
