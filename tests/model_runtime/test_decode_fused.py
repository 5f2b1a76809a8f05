"""The decode step's fused add + RMSNorm paths (the GEMV's norm prologue and residual epilogue, warp decode's
residual) against its unfused path. They only run on CUDA, so here the checks that choose them are patched to
ignore the device, and the Triton kernels run in the CPU interpreter; the unfused path is the PyTorch references.
Each comparison runs with the model's own weights and with weights="mxfp8", where the kernels read the MXTensors
(fp8 data and per-32 scales) and the references multiply by their exact dequantisation (mx_weights.linear)."""

from __future__ import annotations

import functools

import pytest
import torch

from warpcode.kernels import dispatch, tuning, warp_decode
from warpcode.kernels import gemv as gemv_module
from warpcode.kernels.gemv import GemvConfig, has_tuned_mx_config
from warpcode.kernels.mx import is_mx
from warpcode.kernels.tuning import WarpDecodeConfig, warp_decode_max_tokens
from warpcode.model_runtime import decode_step as step_module
from warpcode.model_runtime import load, moe_block, mx_weights
from warpcode.model_runtime.model import mx_weight_owners
from warpcode.model_runtime.sampling import SamplingParams

PROMPTS = [[3, 5, 7, 9, 11, 13], [4, 2], [8, 8, 8], [6, 1, 6, 1], [9]]
STEPS = 3
# Few programs keep the interpreter fast (the default configs' one-row GEMV blocks take seconds per step); the
# norms' rows (H = 64) are walked in two tiles.
GEMV_BLOCKS = GemvConfig(block_n=64, block_k=32, num_warps=1)
# MX: two scale groups per tile (and half the interpreter's tiles); o_proj's and the dense down_proj's K = 96 ends in
# a partial tile of one group.
MX_GEMV_BLOCKS = GemvConfig(block_n=64, block_k=64, num_warps=1)
WARP_DECODE_BLOCKS = WarpDecodeConfig(gate_up_rows=32, gate_up_cols=32, down_rows=64, down_cols=16)
# MX tiles hold whole scale groups (down: I = 32 in one tile).
MX_WARP_DECODE_BLOCKS = WarpDecodeConfig(gate_up_rows=32, gate_up_cols=32, down_rows=64, down_cols=32)
# load()'s weight formats ("bf16": the model's weights in its dtype, whatever it is), by test id.
WEIGHTS = {"plain": "bf16", "mxfp8": "mxfp8"}


@pytest.fixture(autouse=True)
def h200_gemv_tiles(monkeypatch):
    """Where the GEMV wins follows the device's measured tiles (mx_weights.gemv_wins): off the GPU there are none,
    so the H200's are given explicitly."""
    h200 = tuning.load_tables(tuning.CONFIG_FOLDER / "NVIDIA_H200.json")
    monkeypatch.setattr(mx_weights, "has_tuned_mx_config", functools.partial(has_tuned_mx_config, tables=h200))


def gemv_rule(x, weight):
    """decode_step.uses_gemv without its device check."""
    return mx_weights.gemv_wins(x.shape[0], weight)


def test_gemv_wins_where_measured():
    qkv, o_proj = mx_weights.empty_mx((5120, 2048), "cpu"), mx_weights.empty_mx((2048, 4096), "cpu")
    router = torch.empty(128, 2048)
    assert mx_weights.gemv_wins(1, o_proj) and mx_weights.gemv_wins(2, qkv)  # one row; MX q/k/v's tuned two rows
    assert not mx_weights.gemv_wins(3, qkv) and not mx_weights.gemv_wins(2, o_proj)  # no tuned tile there
    assert not mx_weights.gemv_wins(2, torch.empty(5120, 2048))  # bf16 q/k/v: cuBLAS
    assert mx_weights.gemv_wins(8, router) and not mx_weights.gemv_wins(9, router)


def one_row_only(x, weight):
    """The GEMV at one row only: cuBLAS for every projection at several rows."""
    return x.shape[0] == 1


def router_only(x, weight):
    """As Qwen3-30B-A3B at 2-8 rows: cuBLAS for q/k/v and o_proj, the GEMV for the router (8 outputs here)."""
    return weight.shape[0] <= 8


def warp_decode_rule(x, w13, top_k):
    """dispatch.uses_warp_decode without its device check."""
    experts, two_i, hidden = w13.shape
    return x.shape[0] <= warp_decode_max_tokens(hidden, two_i // 2, experts, top_k, is_mx(w13))


def gemv_blocks(n, h, batch, mx=False):
    """gemv.default_gemv_config's signature; the blocks above."""
    return MX_GEMV_BLOCKS if mx else GEMV_BLOCKS


def warp_decode_blocks(hidden, intermediate, experts, top_k, tokens, mx=False):
    """tuning.warp_decode_config's signature; the blocks above."""
    return MX_WARP_DECODE_BLOCKS if mx else WARP_DECODE_BLOCKS


def load_with_random_norms(checkpoint, dtype=torch.float32, weights="bf16"):
    """The checkpoint's model with every RMSNorm weight drawn from [0.5, 1.5] (they are 1 in a fresh checkpoint,
    which would hide a kernel that leaves them out); weights="mxfp8": its projections and experts MXTensors."""
    engine = load(checkpoint, device="cpu", dtype=dtype, weights=weights)
    if weights == "mxfp8":  # else an unquantised weight would leave its MX path unchecked
        assert all(is_mx(getattr(owner, name)) for owner, name in mx_weight_owners(engine.model))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in engine.model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(0.5 + torch.rand(param.shape, generator=generator))
    return engine


def decode(engine, batch, uses_gemv=None):
    """Logits [STEPS, batch, V] of greedy steps after a prefill, and the residual flag of each add_rmsnorm call of
    one step (True: it adds a pending output to h). With uses_gemv, the fused kernels run where it says."""
    runner = engine.runner
    runner.reserve(batch, 16)
    runner.prefill(PROMPTS[:batch], SamplingParams(), seed=0)
    calls = []
    real_add_rmsnorm = step_module.add_rmsnorm

    def add_rmsnorm(x, weight, eps, residual):
        calls.append(residual is not None)
        return real_add_rmsnorm(x, weight, eps, residual)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(step_module, "add_rmsnorm", add_rmsnorm)
        if uses_gemv is not None:
            patch.setattr(step_module, "uses_gemv", uses_gemv)
            patch.setattr(mx_weights, "uses_gemv", uses_gemv)  # the rule of the linear() the step calls
            patch.setattr(dispatch, "uses_warp_decode", warp_decode_rule)
            patch.setattr(moe_block, "uses_warp_decode", warp_decode_rule)
            patch.setattr(gemv_module, "default_gemv_config", gemv_blocks)
            patch.setattr(warp_decode, "warp_decode_config", warp_decode_blocks)
        logits = [step_module.decode_step(engine.model, runner.state, batch, "greedy").clone() for _ in range(STEPS)]
    per_step = len(calls) // STEPS
    assert calls == calls[:per_step] * STEPS
    return torch.stack(logits), calls[:per_step]


# The qwen3_moe test model has layers MoE, dense, MoE. Unfused, every norm adds the pending output of the block
# before it, but the first layer's (h is the embedding): [F, T, T, T, T, T, T].
UNFUSED = [False, True, True, True, True, True, True]
CASES = {
    # Every projection fused: only the dense layer's norm (nothing pending, h complete), the next layer's input norm
    # (the dense MLP's output is pending) and the final norm remain.
    "1 row": (1, gemv_rule, [False, True, False]),
    "3 rows, every GEMV": (3, gemv_rule, [False, True, False]),
    # cuBLAS for q/k/v and o_proj: the norms stay, but warp decode adds the experts' output, so the norm after a MoE
    # layer has nothing to add.
    "3 rows, router GEMV only": (3, router_only, [False, True, False, True, True, True, False]),
    "5 rows, cuBLAS": (5, one_row_only, [False, True, False, True, True, True, False]),
}


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# The MX model's cases and dtypes. Its router keeps the model dtype, so "3 rows, router GEMV only" runs no MX kernel
# that "5 rows, cuBLAS" does not; in bf16 at 3 rows one row meets two experts at router probabilities 0.203 and
# 0.207, a near-tie the fused and unfused roundings break differently (fp32 compares those kernels as closely).
MX_CASES = {"1 row": ["fp32", "bf16"], "3 rows, every GEMV": ["fp32"], "5 rows, cuBLAS": ["fp32", "bf16"]}
FUSED_PARAMS = [("plain", dtype, case) for dtype in DTYPES for case in CASES] + [
    ("mxfp8", dtype, case) for case, dtypes in MX_CASES.items() for dtype in dtypes
]


@pytest.mark.slow
@pytest.mark.parametrize(("weights", "dtype", "case"), FUSED_PARAMS, ids=["-".join(p) for p in FUSED_PARAMS])
def test_fused_decode_matches_unfused(weights, dtype, case, hf_checkpoints):
    weights, dtype = WEIGHTS[weights], DTYPES[dtype]
    batch, uses_gemv, expected_calls = CASES[case]
    engine = load_with_random_norms(hf_checkpoints["qwen3_moe"][1], dtype, weights)
    unfused, unfused_calls = decode(engine, batch)
    fused, fused_calls = decode(engine, batch, uses_gemv)
    assert (unfused_calls, fused_calls) == (UNFUSED, expected_calls)
    if dtype == torch.float32:  # only the order of fp32 sums differs
        torch.testing.assert_close(fused, unfused, rtol=1e-5, atol=1e-5)
    else:
        # bf16: the fused GEMVs multiply the normalised input before it is rounded to bf16 (one rounding fewer than
        # the eager model and the norm kernel), and warp decode's fp16 intermediate differs from the reference
        # experts' fp32 one: a few ulps apart (a logit's ulp is 2**-6 in [2, 4)), and the first step's logits no
        # further from the fp32 model's than the unfused ones (later steps may follow other tokens in fp32).
        reference = decode(load_with_random_norms(hf_checkpoints["qwen3_moe"][1], torch.float32, weights), batch)[0][0]

        def error(logits):
            return ((logits[0].float() - reference).norm() / reference.norm()).item()

        assert error(fused) <= 1.25 * error(unfused), (error(fused), error(unfused))
        torch.testing.assert_close(fused.float(), unfused.float(), rtol=2**-4, atol=2**-4)
    assert torch.equal(fused.argmax(-1), unfused.argmax(-1))


@pytest.mark.slow
@pytest.mark.parametrize("weights", list(WEIGHTS.values()), ids=list(WEIGHTS))
def test_fused_decode_falls_back_for_every_architecture(arch, weights, hf_checkpoints):
    """Shared experts (qwen2_moe), full q/k norms and clipped q/k/v (olmoe): the fused kernels run where they apply
    and give the unfused logits."""
    engine = load_with_random_norms(hf_checkpoints[arch][1], weights=weights)
    unfused, unfused_calls = decode(engine, 3)
    fused, fused_calls = decode(engine, 3, gemv_rule)
    assert len(fused_calls) < len(unfused_calls)
    torch.testing.assert_close(fused, unfused, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("weights", list(WEIGHTS.values()), ids=list(WEIGHTS))
def test_folded_router_decode_matches_unfused(dtype, weights, hf_checkpoints):
    """One row with the router folded beside o_proj (what prepare_for_decode does on the GPU; an MX o_proj is
    dequantised into the fold): both MoE layers take that path, and the logits are the unfused path's up to the
    fold's roundings."""
    engine = load_with_random_norms(hf_checkpoints["qwen3_moe"][1], dtype, weights)
    unfused, _ = decode(engine, 1)
    step_module.prepare_for_decode(engine.model, fold_routers=True)
    folded_layers = []
    real_o_proj_router = step_module.o_proj_router

    def o_proj_router(x, o_proj, h, fold):
        folded_layers.append(o_proj)
        return real_o_proj_router(x, o_proj, h, fold)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(step_module, "o_proj_router", o_proj_router)
        folded, calls = decode(engine, 1, gemv_rule)
    layers = engine.model.model.layers
    assert folded_layers == [layers[0].self_attn.o_proj.weight, layers[2].self_attn.o_proj.weight] * STEPS
    assert calls == [False, True, False]
    if dtype == torch.float32:
        torch.testing.assert_close(folded, unfused, rtol=1e-5, atol=1e-5)
    else:  # the folded router weights are rounded to bf16 once, and z sums h + Wo attn before h_new's roundings
        torch.testing.assert_close(folded.float(), unfused.float(), rtol=2**-4, atol=2**-4)
    assert torch.equal(folded.argmax(-1), unfused.argmax(-1))
