"""One MoE layer per implementation: time (CUDA-graph replay, rotated weights), GB/s, % of copy bandwidth, error.

GB/s counts the unique expert bytes a call must read (each routed expert's w13 and w2 once; MXFP8 weights: fp8 data
plus the uint8 scales), the floor of any implementation; the roofline is the device-to-device copy bandwidth
measured in the same run. Each weight format ("bf16", "mxfp8": the same weights quantised) is timed on the paths
that take it; the error is against the float64 reference on the weights as given (MX: exactly dequantised).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from warpcode.bench.timing import L2_BYTES, measure_copy_bandwidth, time_per_call
from warpcode.kernels.expert_centric import moe_expert_centric
from warpcode.kernels.moe_reference import moe_reference, route_reference
from warpcode.kernels.mx import WEIGHT_FORMATS, dequantize_any, quantize_mxfp8, scale_columns
from warpcode.kernels.warp_decode import moe_warp_decode

MoeCall = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class MoeShape:
    hidden: int
    intermediate: int
    experts: int
    top_k: int

    def expert_bytes(self, dtype: torch.dtype, mx: bool = False) -> int:
        """Bytes of one expert's w13 and w2: in `dtype`, or MXFP8 (one byte per weight plus one per 32 along K)."""
        if not mx:
            return 3 * self.hidden * self.intermediate * torch.finfo(dtype).bits // 8
        scales = 2 * self.intermediate * scale_columns(self.hidden) + self.hidden * scale_columns(self.intermediate)
        return 3 * self.hidden * self.intermediate + scales


@dataclass
class BenchRow:
    path: str
    batch: int
    microseconds: float
    gigabytes_per_second: float
    percent_of_copy: float
    relative_error: float
    timing: str
    speedup_vs_transformers: float | None = None
    weights: str = "bf16"  # the expert weights' format: "bf16" (x's dtype) or "mxfp8"


def parse_tuner_args(
    description: str,
    default_batches: str,
    argv: list[str] | None,
    weight_format: bool = False,
    register_caps: bool = False,
) -> tuple[argparse.Namespace, MoeShape, list[int]]:
    """The MoE tuners' command line: --shape H,I,E,K, --batch (token counts, ascending) and --write FILE (and, for
    tuners with configs per weight format, --weights bf16|mxfp8; for those that try register caps, --register-caps
    N,M, a tuple of ints, empty by default)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--shape", required=True, help="H,I,E,K")
    parser.add_argument("--batch", default=default_batches)
    parser.add_argument("--write", type=Path, help="merge the results into this JSON config file")
    if weight_format:
        parser.add_argument("--weights", choices=WEIGHT_FORMATS, default="bf16", help="expert weight format")
    if register_caps:
        parser.add_argument(
            "--register-caps", type=register_cap_list, default=(), help="also try these registers a thread (maxnreg)"
        )
    args = parser.parse_args(argv)
    return args, MoeShape(*map(int, args.shape.split(","))), sorted(map(int, args.batch.split(",")))


def register_cap_list(text: str) -> tuple[int, ...]:
    """ "168,128" -> (168, 128): register caps ptxas accepts (24-255), else an argparse error naming the bad one."""
    caps = []
    for item in filter(None, text.split(",")):
        if not item.strip().isdigit() or not 24 <= int(item) <= 255:
            raise argparse.ArgumentTypeError(f"register caps are 24-255 registers a thread, got {item!r}")
        caps.append(int(item))
    return tuple(caps)


def gather_bmm(x, topk_weights, topk_ids, w13, w2) -> torch.Tensor:
    """The plain-PyTorch baseline (gpt-fast style): gather each slot's expert weights (MXFP8: then dequantise them
    to x's dtype), then batched GEMVs."""
    intermediate = w2.shape[2]
    gate_up = torch.einsum("th,tkrh->tkr", x, dequantize_any(w13[topk_ids], x.dtype))  # [T, K, 2I]
    hidden = torch.nn.functional.silu(gate_up[..., :intermediate]) * gate_up[..., intermediate:]
    per_slot = torch.einsum("tki,tkhi->tkh", hidden, dequantize_any(w2[topk_ids], x.dtype))  # [T, K, H]
    return torch.einsum("tkh,tk->th", per_slot, topk_weights.to(x.dtype))


def transformers_paths(shape: MoeShape) -> dict[str, MoeCall]:
    """transformers' own experts implementations on the same weights, when transformers is installed."""
    try:
        from transformers import Qwen3MoeConfig
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts
    except ImportError:
        return {}
    paths = {}
    for implementation in ("eager", "grouped_mm", "batched_mm"):
        config = Qwen3MoeConfig(
            hidden_size=shape.hidden,
            moe_intermediate_size=shape.intermediate,
            num_experts=shape.experts,
            num_experts_per_tok=shape.top_k,
        )
        config._experts_implementation = implementation
        with torch.device("meta"):
            module = Qwen3MoeExperts(config)
        paths[f"transformers-{implementation}"] = _bind_weights_per_call(module)
    return paths


def _bind_weights_per_call(module: torch.nn.Module) -> MoeCall:
    def call(x, topk_weights, topk_ids, w13, w2):
        module.gate_up_proj = torch.nn.Parameter(w13, requires_grad=False)
        module.down_proj = torch.nn.Parameter(w2, requires_grad=False)
        return module(x, topk_ids, topk_weights.to(x.dtype))

    return call


def all_paths(shape: MoeShape) -> dict[str, MoeCall]:
    return {
        "warp-decode": moe_warp_decode,
        "expert-centric": moe_expert_centric,
        "torch-gather-bmm": gather_bmm,
        **transformers_paths(shape),
    }


MX_PATHS = {"warp-decode", "expert-centric", "torch-gather-bmm"}  # the paths that take MXFP8 weights


def make_layers(
    shape: MoeShape, batch: int, dtype: torch.dtype, device: torch.device, count: int, mx: bool = False
) -> list[tuple]:
    """`count` independent layers (weights + routed tokens) so rotated calls are not served from L2; with `mx` the
    weights are quantised to MXFP8 (the same weights and tokens as without, for one seed)."""
    generator = torch.Generator(device=device).manual_seed(batch)
    layers = []
    for _ in range(count):
        x = torch.randn(batch, shape.hidden, device=device, dtype=dtype, generator=generator)
        w13 = torch.randn(
            shape.experts, 2 * shape.intermediate, shape.hidden, device=device, dtype=dtype, generator=generator
        ) / math.sqrt(shape.hidden)
        w2 = torch.randn(
            shape.experts, shape.hidden, shape.intermediate, device=device, dtype=dtype, generator=generator
        ) / math.sqrt(shape.intermediate)
        logits = torch.randn(batch, shape.experts, device=device, generator=generator)
        topk_weights, topk_ids = route_reference(logits, shape.top_k)
        if mx:
            w13, w2 = quantize_mxfp8(w13), quantize_mxfp8(w2)
        layers.append((x, topk_weights, topk_ids, w13, w2))
    return layers


def layer_count(shape: MoeShape, batch: int, dtype: torch.dtype, memory_budget: int, mx: bool = False) -> int:
    touched = min(shape.experts, batch * shape.top_k) * shape.expert_bytes(dtype, mx)
    layer_bytes = shape.experts * shape.expert_bytes(dtype, mx)
    wanted = max(2, math.ceil(4 * L2_BYTES / touched))
    return max(1, min(wanted, 16, memory_budget // layer_bytes))


def run_moe_bench(
    shape: MoeShape,
    batches: list[int],
    paths: list[str] | None = None,
    dtype=torch.bfloat16,
    device: str = "cuda",
    weights: tuple[str, ...] = ("bf16",),
) -> Iterator[BenchRow | float]:
    """Yields the measured copy bandwidth (bytes/s) first, then one BenchRow per (batch, weight format, path);
    "bf16" weights are in `dtype`, "mxfp8" ones the same weights quantised (on the paths in MX_PATHS)."""
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError(f"bench moe times CUDA kernels; device {device} is not a CUDA device")
    if not torch.cuda.is_available():
        raise RuntimeError("bench moe needs a CUDA GPU and none is visible (run it on the GPU machine)")
    available = all_paths(shape)
    unknown = set(paths or []) - set(available)
    if unknown:
        raise ValueError(f"unknown path(s) {sorted(unknown)}; choose from {sorted(available)}")
    unknown = set(weights) - set(WEIGHT_FORMATS)
    if unknown or not weights:
        raise ValueError(f"unknown weight format(s) {sorted(unknown)}; choose from {list(WEIGHT_FORMATS)}")
    chosen = {name: available[name] for name in (paths or available)}
    copy_bandwidth = measure_copy_bandwidth(device)
    yield copy_bandwidth
    budget = int(torch.cuda.mem_get_info(device)[0] * 0.6)
    for batch in batches:
        rows = []
        for weight_format in weights:
            rows += _time_paths(shape, batch, dtype, device, budget, weight_format, chosen, copy_bandwidth)
        fastest_hf = min((row.microseconds for row in rows if row.path.startswith("transformers")), default=None)
        for row in rows:
            if fastest_hf is not None:
                row.speedup_vs_transformers = fastest_hf / row.microseconds
            yield row


def _time_paths(shape, batch, dtype, device, budget, weight_format, chosen, copy_bandwidth) -> list[BenchRow]:
    mx = weight_format == "mxfp8"
    layers = make_layers(shape, batch, dtype, device, layer_count(shape, batch, dtype, budget, mx), mx)
    unique_bytes = sum(torch.unique(ids).numel() for _, _, ids, _, _ in layers) / len(layers)
    unique_bytes *= shape.expert_bytes(dtype, mx)
    reference = float64_reference(*layers[0])
    rows = []
    for name, call in chosen.items():
        if mx and name not in MX_PATHS:
            continue
        replays = 10 if name in SLOW_PATHS else 50
        try:
            error = _relative_error(call(*layers[0]), reference)
            try:
                seconds, mode = time_per_call(call, layers, replays, capture=name not in HOST_SYNCING_PATHS)
            except RuntimeError:  # synchronises with the host somewhere inside: no graph, eager timing
                seconds, mode = time_per_call(call, layers, replays, capture=False)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            continue  # the gather baselines copy every routed expert's weights, which stops fitting at large T
        timings = [(name, seconds, mode)]
        if name.startswith("transformers") and mode == "graph":  # also as transformers runs by default
            timings.append((name, *time_per_call(call, layers, replays, capture=False)))
        for label, seconds, mode in timings:
            rate = unique_bytes / seconds
            rows.append(
                BenchRow(
                    label, batch, seconds * 1e6, rate / 1e9, 100 * rate / copy_bandwidth, error, mode,
                    weights=weight_format,
                )
            )  # fmt: skip
    return rows


SLOW_PATHS = {"transformers-eager", "torch-gather-bmm"}
HOST_SYNCING_PATHS = {"transformers-eager"}  # loops over experts found with .nonzero(): cannot be graph-captured


def float64_reference(x, topk_weights, topk_ids, w13, w2) -> torch.Tensor:
    """The exact result in float64 (inputs upcast, output not rounded back to x.dtype)."""
    return moe_reference(x.double(), topk_weights.double(), topk_ids, w13, w2, compute_dtype=torch.float64)


def _relative_error(out: torch.Tensor, reference: torch.Tensor) -> float:
    return ((out.double() - reference).norm() / reference.norm()).item()
