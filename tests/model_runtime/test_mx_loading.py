"""load(weights="mxfp8"): the projections and experts quantised as the checkpoint is read, nothing else; logits equal
transformers' on the dequantised MX weights; generation through the engine; random MX weights."""

from __future__ import annotations

import re
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tests.model_runtime.mx_rounding import relative_error, with_mx_rounding
from warpcode.kernels import MXTensor, dequantize_mxfp8, quantize_mxfp8
from warpcode.model_runtime import CheckpointError, load, load_random
from warpcode.model_runtime.mx_weights import named_weights

VOCAB = 128  # checkpoints.py's tiny models
# our names of the weights stored in MXFP8 (mx_rounding.HF_MX: transformers' names of the same weights)
OURS_MX = re.compile(
    r"self_attn\.[qkvo]_proj\.weight$|mlp\.experts\.(w13|w2)$|mlp\.shared_expert\.(gate|up|down)_proj\.weight$|"
    r"mlp\.(gate|up|down)_proj\.weight$"
)


def test_mx_logits_equal_transformers_on_dequantised_weights(arch, hf_checkpoints):
    hf_model, path = hf_checkpoints[arch]
    engine = load(path, device="cpu", dtype=torch.float32, weights="mxfp8", show_progress=False)
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = with_mx_rounding(hf_model)(ids).logits
        unrounded = hf_model(ids).logits
    assert relative_error(engine.logits(ids), expected) < 1e-5
    assert relative_error(engine.logits(ids), unrounded) > 1e-4  # the MX rounding is there and visible


def test_exactly_the_listed_weights_are_mx(arch, hf_checkpoints):
    _, path = hf_checkpoints[arch]
    engine = load(path, device="cpu", dtype=torch.bfloat16, weights="mxfp8", show_progress=False)
    weights = dict(named_weights(engine.model))
    mx = {name for name, w in weights.items() if isinstance(w, MXTensor)}
    assert mx == {name for name in weights if OURS_MX.search(name)}
    assert any(name.endswith("experts.w13") for name in mx)
    plain = {name: w for name, w in weights.items() if name not in mx}
    assert all(w.dtype == torch.bfloat16 for w in plain.values())
    assert any(name.endswith("mlp.gate.weight") for name in plain)  # the routers
    assert "model.embed_tokens.weight" in plain


def test_mx_bits_are_the_checkpoint_tensors_quantised(hf_checkpoints):
    _, path = hf_checkpoints["qwen3_moe"]
    engine = load(path, device="cpu", dtype=torch.float32, weights="mxfp8", show_progress=False)
    layer = engine.model.model.layers[0]
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        up = f.get_tensor("model.layers.0.mlp.experts.3.up_proj.weight")
        o_proj = f.get_tensor("model.layers.0.self_attn.o_proj.weight")
    half = layer.mlp.experts.w13.shape[1] // 2
    for stored, source in ((layer.mlp.experts.w13[3, half:], up), (layer.self_attn.o_proj.weight, o_proj)):
        expected = quantize_mxfp8(source)
        assert torch.equal(stored.data.view(torch.uint8), expected.data.view(torch.uint8))
        assert torch.equal(stored.scales, expected.scales)


def greedy_without_cache(engine, prompt: list[int], new_tokens: int) -> list[int]:
    ids = list(prompt)
    for _ in range(new_tokens):
        ids.append(int(engine.logits([ids])[0, -1].argmax()))
    return ids[len(prompt) :]


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe"])
def test_mx_generate_equals_cache_free_greedy(model_type, hf_checkpoints):
    _, path = hf_checkpoints[model_type]
    engine = load(path, device="cpu", dtype=torch.float32, weights="mxfp8", show_progress=False)
    prompt = [3, 17, 29, 5, 88, 41]
    try:
        assert engine.generate(prompt, 12, stop_token_ids=[]) == greedy_without_cache(engine, prompt, 12)
        assert isinstance(engine.model.model.layers[0].self_attn.qkv_weight, MXTensor)  # decode fused them
    finally:
        engine.shutdown()


def test_random_mx_weights(tmp_path):
    engine = load_random("tiny", device="cpu", weights="mxfp8", seed=3)
    weights = dict(named_weights(engine.model))
    w13 = next(w for name, w in weights.items() if name.endswith("experts.w13"))
    assert isinstance(w13, MXTensor)
    values = dequantize_mxfp8(w13)
    assert values.abs().max() > 0 and 0.01 < values.std() < 0.03  # N(0, 0.02), every expert filled
    assert all(bool(dequantize_mxfp8(w13[e]).abs().amax() > 0) for e in range(w13.shape[0]))
    again = load_random("tiny", device="cpu", weights="mxfp8", seed=3)
    ids = torch.tensor([[1, 2, 3, 4]])
    assert torch.equal(engine.logits(ids), again.logits(ids))


def test_unknown_weights_format(hf_checkpoints):
    with pytest.raises(ValueError, match="unknown weights format 'fp4'"):
        load(hf_checkpoints["mixtral"][1], weights="fp4", show_progress=False)
    with pytest.raises(ValueError, match="unknown weights format 'fp4'"):
        load_random("tiny", weights="fp4")


@pytest.mark.parametrize("cached", [0, 20])
def test_mx_graph_ready_prefill_matches_a_cache_free_forward(cached):
    """prefill_graphs.run_layers (what the CUDA graphs capture, here eager) on MX weights, fused q/k/v included."""
    from tests.model_runtime.prefill_checks import assert_padded_chunk_matches_a_cache_free_forward
    from warpcode.model_runtime.decode_step import prepare_for_decode

    engine = load_random("tiny", seed=3, weights="mxfp8")
    prepare_for_decode(engine.model)
    assert isinstance(engine.model.model.layers[0].self_attn.qkv_weight, MXTensor)
    assert_padded_chunk_matches_a_cache_free_forward(engine, cached)


def test_a_non_finite_weight_is_a_checkpoint_error_naming_it(hf_checkpoints, tmp_path):
    _, path = hf_checkpoints["qwen3_moe"]
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    tensors = load_file(str(broken / "model.safetensors"))
    tensors["model.layers.0.self_attn.o_proj.weight"][3, 5] = float("nan")
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model\.layers\.0\.self_attn\.o_proj\.weight .*inf or NaN"):
        load(broken, device="cpu", dtype=torch.float32, weights="mxfp8", show_progress=False)


def test_a_weight_beyond_the_mx_kernels_range_is_refused_naming_it(hf_checkpoints, tmp_path):
    _, path = hf_checkpoints["qwen3_moe"]
    large = tmp_path / "large"
    shutil.copytree(path, large)
    tensors = load_file(str(large / "model.safetensors"))
    tensors["model.layers.0.self_attn.o_proj.weight"][3, 5] = 448 * 2**7 * 1.01
    save_file(tensors, str(large / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"o_proj\.weight .*above 57,344.*--weights bf16"):
        load(large, device="cpu", dtype=torch.float32, weights="mxfp8", show_progress=False)
    tensors["model.layers.0.self_attn.o_proj.weight"][3, 5] = 448 * 2**7  # the largest block maximum allowed
    save_file(tensors, str(large / "model.safetensors"))
    load(large, device="cpu", dtype=torch.float32, weights="mxfp8", show_progress=False).shutdown()
