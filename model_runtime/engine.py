"""The inference engine: load a checkpoint (or random weights), full-sequence logits, batched generation, streaming.

Generation prefills a batch of prompts in one forward pass into a static KV cache, then decodes one token per step
for the whole batch (decode_runner.py: CUDA graphs on the GPU, the same step eagerly elsewhere). Sequences that
finish keep their row until the batch is done.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.decode_runner import DecodeRunner
from warpcode.model_runtime.detokenize import IncrementalDetokenizer, StopStringFilter
from warpcode.model_runtime.model import MoeForCausalLM, build_model, init_random_weights
from warpcode.model_runtime.presets import get_preset
from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.tokenizer import Tokenizer, eos_token_ids
from warpcode.model_runtime.weights import load_weights

WEIGHT_FORMATS = ("bf16", "mxfp8")


class WeightFormatNotSupported(NotImplementedError):
    """A weight format the runtime names but has not built yet."""


@dataclass
class GenerationStats:
    prompt_tokens: int = 0  # real (unpadded) prompt tokens over the batch
    prompt_seconds: float = 0.0  # prefill, including the first sampled token
    new_tokens: int = 0  # decoded tokens over the batch, after the first
    decode_seconds: float = 0.0

    @property
    def prompt_tokens_per_second(self) -> float:
        return self.prompt_tokens / self.prompt_seconds if self.prompt_seconds else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        return self.new_tokens / self.decode_seconds if self.decode_seconds else 0.0


class Engine:
    def __init__(self, model: MoeForCausalLM, tokenizer: Tokenizer | None = None, eos_ids: Iterable[int] = ()):
        self.model = model
        self.config: ModelConfig = model.config
        self.tokenizer = tokenizer
        self.eos_token_ids = list(eos_ids)
        parameter = next(model.parameters())
        self.device, self.dtype = parameter.device, parameter.dtype
        self.last_stats = GenerationStats()
        self._runner: DecodeRunner | None = None  # created at the first generation

    @property
    def runner(self) -> DecodeRunner:
        """The decode path (static KV cache, CUDA graphs on the GPU), created at first use."""
        if self._runner is None:
            self._runner = DecodeRunner(self.model)
        return self._runner

    @torch.inference_mode()
    def logits(self, input_ids, attention_mask=None) -> torch.Tensor:
        """Full forward without a cache: int [B, T] -> fp32 [B, T, V]. `attention_mask` [B, T] (1 = token,
        0 = padding, left or right) gives each sequence its own positions; logits at padding are meaningless."""
        input_ids = torch.as_tensor(input_ids, dtype=torch.long, device=self.device)
        if input_ids.dim() == 1:
            input_ids = input_ids[None]
        if attention_mask is None:
            token_valid = torch.ones_like(input_ids, dtype=torch.bool)
        else:
            token_valid = torch.as_tensor(attention_mask, device=self.device).bool()
        self._check_token_ids(input_ids)
        positions = (token_valid.long().cumsum(dim=1) - 1).clamp(min=0)
        return self.model(input_ids, positions, token_valid).float()

    def generate(
        self,
        prompt_ids: list[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
        stop_strings: Iterable[str] = (),
    ) -> list[int]:
        """The new token ids (greedy at temperature 0), ending with the stop token or the token that completed a
        stop string, if one did. stop_token_ids None: the checkpoint's EOS ids; []: none."""
        return self.generate_batch(
            [prompt_ids], max_new_tokens, temperature, top_k, top_p, min_p, seed, stop_token_ids, stop_strings
        )[0]

    def generate_batch(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
        stop_strings: Iterable[str] = (),
    ) -> list[list[int]]:
        """`generate` for several prompts of any lengths at once; the results equal one-at-a-time generation."""
        stop_ids = set(self.eos_token_ids if stop_token_ids is None else stop_token_ids)
        watchers = [self._stop_string_watcher(stop_strings) for _ in prompts] if stop_strings else None
        outputs: list[list[int]] = [[] for _ in prompts]
        done = [False] * len(prompts)
        steps = self._decode(prompts, max_new_tokens, SamplingParams(temperature, top_k, top_p, min_p), seed)
        for tokens in steps:
            for i, token in enumerate(tokens):
                if done[i]:
                    continue
                outputs[i].append(token)
                done[i] = token in stop_ids or (watchers is not None and watchers[i](token))
            if all(done):
                break
        steps.close()
        return outputs

    def stream(
        self,
        prompt_ids: list[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
        stop_strings: Iterable[str] = (),
    ) -> Iterator[str]:
        """Like `generate`, yielding text deltas as they become final; stop tokens and stop strings not included."""
        tokenizer = self._require_tokenizer("streaming text")
        stop_ids = set(self.eos_token_ids if stop_token_ids is None else stop_token_ids)
        detokenizer = IncrementalDetokenizer(lambda ids: tokenizer.decode(ids, skip_special_tokens=True))
        stops = StopStringFilter(stop_strings)
        steps = self._decode([prompt_ids], max_new_tokens, SamplingParams(temperature, top_k, top_p, min_p), seed)
        for (token,) in steps:
            if token in stop_ids:
                break
            if text := stops.feed(detokenizer.push(token)):
                yield text
            if stops.stopped:
                break
        steps.close()
        if text := stops.feed(detokenizer.flush()) + stops.flush():
            yield text

    def _stop_string_watcher(self, stop_strings: Iterable[str]):
        """A per-sequence callable: token id -> True once the decoded text contains a stop string."""
        tokenizer = self._require_tokenizer("stop strings")
        detokenizer = IncrementalDetokenizer(lambda ids: tokenizer.decode(ids, skip_special_tokens=True))
        stops = StopStringFilter(stop_strings)

        def watch(token: int) -> bool:
            stops.feed(detokenizer.push(token))
            return stops.stopped

        return watch

    def _check_token_ids(self, ids: torch.Tensor) -> None:
        # An out-of-range id would fail deep inside the embedding (a device-side assert on GPUs).
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
            raise ValueError(
                f"token ids must be in [0, {self.config.vocab_size}), got {int(ids.min())}..{int(ids.max())}"
            )

    def _require_tokenizer(self, purpose: str) -> Tokenizer:
        if self.tokenizer is None:
            raise ValueError(f"{purpose} needs a tokenizer, and this model was loaded without tokenizer.json")
        return self.tokenizer

    def _decode(
        self, prompts: list[list[int]], max_new_tokens: int, sampling: SamplingParams, seed: int | None
    ) -> Iterator[list[int]]:
        """Yields the next token of every sequence, step by step; the caller stops iterating when it is done."""
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if max_new_tokens <= 0:
            return
        for prompt in prompts:
            self._check_token_ids(torch.as_tensor(prompt))
        batch, longest = len(prompts), max(len(p) for p in prompts)
        self.runner.reserve(batch, longest + max_new_tokens)
        stats = self.last_stats = GenerationStats(prompt_tokens=sum(len(p) for p in prompts))
        seed = random.getrandbits(31) if seed is None else seed
        start = time.perf_counter()
        tokens = self.runner.prefill(prompts, sampling, seed)
        stats.prompt_seconds = time.perf_counter() - start
        yield tokens
        start = time.perf_counter()  # wall time from here: the device keeps decoding while the caller works
        steps = self.runner.decode(batch, sampling)
        for tokens in itertools.islice(steps, max_new_tokens - 1):
            stats.new_tokens += batch
            stats.decode_seconds = time.perf_counter() - start
            yield tokens
        steps.close()


def load(
    path: str | Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    weights: str = "bf16",
    show_progress: bool = True,
) -> Engine:
    """An Engine for the Hugging Face checkpoint directory `path` (config.json + safetensors [+ tokenizer]).

    dtype: compute and storage dtype of the unquantised weights (default bfloat16 on GPUs, float32 on the CPU).
    weights: "bf16" loads the checkpoint's weights as they are, converted to `dtype`; "mxfp8" is not built yet.
    """
    _check_weight_format(weights)
    device = torch.device(device)
    dtype = dtype or (torch.float32 if device.type == "cpu" else torch.bfloat16)
    config = ModelConfig.from_pretrained(path)
    model = build_model(config, device, dtype)
    load_weights(model, path, show_progress=show_progress)
    tokenizer = Tokenizer.from_dir(path)
    return Engine(model, tokenizer, eos_token_ids(path, config.eos_token_ids, tokenizer))


def load_random(
    preset: str | ModelConfig, device: str | torch.device = "cpu", dtype: torch.dtype | None = None, seed: int = 0
) -> Engine:
    """An Engine with random weights at a preset's (or a config's) shape, built directly on `device`."""
    config = get_preset(preset) if isinstance(preset, str) else preset
    device = torch.device(device)
    model = build_model(config, device, dtype or (torch.float32 if device.type == "cpu" else torch.bfloat16))
    init_random_weights(model, seed)
    return Engine(model, None, config.eos_token_ids)


def _check_weight_format(weights: str) -> None:
    if weights == "mxfp8":
        raise WeightFormatNotSupported(
            "weights='mxfp8' (MX fp8 expert weights) is not built yet in warpcode.model_runtime; use weights='bf16'"
        )
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"unknown weights format {weights!r} (known: {', '.join(WEIGHT_FORMATS)})")
