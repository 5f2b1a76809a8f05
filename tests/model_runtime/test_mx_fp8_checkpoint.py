"""Block-FP8 checkpoints as Qwen publishes them (`X.weight` float8_e4m3fn + `X.weight_scale_inv` per 128x128 block)
load with weights="bf16" (the dequantised weights) and "mxfp8"; other quantisations and broken FP8 tensors fail with
errors that name them."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from tests.model_runtime.mx_rounding import relative_error, with_mx_rounding
from warpcode.model_runtime import CheckpointError, load

transformers = pytest.importorskip("transformers")

BLOCK = 128
FP8_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
# what Qwen's FP8 checkpoints quantise: every projection and expert, not the routers, norms, embeddings, LM head
QUANTISED = re.compile(r"self_attn\.[qkvo]_proj\.weight$|mlp\.(experts\.\d+\.)?(gate|up|down)_proj\.weight$")


def tiny_config():
    """Dimensions that are multiples of 128 (q: 128 rows) and not (hidden 192, kv 64, experts 64, dense 160)."""
    return transformers.Qwen3MoeConfig(
        vocab_size=128, hidden_size=192, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        num_hidden_layers=2, intermediate_size=160, moe_intermediate_size=64, num_experts=4, num_experts_per_tok=2,
        mlp_only_layers=[1], max_position_embeddings=128, tie_word_embeddings=False, initializer_range=0.1,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )  # fmt: skip


def to_fp8_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w [N, K] -> (float8_e4m3fn [N, K], fp32 scale_inv [ceil(N/128), ceil(K/128)]), amax of each block -> 448."""
    n, k = w.shape
    padded = F.pad(w.double(), (0, -k % BLOCK, 0, -n % BLOCK))
    blocks = padded.view(padded.shape[0] // BLOCK, BLOCK, padded.shape[1] // BLOCK, BLOCK)
    scale_inv = (blocks.abs().amax(dim=(1, 3)) / 448).float()
    expanded = expand(scale_inv, n, k)
    return (w.double() / expanded.double()).to(torch.float8_e4m3fn), scale_inv


def expand(scale_inv: torch.Tensor, n: int, k: int) -> torch.Tensor:
    return scale_inv.repeat_interleave(BLOCK, 0)[:n].repeat_interleave(BLOCK, 1)[:, :k]


@pytest.fixture(scope="module")
def fp8_checkpoints(tmp_path_factory):
    """(FP8 checkpoint dir, dir of the same model with the dequantised FP8 weights in fp32)."""
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(tiny_config(), dtype=torch.float32)
    plain = tmp_path_factory.mktemp("dequantised")
    model.save_pretrained(plain)
    tensors = load_file(plain / "model.safetensors")
    quantised, dequantised = {}, {}
    for name, tensor in tensors.items():
        if QUANTISED.search(name):
            weight, scale_inv = to_fp8_blocks(tensor)
            quantised[name], quantised[name + "_scale_inv"] = weight, scale_inv
            dequantised[name] = weight.float() * expand(scale_inv, *tensor.shape)
        else:
            quantised[name] = dequantised[name] = tensor
    assert any(t.dtype == torch.float8_e4m3fn for t in quantised.values())
    save_file(dequantised, plain / "model.safetensors", metadata={"format": "pt"})
    fp8 = tmp_path_factory.mktemp("fp8")
    shutil.copy(plain / "config.json", fp8 / "config.json")
    save_file(quantised, fp8 / "model.safetensors", metadata={"format": "pt"})
    set_quantization(fp8, FP8_CONFIG)
    return fp8, plain


def set_quantization(path, quantization) -> None:
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(config | {"quantization_config": quantization}))


IDS = torch.randint(0, 128, (2, 7), generator=torch.Generator().manual_seed(2))


def test_fp8_checkpoint_loads_as_its_dequantised_weights(fp8_checkpoints):
    fp8, plain = fp8_checkpoints
    reference = transformers.AutoModelForCausalLM.from_pretrained(plain, dtype=torch.float32).eval()
    engine = load(fp8, dtype=torch.float32, weights="bf16", show_progress=False)
    with torch.no_grad():
        expected = reference(IDS).logits
    assert relative_error(engine.logits(IDS), expected) < 1e-5


def test_fp8_checkpoint_loads_as_mxfp8(fp8_checkpoints):
    fp8, plain = fp8_checkpoints
    reference = with_mx_rounding(transformers.AutoModelForCausalLM.from_pretrained(plain, dtype=torch.float32).eval())
    engine = load(fp8, dtype=torch.float32, weights="mxfp8", show_progress=False)
    with torch.no_grad():
        expected = reference(IDS).logits
    assert relative_error(engine.logits(IDS), expected) < 1e-5


@pytest.mark.parametrize(
    ("quantization", "message"),
    [
        ({"quant_method": "awq", "bits": 4}, "quant_method 'awq' is not supported"),
        ({"quant_method": "gptq"}, "quant_method 'gptq' is not supported"),
        (FP8_CONFIG | {"activation_scheme": "static"}, "activation_scheme 'static' is not supported"),
        (FP8_CONFIG | {"fmt": "e5m2"}, "fmt 'e5m2' is not supported"),
        (FP8_CONFIG | {"weight_block_size": [64, 64]}, r"weight_block_size \[64, 64\] is not supported"),
    ],
)
def test_unsupported_quantization_is_named(quantization, message, tmp_path, fp8_checkpoints):
    shutil.copytree(fp8_checkpoints[0], tmp_path, dirs_exist_ok=True)
    set_quantization(tmp_path, quantization)
    with pytest.raises(CheckpointError, match=message):
        load(tmp_path, show_progress=False)


def test_fp8_weight_without_its_scale(tmp_path, fp8_checkpoints):
    shutil.copytree(fp8_checkpoints[0], tmp_path, dirs_exist_ok=True)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["model.layers.0.mlp.experts.2.down_proj.weight_scale_inv"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        CheckpointError,
        match=r"model\.layers\.0\.mlp\.experts\.2\.down_proj\.weight in model.safetensors is float8_e4m3fn but the "
        r"checkpoint has no model\.layers\.0\.mlp\.experts\.2\.down_proj\.weight_scale_inv",
    ):
        load(tmp_path, weights="mxfp8", show_progress=False)


def test_scale_without_its_weight(tmp_path, fp8_checkpoints):
    shutil.copytree(fp8_checkpoints[0], tmp_path, dirs_exist_ok=True)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["model.layers.1.self_attn.k_proj.weight"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        CheckpointError,
        match=r"model\.layers\.1\.self_attn\.k_proj\.weight_scale_inv in model.safetensors scales "
        r"model\.layers\.1\.self_attn\.k_proj\.weight, which the checkpoint does not have",
    ):
        load(tmp_path, show_progress=False)


def test_scale_of_the_wrong_shape(tmp_path, fp8_checkpoints):
    shutil.copytree(fp8_checkpoints[0], tmp_path, dirs_exist_ok=True)
    tensors = load_file(tmp_path / "model.safetensors")
    name = "model.layers.0.self_attn.q_proj.weight_scale_inv"
    tensors[name] = torch.ones(1, 1)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=rf"{re.escape(name)} has shape \(1, 1\).*needs \(1, 2\)"):
        load(tmp_path, show_progress=False)
