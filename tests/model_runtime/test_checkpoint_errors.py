"""Broken or mismatched checkpoints fail with errors that name the tensor and both shapes."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from warpcode.model_runtime import CheckpointError, UnsupportedConfigError, load


@pytest.fixture
def checkpoint(tmp_path, hf_checkpoints):
    """A writable copy of the tiny mixtral checkpoint, and its tensors."""
    shutil.copytree(hf_checkpoints["mixtral"][1], tmp_path, dirs_exist_ok=True)
    return tmp_path, load_file(tmp_path / "model.safetensors")


def rewrite(path, tensors) -> None:
    save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})


def test_missing_expert_tensor(checkpoint):
    path, tensors = checkpoint
    del tensors["model.layers.1.block_sparse_moe.experts.5.w3.weight"]
    rewrite(path, tensors)
    with pytest.raises(
        CheckpointError,
        match=r"missing tensor model\.layers\.1\.block_sparse_moe\.experts\.5\.w3"
        r"\.weight \(expected shape \(32, 64\)\)",
    ):
        load(path, show_progress=False)


def test_missing_expert_tensor_with_qwen_style_names(tmp_path, hf_checkpoints):
    shutil.copytree(hf_checkpoints["olmoe"][1], tmp_path, dirs_exist_ok=True)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["model.layers.0.mlp.experts.2.down_proj.weight"]
    rewrite(tmp_path, tensors)
    with pytest.raises(
        CheckpointError,
        match=r"missing tensor model\.layers\.0\.mlp\.experts\.2\.down_proj\.weight \(expected shape \(64, 32\)\)",
    ):
        load(tmp_path, show_progress=False)


def test_missing_plain_tensor(checkpoint):
    path, tensors = checkpoint
    del tensors["model.norm.weight"]
    rewrite(path, tensors)
    with pytest.raises(CheckpointError, match=r"missing tensor model\.norm\.weight \(expected shape \(64,\)\)"):
        load(path, show_progress=False)


def test_wrong_shape(checkpoint):
    path, tensors = checkpoint
    tensors["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(16, 64)
    rewrite(path, tensors)
    with pytest.raises(
        CheckpointError,
        match=r"k_proj\.weight in model\.safetensors has shape \(16, 64\), but the "
        r"model expects \(32, 64\)",
    ):
        load(path, show_progress=False)


@pytest.mark.parametrize("name", ["model.layers.0.mlp.extra.weight", "model.layers.0.mlp.experts.8.w1.weight"])
def test_unexpected_tensor(checkpoint, name):
    path, tensors = checkpoint
    tensors[name] = torch.zeros(32, 64)
    rewrite(path, tensors)
    with pytest.raises(CheckpointError, match=f"unexpected tensor {name}"):
        load(path, show_progress=False)


def test_truncated_file(checkpoint):
    path, _ = checkpoint
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) - 1000])
    with pytest.raises(CheckpointError, match=r"cannot read .*model\.safetensors"):
        load(path, show_progress=False)


def test_index_names_a_missing_shard(checkpoint):
    path, tensors = checkpoint
    index = {"metadata": {}, "weight_map": dict.fromkeys(tensors, "model-00002-of-00002.safetensors")}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"model-00002-of-00002\.safetensors"):
        load(path, show_progress=False)


def test_no_weights_at_all(checkpoint):
    path, _ = checkpoint
    (path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"no model\.safetensors"):
        load(path, show_progress=False)


def test_unknown_model_type(checkpoint):
    path, _ = checkpoint
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(config | {"model_type": "deepseek_v3"}))
    with pytest.raises(UnsupportedConfigError, match="model_type 'deepseek_v3' is not supported"):
        load(path, show_progress=False)


def test_unknown_weight_format(checkpoint):
    with pytest.raises(ValueError, match="unknown weights format 'int4'"):
        load(checkpoint[0], weights="int4", show_progress=False)
