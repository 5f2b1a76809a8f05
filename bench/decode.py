"""Decode benchmark of the engine path: tok/s, ms/token, bytes read per step and % of the copy-bandwidth roofline.

    warpcode bench decode --preset qwen3-30b-a3b --random-weights --batch 1,8,32 --context 512,8192 [--json]

Each (batch, context) starts from a cache already holding `context` tokens per row (random keys and values; a
prefill that long would only add set-up time) and decodes through `DecodeRunner.decode`, the path `generate` uses:
CUDA-graph replays with the tokens read back one step behind. tok/s counts every row's tokens (batch x steps over
the wall time). Bytes per step: every weight except the routed experts and the embedding table, the experts that
uniform random routing touches in expectation (E * (1 - (1 - K/E)^B) per layer), the B embedding rows, and the keys
and values attended to.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.decode_runner import DecodeRunner
from warpcode.model_runtime.engine import Engine
from warpcode.model_runtime.mx_weights import named_weights
from warpcode.model_runtime.sampling import SamplingParams


@dataclass
class DecodeBenchRow:
    path: str  # "warpcode" or "transformers"
    batch: int
    context: int
    tokens_per_second: float  # over all rows
    ms_per_step: float
    bytes_per_step: int  # weights + KV cache read by one step
    percent_of_roofline: float  # the time reading those bytes at copy bandwidth takes, over the measured step time


def bytes_per_step(config: ModelConfig, model: torch.nn.Module, batch: int, context: int) -> int:
    """Bytes one decode step reads: weights (routed experts in expectation under uniform routing; MX weights at
    their data + scales size) + KV cache."""
    element = model.model.embed_tokens.weight.element_size()  # the model dtype: embeddings and the KV cache
    experts, top_k = config.num_experts, config.num_experts_per_tok
    expert_fraction = 1 - (1 - top_k / experts) ** batch  # expected share of a layer's experts touched
    total = 0
    for name, weight in named_weights(model):
        if name.endswith(("experts.w13", "experts.w2")):
            total += round(weight.nbytes * expert_fraction)
        elif name.endswith("embed_tokens.weight") and not config.tie_word_embeddings:
            total += batch * weight.shape[1] * element
        else:
            total += weight.nbytes
    kv_per_token = 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * element
    return total + batch * (context + 1) * kv_per_token


WARMUP_STEPS = 16  # untimed replays after the capture: the first replays in a process measured ~1% slower


def decode_seconds(runner: DecodeRunner, batch: int, context: int, steps: int) -> float:
    """Seconds per greedy step of rows [0, batch) from a random cache of `context` tokens each: the first step
    captures the graph (if needed) and compiles kernels, WARMUP_STEPS more run untimed, then `steps` are timed.
    Call `runner.reserve(batch, context + WARMUP_STEPS + steps + 2)` first."""
    runner.start_from_random_cache(batch, context)
    decode = runner.decode(batch, SamplingParams())
    for _ in range(1 + WARMUP_STEPS):
        next(decode)
    _synchronize(runner.device)
    start = time.perf_counter()
    for _ in range(steps):
        next(decode)
    seconds = (time.perf_counter() - start) / steps
    decode.close()
    return seconds


def run_decode_bench(
    engine: Engine, batches: list[int], contexts: list[int], copy_bandwidth: float, steps: int = 64
) -> Iterator[DecodeBenchRow]:
    runner = engine.runner
    for context, batch in itertools.product(contexts, batches):
        runner.reserve(batch, context + WARMUP_STEPS + steps + 2)
        seconds = decode_seconds(runner, batch, context, steps)
        read = bytes_per_step(engine.config, engine.model, batch, context)
        yield DecodeBenchRow(
            "warpcode", batch, context, batch / seconds, seconds * 1e3, read, 100 * read / copy_bandwidth / seconds
        )


@dataclass
class PrefillTiming:
    prompt_tokens: int
    cold_seconds: float  # best over distinct prompts: nothing of them in the prefix cache
    cold_cached_tokens: int  # prompt tokens the prefix cache served over the timed cold runs: 0 (checked)
    warm_seconds: float  # the last cold prompt again: served from the prefix cache, not a prefill figure
    warm_cached_tokens: int  # of the warm runs' prompt tokens, those the cache served (per run)


def time_prefill(engine: Engine, prompt_tokens: int, repeats: int = 3) -> PrefillTiming:
    """Seconds to prefill a prompt of `prompt_tokens` random tokens and sample its first token, best of `repeats`.

    The serving engine caches prefixes, so timing one prompt again times a cache hit (5 ms instead of 65 ms for
    2,000 tokens on an H200): every cold run gets its own prompt, each with its own first token (the cache matches
    a prefix from the first token on, so these share nothing), and the cached tokens are read back to prove it. The
    warm figure, the last prompt again, is what an agent's repeated prefix costs; reported apart."""
    generator = torch.Generator().manual_seed(0)
    vocab = engine.config.vocab_size

    def prompt(index: int) -> list[int]:
        return [index % vocab, *torch.randint(vocab, (prompt_tokens - 1,), generator=generator).tolist()]

    def seconds(ids: list[int]) -> tuple[float, int]:
        start = time.perf_counter()
        engine.generate(ids, 1, stop_token_ids=[])
        return time.perf_counter() - start, engine.last_stats.cached_tokens

    seconds(prompt(0))  # compiles the kernels
    prompts = [prompt(index) for index in range(1, repeats + 1)]
    cold = [seconds(ids) for ids in prompts]
    cached = sum(tokens for _, tokens in cold)
    if cached:
        raise RuntimeError(f"the prefix cache served {cached} tokens of prompts meant to be cold")
    warm = [seconds(prompts[-1]) for _ in range(repeats)]
    return PrefillTiming(prompt_tokens, min(s for s, _ in cold), cached, min(s for s, _ in warm), warm[-1][1])


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def transformers_decode_row(
    config: ModelConfig,
    batch: int,
    context: int,
    device: torch.device,
    read_bytes: int,
    copy_bw: float,
    steps: int = 16,
) -> DecodeBenchRow:
    """The same random-weight model in transformers (experts backend grouped_mm, which transformers switches to
    batched_mm for decode), timed as (generate steps + 1 tokens) - (generate 1 token) after a prompt of `context`
    tokens. `read_bytes`: this shape's bytes per step (bytes_per_step of our model), for the roofline column."""
    import transformers

    with torch.device(device):
        hf_model = transformers.AutoModelForCausalLM.from_config(to_transformers_config(config), dtype=torch.bfloat16)
    hf_model.eval()
    if hasattr(hf_model, "set_experts_implementation"):
        hf_model.set_experts_implementation("grouped_mm")
    prompt = torch.randint(config.vocab_size, (batch, context), device=device)

    def generate_seconds(new_tokens: int) -> float:
        _synchronize(device)
        start = time.perf_counter()
        hf_model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        _synchronize(device)
        return time.perf_counter() - start

    generate_seconds(2)  # warm-up
    seconds = (generate_seconds(steps + 1) - generate_seconds(1)) / steps
    return DecodeBenchRow(
        "transformers", batch, context, batch / seconds, seconds * 1e3, read_bytes, 100 * read_bytes / copy_bw / seconds
    )


def to_transformers_config(config: ModelConfig):
    """A transformers config of the same architecture and shape (random-weight comparisons)."""
    import transformers

    fields = dict(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        num_experts_per_tok=config.num_experts_per_tok,
        rms_norm_eps=config.rms_norm_eps,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=config.tie_word_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
    )
    if config.model_type == "mixtral":
        fields["num_local_experts"] = config.num_experts
    else:
        fields.update(num_experts=config.num_experts, norm_topk_prob=config.norm_topk_prob)
    if config.model_type in ("qwen3_moe", "qwen2_moe"):
        fields.update(head_dim=config.head_dim, moe_intermediate_size=config.expert_intermediate_size)
    return transformers.AutoConfig.for_model(config.model_type, **fields)


def copy_bandwidth(device: str | torch.device) -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), the ceiling decode is measured against."""
    device = torch.device(device)
    if device.type == "cuda":
        from warpcode.bench.timing import measure_copy_bandwidth

        return measure_copy_bandwidth(device)
    source = torch.ones(2**26)  # 256 MiB
    target = torch.empty_like(source)
    target.copy_(source)
    start = time.perf_counter()
    for _ in range(5):
        target.copy_(source)
    return 2 * 5 * source.numel() * source.element_size() / (time.perf_counter() - start)
