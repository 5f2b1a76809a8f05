"""Loads a safetensors checkpoint (single file or sharded) into a built model, packing per-expert tensors.

Hub checkpoints store each expert separately (`mlp.experts.N.gate_proj/up_proj/down_proj.weight`; mixtral:
`block_sparse_moe.experts.N.w1/w3/w2.weight`); transformers 5 with `save_original_format=False` stores them fused
(`mlp.experts.gate_up_proj [E, 2I, H]`, `mlp.experts.down_proj [E, H, I]`). Both land in the model's
`w13 [E, 2I, H]` (gate rows, then up rows) and `w2 [E, H, I]`. Files are memory-mapped and every tensor goes
straight to the model's device, converted to its dtype while being copied into place, or quantised there for a
model with MX weights (mx_weights.py: per expert, into slices of the MXTensor's data and scales). Block-FP8
tensors (fp8_checkpoint.py) are dequantised on the device first, one at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from safetensors import SafetensorError, safe_open

from warpcode.kernels.mx import NonFiniteWeights
from warpcode.model_runtime.checkpoint_error import CheckpointError
from warpcode.model_runtime.fp8_checkpoint import dequantize_fp8_blocks, is_scale_name, scale_name, weight_name_of
from warpcode.model_runtime.model import MoeForCausalLM
from warpcode.model_runtime.mx_weights import BeyondMXRange, Weight, named_weights, store_

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"

_PER_EXPERT = re.compile(r"^(.*\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj|w1|w3|w2)\.weight$")
_FUSED = re.compile(r"^(.*\.experts)\.(gate_up_proj|down_proj)$")
# per-expert tensor name -> its role; mixtral calls gate, up, down w1, w3, w2
_EXPERT_ROLE = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate", "w3": "up", "w2": "down"}
_MIXTRAL_NAME = {"gate": "w1", "up": "w3", "down": "w2"}

__all__ = ["CheckpointError", "checkpoint_files", "load_weights"]


def checkpoint_files(model_dir: Path) -> list[Path]:
    index = model_dir / INDEX_FILE
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        if missing := [n for n in names if not (model_dir / n).is_file()]:
            raise CheckpointError(f"{INDEX_FILE} in {model_dir} lists shard(s) that do not exist: {missing}")
        return [model_dir / n for n in names]
    if (model_dir / SINGLE_FILE).is_file():
        return [model_dir / SINGLE_FILE]
    raise CheckpointError(f"no {SINGLE_FILE} or {INDEX_FILE} in {model_dir}")


@torch.no_grad()
def load_weights(model: MoeForCausalLM, model_dir: str | Path, show_progress: bool = True) -> None:
    """Fills every weight of `model` from the checkpoint in `model_dir`; raises CheckpointError on any mismatch."""
    files = checkpoint_files(Path(model_dir))
    params = dict(named_weights(model))
    device = next(iter(params.values())).device
    filled = {name: torch.zeros(_coverage_shape(name, p), dtype=torch.bool) for name, p in params.items()}
    handles = [_open(path, device) for path in files]
    # every tensor's file: an FP8 weight's scales may lie in another shard
    location = {
        name: (path, handle)
        for path, handle in zip(files, handles, strict=True)
        for name in handle.keys()  # noqa: SIM118 (a safe_open handle is not iterable)
    }
    progress = Progress(
        TextColumn("loading weights"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not show_progress,
    )
    with progress:
        task = progress.add_task("load", total=len(location))
        for name, (path, handle) in location.items():
            if is_scale_name(name):
                if weight_name_of(name) not in location:
                    raise CheckpointError(f"tensor {name} in {path.name} scales {weight_name_of(name)}, which the "
                                          "checkpoint does not have")  # fmt: skip
            elif (target := _target(name, params, model.config.tie_word_embeddings)) is not None:
                param_name, select, coverage = target
                destination = select(params[param_name])
                shape = tuple(handle.get_slice(name).get_shape())
                if shape != tuple(destination.shape):
                    raise CheckpointError(
                        f"tensor {name} in {path.name} has shape {shape}, but the model "
                        f"expects {tuple(destination.shape)} (from config.json)"
                    )
                try:
                    store_(destination, _read_weight(name, location))
                except NonFiniteWeights as error:
                    raise CheckpointError(f"tensor {name} in {path.name}: {error} (a corrupt checkpoint?)") from error
                except BeyondMXRange as error:
                    raise CheckpointError(f"tensor {name} in {path.name}: {error}") from error
                filled[param_name][coverage] = True
            progress.advance(task)
    _check_complete(filled, params, model)


def _read_weight(name: str, location: dict) -> torch.Tensor:
    """The tensor `name` as stored, or dequantised to fp32 when it is block FP8 (with its `_scale_inv`)."""
    path, handle = location[name]
    tensor = _read(handle, name, path)
    scales = scale_name(name)
    if tensor.dtype == torch.float8_e4m3fn:
        if scales not in location:
            raise CheckpointError(f"tensor {name} in {path.name} is float8_e4m3fn but the checkpoint has no {scales}")
        return dequantize_fp8_blocks(name, tensor, _read(location[scales][1], scales, location[scales][0]))
    if scales in location:
        raise CheckpointError(f"tensor {name} in {path.name} has {scales} but is {tensor.dtype}, not float8_e4m3fn")
    return tensor


def _open(path: Path, device: torch.device):
    try:
        return safe_open(str(path), framework="pt", device=str(device))
    except (SafetensorError, OSError) as error:
        raise CheckpointError(f"cannot read {path}: {error} (truncated or corrupt safetensors file?)") from error


def _read(handle, name: str, path: Path) -> torch.Tensor:
    try:
        return handle.get_tensor(name)
    except (SafetensorError, OSError) as error:
        raise CheckpointError(f"cannot read tensor {name} from {path}: {error}") from error


def _coverage_shape(name: str, param: Weight) -> tuple[int, ...]:
    # w13 is filled in halves per expert (gate, up), w2 per expert; anything else in one piece.
    if name.endswith(".experts.w13"):
        return (param.shape[0], 2)
    if name.endswith(".experts.w2"):
        return (param.shape[0],)
    return ()


Target = tuple[str, Callable[[Weight], Weight], tuple]


def _target(name: str, params: dict[str, Weight], tied: bool) -> Target | None:
    """(parameter, view of it this tensor fills, coverage index), or None for a tensor deliberately skipped."""
    hf_name = name.replace(".block_sparse_moe.", ".mlp.")  # mixtral's name for its MoE block
    if match := _PER_EXPERT.match(hf_name):
        prefix, expert, role = match.group(1), int(match.group(2)), _EXPERT_ROLE[match.group(3)]
        if f"{prefix}.w13" in params and expert < params[f"{prefix}.w13"].shape[0]:
            half = params[f"{prefix}.w13"].shape[1] // 2
            if role == "gate":
                return f"{prefix}.w13", lambda w: w[expert, :half], (expert, 0)
            if role == "up":
                return f"{prefix}.w13", lambda w: w[expert, half:], (expert, 1)
            return f"{prefix}.w2", lambda w: w[expert], (expert,)
    elif match := _FUSED.match(hf_name):
        prefix, part = match.groups()
        stacked = f"{prefix}.w13" if part == "gate_up_proj" else f"{prefix}.w2"
        if stacked in params:
            return stacked, lambda w: w, (...,)
    elif hf_name in params:
        return hf_name, lambda w: w, ()
    elif hf_name.endswith(".rotary_emb.inv_freq"):
        return None  # older checkpoints save this derived buffer; the model recomputes it from config.json
    elif hf_name == "lm_head.weight" and tied:
        return None  # tied embeddings: the LM head is the embedding matrix, loaded under its own name
    raise CheckpointError(
        f"unexpected tensor {name} in the checkpoint: the model built from config.json has no "
        "parameter for it (wrong config.json or a different architecture?)"
    )


def _check_complete(filled: dict[str, torch.Tensor], params: dict[str, Weight], model: MoeForCausalLM) -> None:
    mixtral = model.config.model_type == "mixtral"
    for name, done in filled.items():
        if bool(done.all()):
            continue
        shape = tuple(params[name].shape)
        if done.dim() == 0:
            raise CheckpointError(f"missing tensor {name} (expected shape {shape}) in the checkpoint")
        expert, *half = done.logical_not().nonzero()[0].tolist()
        prefix = name.rsplit(".", 1)[0]
        hub_prefix = prefix.replace(".mlp.", ".block_sparse_moe.") if mixtral else prefix
        if name.endswith(".w13"):
            role, expected = ("gate" if half[0] == 0 else "up"), (shape[1] // 2, shape[2])
        else:
            role, expected = "down", shape[1:]
        part = _MIXTRAL_NAME[role] if mixtral else f"{role}_proj"
        raise CheckpointError(
            f"missing tensor {hub_prefix}.{expert}.{part}.weight (expected shape {expected}) "
            f"in the checkpoint, or the fused {prefix}.{'gate_up_proj' if half else 'down_proj'}"
        )
