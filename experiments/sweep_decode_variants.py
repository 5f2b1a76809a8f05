"""Batch-1 decode step time (CUDA-graph replay) under variants: warp-decode and GEMV launch parameters, where the
attention merge runs, and ablations that leave one kernel kind out (results then are wrong; only the time counts)
to show each kind's share of the step as the graph runs it, with PDL overlap.

    python experiments/sweep_decode_variants.py [--contexts 512,8192] [--steps 64] [--attention-configs ...]
        [--settings "gemv.NAME=expr|warp_decode.NAME=expr;..."]   (module constants patched per variant)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib

import torch
import triton

from warpcode.bench.decode import WARMUP_STEPS, decode_seconds
from warpcode.kernels import attention_splits, decode_attention, gemv, warp_decode
from warpcode.kernels.route import route_triton
from warpcode.kernels.tuning import WarpDecodeConfig
from warpcode.model_runtime import decode_step as step_module
from warpcode.model_runtime import load_random
from warpcode.model_runtime.moe_block import SparseMoeBlock


@contextlib.contextmanager
def patched(target, name, value):
    saved = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, saved)


@contextlib.contextmanager
def skip_linear(n_rows: int):
    """Leaves out the projection with n_rows outputs, through `linear` or a fused GEMV (whose outputs stay as
    they were)."""
    real_linear, real_gemv = step_module.linear, step_module.gemv

    def linear(x, weight, bias):
        if weight.shape[0] == n_rows:
            return torch.empty((x.shape[0], n_rows), device=x.device, dtype=x.dtype)
        return real_linear(x, weight, bias)

    def gemv(x, weight, bias=None, **fused):
        if weight.shape[0] == n_rows:
            out = fused.get("out")
            return torch.empty((x.shape[0], n_rows), device=x.device, dtype=x.dtype) if out is None else out
        return real_gemv(x, weight, bias, **fused)

    with patched(step_module, "linear", linear), patched(step_module, "gemv", gemv):
        yield


def static_routing(config):
    """route() on fixed random logits: the same kernel (with the folded router's arguments: the normed row is still
    stored), and routing no ablation can make degenerate."""
    logits = torch.randn(1, config.num_experts, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    return patched(
        step_module,
        "route",
        lambda router_logits, k, normalize, **folded: route_triton(logits, k, normalize, **folded),
    )


def moe_config(overrides: dict):
    real = warp_decode.warp_decode_config

    def config(hidden, intermediate, experts, top_k, tokens, mx=False):
        tuned = real(hidden, intermediate, experts, top_k, tokens, mx)
        return WarpDecodeConfig(**{**tuned.__dict__, **overrides}) if tokens == 1 else tuned

    return patched(warp_decode, "warp_decode_config", config)


def gemv_config(shape: str, values: dict):
    """'N,H' at batch 1 -> GemvConfig(**values) instead of the tuned entry."""
    n, h = (int(v) for v in shape.split(","))
    table = {**gemv.TUNED_CONFIGS, (n, h, 1): gemv.GemvConfig(**values)}
    return patched(gemv, "TUNED_CONFIGS", table)


def ablations(config):
    q_size = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    yield "no attention kernel", patched(step_module, "decode_attention", lambda q, k, v, lens, scale: q)
    yield (
        "no rope/cache kernel",
        patched(
            step_module,
            "qk_norm_rope_cache",
            lambda qkv, hq, *a, **options: qkv[:, :q_size].view(qkv.shape[0], hq, -1),
        ),
    )
    yield (
        "no MoE experts",
        patched(
            SparseMoeBlock,
            "experts_forward",
            lambda self, flat, w, ids, residual=None: flat if residual is None else residual,
        ),
    )
    fixed = route_triton(torch.randn(1, config.num_experts, device="cuda"), config.num_experts_per_tok)
    yield "no route kernel", patched(step_module, "route", lambda logits, k, normalize, **folded: fixed)
    yield "no add_rmsnorm", patched(step_module, "add_rmsnorm", lambda x, w, eps, residual: (x, x))
    yield "no qkv GEMV", skip_linear(q_size + 2 * kv)
    yield "no o GEMV", skip_linear(config.hidden_size)
    yield "no router GEMV", skip_linear(config.num_experts)  # where the router is not folded beside o_proj
    yield (
        "no o_proj + router launch",
        patched(
            step_module, "o_proj_router", lambda x, o_proj, h, fold: (h, h.new_zeros(1, config.num_experts).float())
        ),
    )


def attention_config(values: dict):
    """Streaming splits' keys per tile, warps, stages and programs per SM; one-tile splits' warps, or none of them
    (one_tile=0); the split count from which the merge runs in its own kernel (merge_min), and its warps."""
    names = {
        "block_n": (attention_splits, "BLOCK_N"),
        "warps": (attention_splits, "NUM_WARPS"),
        "stages": (attention_splits, "NUM_STAGES"),
        "per_sm": (attention_splits, "PROGRAMS_PER_SM"),
        "one_tile_warps": (attention_splits, "ONE_TILE_WARPS"),
        "merge_warps": (decode_attention, "_MERGE_NUM_WARPS"),
        "merge_min": (decode_attention, "MERGE_KERNEL_MIN_SPLITS"),
    }
    stack = contextlib.ExitStack()
    for key, value in values.items():
        if key == "one_tile":
            stack.enter_context(patched(attention_splits, "ONE_TILE_BLOCKS", attention_splits.ONE_TILE_BLOCKS * value))
        else:
            stack.enter_context(patched(*names[key], value))
    return stack


def module_settings(text: str):
    """'module.NAME=expr|module.NAME=expr' (the modules below) -> one context manager."""
    modules = {
        "route": importlib.import_module("warpcode.kernels.route"),  # (kernels/__init__ shadows it with route())
        "decode_step": step_module,
        "o_proj_router": importlib.import_module("warpcode.kernels.o_proj_router"),
        "greedy": importlib.import_module("warpcode.kernels.greedy"),
        "gemv": gemv,
        "warp_decode": warp_decode,
        "attention_splits": attention_splits,
        "decode_attention": decode_attention,
    }
    stack = contextlib.ExitStack()
    for item in text.split("|"):
        target, expression = item.split("=", 1)
        module, name = target.split(".")
        stack.enter_context(patched(modules[module], name, eval(expression)))
    return stack


def parse_overrides(text: str) -> dict:
    return {key: int(value) for key, value in (item.split("=") for item in text.split(","))}


def variants(args, config):
    """(label, context manager) for every variant the flags ask for, the baseline first and last."""
    yield "baseline", contextlib.nullcontext()
    for settings in filter(None, args.settings.split(";")):
        yield f"{settings}", module_settings(settings)
    for overrides in filter(None, args.moe_configs.split(";")):
        yield f"moe {overrides}", moe_config(parse_overrides(overrides))
    for item in filter(None, args.gemv_configs.split(";")):
        shape, overrides = item.split(":")
        yield f"gemv {item}", gemv_config(shape, parse_overrides(overrides))
    for overrides in filter(None, args.attention_configs.split(";")):
        yield f"attention {overrides}", attention_config(parse_overrides(overrides))
    if not args.no_merge_variants:
        for label, min_splits in (("attention merge always in the split kernel", 10**9), ("always a merge kernel", 2)):
            yield label, patched(decode_attention, "MERGE_KERNEL_MIN_SPLITS", min_splits)
    yield "baseline again", contextlib.nullcontext()
    if not args.no_ablations:
        yield "static routing", static_routing(config)
        for label, patch in ablations(config):
            stack = contextlib.ExitStack()
            stack.enter_context(static_routing(config))
            stack.enter_context(patch)
            yield f"static routing, {label}", stack


def step_seconds(runner, context: int, steps: int) -> float:
    """Seconds per batch-1 graph step from a random cache of `context` tokens, the step captured afresh (timed as
    `warpcode bench decode` times it)."""
    runner.drop_graphs()
    return decode_seconds(runner, 1, context, steps)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contexts", default="512,8192")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--no-ablations", action="store_true")
    parser.add_argument("--no-merge-variants", action="store_true")
    parser.add_argument("--moe-configs", default="", help="';'-separated k=v,k=v WarpDecodeConfig overrides at T=1")
    parser.add_argument("--settings", default="", help="';'-separated module.NAME=expr|... variants")
    parser.add_argument("--gemv-configs", default="", help="';'-separated N,H:k=v,k=v GemvConfigs at batch 1")
    parser.add_argument(
        "--attention-configs", default="", help="';'-separated k=v,k=v attention settings (attention_config)"
    )
    args = parser.parse_args()
    engine = load_random("qwen3-30b-a3b", device="cuda")
    runner = engine.runner
    # Contexts in ascending order, each with the cache capacity `warpcode bench decode` gives it (the split count
    # follows the capacity), every variant measured at one context before the cache grows for the next.
    for context in sorted(int(c) for c in args.contexts.split(",")):
        runner.reserve(1, context + WARMUP_STEPS + args.steps + 2)
        for label, patch in variants(args, engine.config):
            try:
                with patch:
                    seconds = step_seconds(runner, context, args.steps)
            except triton.runtime.errors.OutOfResources as error:  # a launch setting too large for the device
                print(f"{context:6d} keys  {label:50s} {error}", flush=True)
                continue
            print(f"{context:6d} keys  {label:50s} {seconds * 1e3:.3f} ms {1 / seconds:.0f} tok/s", flush=True)


if __name__ == "__main__":
    main()
