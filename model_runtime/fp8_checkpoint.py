"""FP8 checkpoints as Qwen publishes them (the `*-FP8` repositories), and the check that rejects other quantisations.

config.json says `"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
"weight_block_size": [128, 128]}`; each quantised linear stores `X.weight` (float8_e4m3fn [N, K]) and
`X.weight_scale_inv` (fp32 [ceil(N / 128), ceil(K / 128)]), and the weight is

    W[n, k] = weight[n, k] * weight_scale_inv[n // 128, k // 128]

The loader dequantises each such tensor on the device to fp32 (transiently, one tensor at a time) and stores it in
the model dtype or quantises it to MXFP8: the model never exists in bf16 first.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from warpcode.model_runtime.checkpoint_error import CheckpointError

BLOCK = 128
SCALE_SUFFIX = "_scale_inv"
SUPPORTED = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [BLOCK, BLOCK]}
# transformers' defaults for the fields a config may leave out
_DEFAULTS = {"fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [BLOCK, BLOCK]}


def check_quantization(model_dir: str | Path) -> None:
    """Raises CheckpointError unless config.json describes an unquantised checkpoint or a supported FP8 one."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    quantization = config.get("quantization_config")
    if quantization is None:
        return
    fields = _DEFAULTS | quantization
    method = fields.get("quant_method")
    if method != "fp8":
        raise CheckpointError(
            f"{model_dir}: quantization_config quant_method {method!r} is not supported (warpcode loads unquantised "
            "checkpoints and block-FP8 ones, quant_method 'fp8'; for MXFP8 pass the unquantised checkpoint with "
            "weights='mxfp8')"
        )
    for key in ("fmt", "activation_scheme", "weight_block_size"):
        if _normalised(fields[key]) != _normalised(SUPPORTED[key]):
            raise CheckpointError(
                f"{model_dir}: FP8 quantization_config with {key} {fields[key]!r} is not supported (supported: "
                f"fmt 'e4m3', activation_scheme 'dynamic', weight_block_size [128, 128])"
            )


def _normalised(value):
    return list(value) if isinstance(value, (list, tuple)) else value


def is_scale_name(name: str) -> bool:
    return name.endswith(SCALE_SUFFIX)


def scale_name(weight_name: str) -> str:
    return weight_name + SCALE_SUFFIX


def weight_name_of(name: str) -> str:
    return name.removesuffix(SCALE_SUFFIX)


def dequantize_fp8_blocks(name: str, weight: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
    """fp8 `weight` [..., N, K] and its block scales [..., ceil(N / 128), ceil(K / 128)] -> fp32 [..., N, K]."""
    *lead, n, k = weight.shape
    expected = (*lead, -(-n // BLOCK), -(-k // BLOCK))
    if tuple(scale_inv.shape) != expected:
        raise CheckpointError(
            f"{scale_name(name)} has shape {tuple(scale_inv.shape)}, but {name} {tuple(weight.shape)} in "
            f"{BLOCK}x{BLOCK} blocks needs {expected}"
        )
    out = weight.to(torch.float32)  # the one full-size copy: each 128-column strip is scaled in place
    row_scales = scale_inv.to(torch.float32).repeat_interleave(BLOCK, dim=-2)[..., :n, :]  # [..., N, ceil(K/128)]
    for column in range(row_scales.shape[-1]):
        out[..., column * BLOCK : (column + 1) * BLOCK].mul_(row_scales[..., column : column + 1])
    return out
