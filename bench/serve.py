"""Serving benchmark: the engine under concurrent streams, an agent-like multi-turn trace, a long prompt arriving
while streams decode, and cold prefill; the static-batch decode of bench_decode in the same run as the reference.

    warpcode bench serve --preset qwen3-30b-a3b --random-weights [--concurrency 1,8,32] [--json]

The decode graphs the runs need are captured first (Engine.warm_up) and the prefill kernels compiled at each
concurrency run's token counts. Every request ignores EOS (random weights) and each stream is read on its own
thread, which stamps every output as it arrives: time to first token is from submission, inter-token latency is
between a stream's outputs, and the steady-state tok/s counts the tokens of the window in which every stream of a
run was decoding. The trace ends with a "trace-median" row over its cached turns: the median TTFT beside the median
of the tokens each turn prefilled (its prompt less what the prefix cache served), the number its TTFT follows.

Every prompt is new to the prefix cache (its own first token) except the trace's later turns, which extend the
last turn as an agent's do: every TTFT but theirs is cold (to the cache; the kernels are warm), and each row
carries the tokens the cache served.
The default workload follows the model's context and the device (`default_workload`): the GPU one takes minutes,
the CPU one, for the tiny preset, seconds (the CPU run checks the harness; its figures are not a GPU's).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from warpcode.model_runtime.engine import Engine
from warpcode.model_runtime.serving.request import RequestHandle, tokens_per_verify_step


@dataclass
class ServeBenchRow:
    scenario: str  # "concurrency", "trace", "trace-median", "long-prompt", "cold-prefill"
    streams: int  # concurrent requests; for "trace-median", the cached turns it takes the medians over
    prompt_tokens: int  # per request (the last turn's, for the trace)
    new_tokens: int
    tokens_per_second: float  # steady state over every stream; 0 where not meaningful
    ttft_ms_p50: float
    ttft_ms_p99: float
    itl_ms_p50: float
    itl_ms_p99: float
    itl_ms_max: float
    cache_hit_rate: float  # prompt tokens served from the prefix cache / prompt tokens
    cached_tokens: int  # prompt tokens the prefix cache served, over the row's requests (0: a cold TTFT)
    prefill_tokens_p50: float  # per request: prompt tokens prefilled (not served from the cache), the median
    tokens_per_verify_step: float = 0.0  # speculative decoding over the row's requests (0: it verified no draft)
    note: str = ""


@dataclass
class ServeWorkload:
    concurrency: list[int]  # streams per concurrency run
    prompt_tokens: int  # per stream (the concurrency runs and the streams the long prompt meets)
    new_tokens: int
    trace_max: int  # the multi-turn trace grows its prompt up to this (0: skip)
    long_prompt: int  # 0: skip
    cold_prefill: list[int]

    def longest_sequences(self) -> dict[str, int]:
        """Tokens (prompt and new) of the longest sequence each option asks for, to check against the context."""
        return {
            "--prompt + --new-tokens": self.prompt_tokens + self.new_tokens,
            "--trace-max": self.trace_max,
            "--long-prompt": self.long_prompt + 1,
            "--cold-prefill": max(self.cold_prefill, default=0) + 1,
        }

    def describe(self) -> str:
        """What a run of this workload measures, in a sentence for the user."""
        parts = [
            f"{','.join(map(str, self.concurrency))} concurrent streams of {self.prompt_tokens}-token prompts and "
            f"{self.new_tokens} new tokens",
            f"an agent's multi-turn trace up to {self.trace_max} tokens (its later turns reuse the prefix cache, as "
            "an agent's do; its last turn is rerun cold)" if self.trace_max else "",
            f"a {self.long_prompt}-token prompt arriving while 8 streams decode" if self.long_prompt else "",
            f"cold prefill of {','.join(map(str, self.cold_prefill))} tokens" if self.cold_prefill else "",
        ]  # fmt: skip
        return (
            "; ".join(part for part in parts if part) + ". Every TTFT but the trace's cached turns is of a prompt "
            "new to the prefix cache (column 'cached': the share of the prompts it served)."
        )


# The GPU workload: what BENCHMARKS.md reports. The CPU one runs the same scenarios small enough for seconds.
GPU_WORKLOAD = ServeWorkload([1, 8, 32], 512, 256, 16384, 32768, [2048, 16384])
CPU_WORKLOAD = ServeWorkload([1, 4], 128, 32, 1536, 1024, [512])


def default_workload(context_length: int, device_type: str) -> ServeWorkload:
    """The device's workload with every length inside `context_length` (a 4,096-token model gets no 32K prompt)."""
    base = GPU_WORKLOAD if device_type == "cuda" else CPU_WORKLOAD
    longest = context_length - 1  # room for the one token a prefill-only request generates
    return replace(
        base,
        trace_max=min(base.trace_max, context_length),
        long_prompt=min(base.long_prompt, longest),
        cold_prefill=sorted({min(tokens, longest) for tokens in base.cold_prefill}),
    )


@dataclass
class _Stream:
    handle: RequestHandle
    stamps: list[tuple[float, int]]  # (arrival, tokens) per output


def _consume(handles: list[RequestHandle]) -> list[_Stream]:
    streams = [_Stream(h, []) for h in handles]

    def read(stream: _Stream) -> None:
        for output in stream.handle:
            if output.token_ids:
                stream.stamps.append((time.perf_counter(), len(output.token_ids)))

    threads = [threading.Thread(target=read, args=(s,)) for s in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return streams


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _row(scenario: str, streams: list[_Stream], prompt_tokens: int, new_tokens: int, note: str = "") -> ServeBenchRow:
    ttft = [(s.stamps[0][0] - s.handle.stats.submitted_at) * 1e3 for s in streams if s.stamps]
    gaps = [(b[0] - a[0]) * 1e3 for s in streams for a, b in zip(s.stamps, s.stamps[1:], strict=False)]
    start = max(s.stamps[0][0] for s in streams)  # every stream decoding from here
    end = min(s.stamps[-1][0] for s in streams)  # until the first one ends
    in_window = sum(n for s in streams for t, n in s.stamps if start < t <= end)
    prompt = sum(s.handle.stats.prompt_tokens for s in streams)
    cached = sum(s.handle.stats.cached_tokens for s in streams)
    prefilled = [s.handle.stats.prompt_tokens - s.handle.stats.cached_tokens for s in streams]
    accepted = sum(s.handle.stats.accepted_tokens for s in streams)
    per_step = tokens_per_verify_step(accepted, sum(s.handle.stats.verify_steps for s in streams))
    return ServeBenchRow(
        scenario, len(streams), prompt_tokens, new_tokens, in_window / (end - start) if end > start else 0.0,
        _percentile(ttft, 0.5), _percentile(ttft, 0.99), _percentile(gaps, 0.5), _percentile(gaps, 0.99),
        max(gaps, default=0.0), cached / prompt if prompt else 0.0, cached, _percentile(prefilled, 0.5), per_step,
        note,
    )  # fmt: skip


class _Prompts:
    """Random prompts that share no prefix with each other (each starts with its own token)."""

    def __init__(self, vocab: int, seed: int = 0) -> None:
        self.vocab, self.generator, self.count = vocab, torch.Generator().manual_seed(seed), 0

    def __call__(self, tokens: int) -> list[int]:
        self.count += 1
        head = [self.count % self.vocab]
        return head + torch.randint(self.vocab, (tokens - 1,), generator=self.generator).tolist()


def run_concurrency(engine: Engine, streams: int, prompt_tokens: int, new_tokens: int, prompts: _Prompts):
    handles = [engine.submit(prompts(prompt_tokens), new_tokens, stop_token_ids=[]) for _ in range(streams)]
    return _row("concurrency", _consume(handles), prompt_tokens, new_tokens)


def run_trace(engine: Engine, start_tokens: int, added_tokens: int, answer_tokens: int, max_tokens: int, prompts):
    """One agent session: each turn's prompt is the last prompt, its answer and `added_tokens` new ones, until the
    prompt would pass `max_tokens`. Yields a row per turn; the last turn is then run cold (same length, no prefix
    in the cache) beside it; then the medians over the turns after the first (those with a cached prefix)."""
    prompt, turns, rates = prompts(start_tokens), [], []
    while len(prompt) + answer_tokens <= max_tokens:
        handle = engine.submit(prompt, answer_tokens, stop_token_ids=[])
        turns += _consume([handle])
        row = _row("trace", turns[-1:], len(prompt), answer_tokens)
        rates.append(row.tokens_per_second)
        yield row
        _wait_until_released(engine)
        last = prompt
        prompt = prompt + handle.token_ids + prompts(added_tokens + 1)[1:]
    cold = [*prompts(1), *last[1:]]  # a first token no other prompt has: nothing cached matches
    handle = engine.submit(cold, answer_tokens, stop_token_ids=[])
    yield _row("trace", _consume([handle]), len(cold), answer_tokens, note="cold: the last turn without the cache")
    if cached := turns[1:]:
        final = cached[-1].handle.stats
        note = (
            f"{len(cached)} cached turns; the last ({final.prompt_tokens} tokens): TTFT "
            f"{final.time_to_first_token * 1e3:.1f} ms, {final.prompt_tokens - final.cached_tokens} tokens prefilled"
        )
        # The turns ran one after another: their decode rate is each turn's own, then the median.
        median_rate = _percentile(rates[1:], 0.5)
        yield replace(_row("trace-median", cached, len(last), answer_tokens, note=note), tokens_per_second=median_rate)


def _wait_until_released(engine: Engine, seconds: float = 5.0) -> None:
    """A finished turn's blocks (and the partly filled last one it leaves cached) are released a step after its last
    token; an agent's next turn comes after its tools ran, not within that step, so the trace waits for it too."""
    deadline = time.monotonic() + seconds
    while engine.core.held_blocks and time.monotonic() < deadline:
        time.sleep(0.0005)


def run_long_prompt(
    engine: Engine, streams: int, stream_prompt: int, long_tokens: int, new_tokens: int, prompts
) -> ServeBenchRow:
    """`streams` decode; once they all have produced a few tokens a `long_tokens` prompt arrives. The row holds the
    streams' inter-token latencies (max: the worst gap the long prefill caused) and the long prompt's TTFT."""
    handles = [engine.submit(prompts(stream_prompt), new_tokens, stop_token_ids=[]) for _ in range(streams)]
    result: list[_Stream] = []
    reader = threading.Thread(target=lambda: result.extend(_consume(handles)))
    reader.start()
    while min(h.stats.completion_tokens for h in handles) < min(8, new_tokens):
        time.sleep(0.005)
    long = engine.submit(prompts(long_tokens), 1, stop_token_ids=[])
    long.result()
    reader.join()
    row = _row("long-prompt", result, stream_prompt, new_tokens)
    row.note = (
        f"a {long_tokens}-token prompt arrived; its TTFT {long.stats.time_to_first_token * 1e3:.0f} ms "
        f"({long.stats.cached_tokens} tokens from the prefix cache)"
    )
    row.cached_tokens += long.stats.cached_tokens
    return row


def run_cold_prefill(engine: Engine, prompt_tokens: int, prompts, repeats: int = 3) -> ServeBenchRow:
    """Time to the first token of a prompt with nothing cached (best of `repeats` after a warm-up)."""
    best: _Stream | None = None
    for _ in range(repeats + 1):
        (stream,) = _consume([engine.submit(prompts(prompt_tokens), 1, stop_token_ids=[])])
        ttft = stream.stamps[0][0] - stream.handle.stats.submitted_at
        if best is None or ttft < best.stamps[0][0] - best.handle.stats.submitted_at:
            best = stream
    return _row("cold-prefill", [best], prompt_tokens, 1)


def run_serve_bench(engine: Engine, workload: ServeWorkload) -> Iterator[ServeBenchRow]:
    w, prompts = workload, _Prompts(engine.config.vocab_size)
    # Every decode graph the runs need, captured before any is timed (a first capture stalls the streams).
    engine.warm_up(max([*w.concurrency, 8]), w.prompt_tokens + w.new_tokens)
    engine.warm_up(1, min(max(w.trace_max + 128, 1024), engine.context_length))
    # The prefill kernels compiled at the token counts each run's first pass has (a 16-token warm-up left the first
    # compile in the concurrency rows' TTFT: 0.9-1.7 s on an H200), on prompts of their own: nothing timed is cached.
    for streams in w.concurrency:
        run_concurrency(engine, streams, w.prompt_tokens, 2, prompts)
    for streams in w.concurrency:
        yield run_concurrency(engine, streams, w.prompt_tokens, w.new_tokens, prompts)
    if w.trace_max:
        yield from run_trace(engine, min(1024, w.trace_max // 2), 300, 64, w.trace_max, prompts)
    if w.long_prompt:
        yield run_long_prompt(engine, 8, w.prompt_tokens, w.long_prompt, w.new_tokens, prompts)
    for tokens in w.cold_prefill:
        yield run_cold_prefill(engine, tokens, prompts)
