"""The transformers reference for MX weights: the same model with each MX-stored weight rounded through MXFP8 and
back, so that logits compare exactly with the runtime's."""

from __future__ import annotations

import copy
import re

import torch

from warpcode.kernels import dequantize_mxfp8, quantize_mxfp8

# transformers' names of the weights docs/reference/mxfp8.md stores in MXFP8 (its experts are fused [E, 2I, H] and
# [E, H, I], quantised along their last dimension as ours are)
HF_MX = re.compile(
    r"self_attn\.[qkvo]_proj\.weight$|mlp\.experts\.(gate_up_proj|down_proj)$|"
    r"shared_expert\.(gate|up|down)_proj\.weight$|mlp\.(gate|up|down)_proj\.weight$"
)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual - expected).norm() / expected.norm()).item()


def with_mx_rounding(hf_model: torch.nn.Module) -> torch.nn.Module:
    """A copy of the transformers model whose MX-listed weights are replaced by dequantize(quantize(w))."""
    model = copy.deepcopy(hf_model)
    replaced = 0
    with torch.no_grad():
        for name, param in model.named_parameters():
            if HF_MX.search(name):
                param.copy_(dequantize_mxfp8(quantize_mxfp8(param)))
                replaced += 1
    assert replaced
    return model
