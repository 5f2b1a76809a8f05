"""The inference engine: load a checkpoint (or random weights), full-sequence logits, generation, streaming.

Generation goes through one serving engine per Engine (serving/engine_core.py: continuous batching over a paged
KV cache with prefix caching), started at the first request: `submit` from any thread, and `generate`,
`generate_batch` and `stream` on top of it, so every caller in the process shares the model and its cache.
`runner` is the static-batch decode path the benchmarks compare with.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from warpcode.model_runtime.config import ModelConfig
from warpcode.model_runtime.decode_runner import DecodeRunner
from warpcode.model_runtime.fp8_checkpoint import check_quantization
from warpcode.model_runtime.model import MoeForCausalLM, build_model, init_random_weights
from warpcode.model_runtime.presets import get_preset
from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.serving.config import EngineConfig
from warpcode.model_runtime.serving.engine_core import EngineCore
from warpcode.model_runtime.serving.grammar import GrammarMatcher, Grammars
from warpcode.model_runtime.serving.logits_processors import NO_PROCESSING, LogitsProcessing
from warpcode.model_runtime.serving.request import RequestHandle
from warpcode.model_runtime.speculative import SpeculativeConfig
from warpcode.model_runtime.tokenizer import Tokenizer, eos_token_ids
from warpcode.model_runtime.weights import load_weights


@dataclass
class GenerationStats:
    prompt_tokens: int = 0  # real prompt tokens over the batch
    cached_tokens: int = 0  # of those, served from the prefix cache
    prompt_seconds: float = 0.0  # until the last first token
    new_tokens: int = 0  # generated tokens over the batch, after each request's first
    decode_seconds: float = 0.0

    @property
    def prompt_tokens_per_second(self) -> float:
        return self.prompt_tokens / self.prompt_seconds if self.prompt_seconds else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        return self.new_tokens / self.decode_seconds if self.decode_seconds else 0.0

    @classmethod
    def of(cls, handles: list[RequestHandle]) -> GenerationStats:
        stats = [h.stats for h in handles]
        start = min(s.submitted_at for s in stats)
        firsts = [s.first_token_at for s in stats if s.first_token_at is not None]
        ends = [s.finished_at for s in stats if s.finished_at is not None]
        return cls(
            prompt_tokens=sum(s.prompt_tokens for s in stats),
            cached_tokens=sum(s.cached_tokens for s in stats),
            prompt_seconds=max(firsts) - start if firsts else 0.0,
            new_tokens=sum(max(s.completion_tokens - 1, 0) for s in stats),
            decode_seconds=max(ends) - max(firsts) if firsts and ends else 0.0,
        )


class Engine:
    def __init__(
        self,
        model: MoeForCausalLM,
        tokenizer: Tokenizer | None = None,
        eos_ids: Iterable[int] = (),
        serving: EngineConfig | None = None,
    ):
        self.model = model
        self.config: ModelConfig = model.config
        self.tokenizer = tokenizer
        self.eos_token_ids = list(eos_ids)
        parameter = next(model.parameters())
        self.device, self.dtype = parameter.device, parameter.dtype
        self.serving = serving or EngineConfig()
        if self.serving.speculative is None:  # the device's default: on where it is measured to pay
            speculative = SpeculativeConfig.for_device(None, self.device.type)
            self.serving = replace(self.serving, speculative=speculative)
        self.last_stats = GenerationStats()  # of this thread's last generate / generate_batch / stream
        self._runner: DecodeRunner | None = None  # created at the first static-batch use
        self._core: EngineCore | None = None  # started at the first request
        self._core_lock = threading.Lock()
        self._grammars: Grammars | None = None  # built at the first structured request (about 1 s on 150K tokens)

    @property
    def context_length(self) -> int:
        """The most tokens (prompt and generated) one sequence may hold."""
        return self.serving.max_model_len or self.config.context_length

    @property
    def core(self) -> EngineCore:
        """The serving engine (its thread, scheduler and paged cache), started at first use."""
        with self._core_lock:
            if self._core is None:
                self._runner = None  # the static path's cache gives its memory to the serving pool
                decode = None
                if self.tokenizer is not None:
                    tokenizer = self.tokenizer
                    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)
                self._core = EngineCore(self.model, self.serving, decode, self.eos_token_ids)
            return self._core

    @property
    def grammars(self) -> Grammars:
        """Structured generation's compiler over this model's tokenizer (which it needs)."""
        if self.tokenizer is None:
            raise ValueError("structured generation needs the model's tokenizer, and this model has none")
        with self._core_lock:
            if self._grammars is None:
                self._grammars = Grammars(self.tokenizer.tokenizer, self.config.vocab_size, self.eos_token_ids)
            return self._grammars

    @property
    def failure(self) -> str | None:
        """Why the serving engine stopped serving (an error no single request explained); None while it serves or
        before it starts."""
        core = self._core
        return None if core is None else core.failure

    @property
    def runner(self) -> DecodeRunner:
        """The static-batch decode path (benchmarks' reference), created at first use."""
        if self._runner is None:
            self._runner = DecodeRunner(self.model, block_size=self.serving.block_size)
        return self._runner

    def submit(
        self,
        prompt_ids: list[int],
        max_new_tokens: int,
        sampling: SamplingParams | None = None,
        seed: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
        stop_strings: Iterable[str] = (),
        processing: LogitsProcessing = NO_PROCESSING,
        grammar: GrammarMatcher | None = None,
        documents: Iterable[Iterable[int]] = (),
    ) -> RequestHandle:
        """Queues one request on the serving engine; its handle yields outputs as they come (any thread, or
        `async for`). Raises RequestRefused when it can never fit. stop_token_ids None: the checkpoint's EOS ids.
        `processing`: logit_bias, penalties and the logprobs to report (serving/logits_processors.py). `grammar`: a
        matcher from `grammars` that every generated token stays inside (this request's own: one per request).
        `documents`: token sequences speculative decoding may draft from besides the request's own tokens (the
        plain text of files an agent read); ignored when speculation is off."""
        return self.core.submit(prompt_ids, max_new_tokens, sampling or SamplingParams(), seed, stop_token_ids,
                                stop_strings, processing, grammar, documents)  # fmt: skip

    def warm_up(self, max_batch: int, max_tokens: int) -> int:
        """Captures the serving engine's decode graphs for up to `max_batch` streams of up to `max_tokens` tokens
        now rather than at first use (GPU; nothing to do elsewhere). Call it before serving requests."""
        return self.core.warm_up(max_batch, max_tokens)

    def shutdown(self) -> None:
        """Stops the serving engine's thread; requests still running end with finish_reason "abort"."""
        with self._core_lock:
            core, self._core = self._core, None
        if core is not None:
            core.shutdown()

    def __del__(self, _finalizing=sys.is_finalizing) -> None:  # bound now: module globals are gone at exit
        # The engine thread holds the model and the cache: without this an Engine dropped unstopped keeps both.
        # (At interpreter exit the engines were stopped already, by engine_core's atexit hook.)
        if getattr(self, "_core", None) is not None and not _finalizing():
            self.shutdown()

    @torch.inference_mode()
    def logits(self, input_ids, attention_mask=None) -> torch.Tensor:
        """The reference forward (model.py), without a cache: int [B, T] -> fp32 [B, T, V]. `attention_mask`
        [B, T] (1 = token, 0 = padding, left or right) gives each sequence its own positions; logits at padding are
        meaningless."""
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
        """`generate` for several prompts at once (prompt i seeded seed + i); the results equal one-at-a-time
        generation."""
        if max_new_tokens <= 0:
            return [[] for _ in prompts]
        sampling = SamplingParams(temperature, top_k, top_p, min_p)
        handles = []
        try:
            for i, prompt in enumerate(prompts):
                request_seed = None if seed is None else seed + i
                handles.append(self.submit(prompt, max_new_tokens, sampling, request_seed, stop_token_ids,
                                           stop_strings))  # fmt: skip
            outputs = [handle.result() for handle in handles]
        finally:
            for handle in handles:
                handle.cancel()
        self.last_stats = GenerationStats.of(handles)
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
        """Like `generate`, yielding text deltas as they become final; stop tokens and stop strings not included.
        Closing the iterator cancels the request."""
        if self.tokenizer is None:
            raise ValueError("streaming text needs a tokenizer, and this model was loaded without tokenizer.json")
        if max_new_tokens <= 0:
            return
        sampling = SamplingParams(temperature, top_k, top_p, min_p)
        handle = self.submit(prompt_ids, max_new_tokens, sampling, seed, stop_token_ids, stop_strings)
        try:
            for output in handle:
                if output.text:
                    yield output.text
        finally:
            handle.cancel()
            self.last_stats = GenerationStats.of([handle])

    def _check_token_ids(self, ids: torch.Tensor) -> None:
        # An out-of-range id would fail deep inside the embedding (a device-side assert on GPUs).
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
            raise ValueError(
                f"token ids must be in [0, {self.config.vocab_size}), got {int(ids.min())}..{int(ids.max())}"
            )


def load(
    path: str | Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    weights: str = "bf16",
    show_progress: bool = True,
    serving: EngineConfig | None = None,
    **serving_options,
) -> Engine:
    """An Engine for the Hugging Face checkpoint directory `path` (config.json + safetensors [+ tokenizer]).

    dtype: compute and storage dtype of the unquantised weights (default bfloat16 on GPUs, float32 on the CPU).
    weights: "bf16" loads the checkpoint's weights converted to `dtype`; "mxfp8" quantises the projections and
    experts to MXFP8 on the device as they are read (mx_weights.py). Block-FP8 checkpoints (fp8_checkpoint.py) load
    either way, dequantised on the device tensor by tensor.
    serving / serving_options: the serving engine's settings (EngineConfig, or its fields: kv_cache_gb=...).
    """
    device = torch.device(device)
    dtype = dtype or (torch.float32 if device.type == "cpu" else torch.bfloat16)
    config = ModelConfig.from_pretrained(path)
    check_quantization(path)
    model = build_model(config, device, dtype, weights)
    load_weights(model, path, show_progress=show_progress)
    tokenizer = Tokenizer.from_dir(path)
    eos = eos_token_ids(path, config.eos_token_ids, tokenizer)
    return Engine(model, tokenizer, eos, _serving_config(serving, serving_options))


def load_random(
    preset: str | ModelConfig,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    seed: int = 0,
    serving: EngineConfig | None = None,
    weights: str = "bf16",
    **serving_options,
) -> Engine:
    """An Engine with random weights at a preset's (or a config's) shape, built directly on `device`; with
    weights="mxfp8" each MX weight is drawn and quantised there one expert at a time (peak memory: the MX model)."""
    config = get_preset(preset) if isinstance(preset, str) else preset
    device = torch.device(device)
    model = build_model(config, device, dtype or (torch.float32 if device.type == "cpu" else torch.bfloat16), weights)
    init_random_weights(model, seed)
    return Engine(model, None, config.eos_token_ids, _serving_config(serving, serving_options))


def _serving_config(serving: EngineConfig | None, options: dict) -> EngineConfig:
    try:
        return replace(serving or EngineConfig(), **options)
    except TypeError as exc:
        raise ValueError(f"unknown serving engine setting: {exc}") from None
