"""Runs decode steps over a `DecodeState`: replayed from CUDA graphs on the GPU, eagerly elsewhere.

Graphs are captured lazily, a step's forward per (batch bucket, block-table columns) and its choice per (batch
bucket, sampling variant, masked or not), and dropped when the state is reallocated. The serving engine
(serving/engine_core.py) gives the runner its paged state and drives the steps; the static-batch path here
(`reserve`, `prefill`, `decode`) is the baseline the benchmarks compare serving with (the numerical reference of
every forward path is model.py's forward): rows own consecutive blocks, and the host only replays graphs and reads
the sampled tokens back one step behind.
Off the GPU (or with graphs disabled) the same step function runs eagerly, on the same bucket of rows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

import torch

from warpcode.model_runtime.decode_step import (
    DecodeState,
    choose_next_tokens,
    decode_forward,
    prepare_for_decode,
    sample_next_tokens,
    sampling_variant,
)
from warpcode.model_runtime.kv_blocks import default_block_size
from warpcode.model_runtime.model import MoeForCausalLM
from warpcode.model_runtime.prefill import PrefillChunk, prefill_forward
from warpcode.model_runtime.sampling import SamplingParams

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32)
CAPACITY_STEP = 256  # context is reserved in multiples of this, so nearby request sizes share one state and graphs
# The first decode graph a process captures replays 1-5% slower (H200, torch 2.11 + CUDA 13.0, driver 580.159) until
# a later capture: from then on every graph, that first one included, runs at the faster rate (batch 1, 512 keys:
# 2.300 -> 2.200 ms per step, the same graph exec before and after). The kernels and their buffers do not change, so
# the cause lies below them; the runner captures its first graph twice, warm-up run included, and keeps the second
# (measured: recording the throwaway graph right after the one warm-up run, without its own, left the process slow).
_first_capture_pending = True


def batch_bucket(batch: int) -> int:
    """The graph batch size that serves `batch` rows: the next bucket, or the next multiple of the largest."""
    for bucket in BATCH_BUCKETS:
        if batch <= bucket:
            return bucket
    return -(-batch // BATCH_BUCKETS[-1]) * BATCH_BUCKETS[-1]


class DecodeRunner:
    def __init__(self, model: MoeForCausalLM, use_graphs: bool | None = None, block_size: int | None = None):
        prepare_for_decode(model)
        self.model = model
        parameter = next(model.parameters())
        self.device, self.dtype = parameter.device, parameter.dtype
        # The static path's blocks are the serving engine's: both run one attention kernel.
        self.block_size = block_size or default_block_size(self.device)
        self.use_graphs = self.device.type == "cuda" if use_graphs is None else use_graphs
        self.state: DecodeState | None = None
        self._graphs: dict[tuple, torch.cuda.CUDAGraph] = {}  # ("forward", bucket, columns) and ("choose", ...)
        self._pool = None
        self._longest = 0  # tokens in the longest row's cache, tracked on the host to refuse overflowing it

    def reserve(self, batch: int, tokens_per_row: int) -> DecodeState:
        """A state with at least `batch_bucket(batch)` rows and room for `tokens_per_row` tokens in each."""
        rows = batch_bucket(batch)
        capacity = -(-tokens_per_row // CAPACITY_STEP) * CAPACITY_STEP
        state = self.state
        if state is None or state.slots < rows or state.capacity < capacity:
            if state is not None:
                rows, capacity = max(rows, state.slots), max(capacity, state.capacity)
            self.drop_graphs()
            self.state = state = None  # free the old cache before allocating the new one
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            self.state = state = DecodeState.allocate_static(
                self.model.config, rows, capacity, self.block_size, self.device, self.dtype
            )
        return state

    def use_state(self, state: DecodeState) -> None:
        """Runs steps over `state` from now on (the serving engine's paged cache)."""
        self.drop_graphs()
        self.state = state

    def drop_graphs(self) -> None:
        """Forget the captured steps (and their memory pool, which cannot be captured into once its graphs are
        gone): the next decode captures again, e.g. after the state or the kernels' settings changed."""
        self._graphs.clear()
        self._pool = None

    @torch.inference_mode()
    def prefill(self, prompts: list[list[int]], sampling: SamplingParams, seed: int) -> list[int]:
        """Writes every prompt into its row's blocks in one forward pass and samples each row's first token.
        Call `reserve` first."""
        state = self.state
        batch, longest = len(prompts), max(len(p) for p in prompts)
        tables = state.block_tables[:batch].tolist()
        chunks = [PrefillChunk(prompt, 0, table) for prompt, table in zip(prompts, tables, strict=True)]
        logits = prefill_forward(self.model, state, chunks)  # [B, V]
        # Rows beyond the batch (graph padding) decode harmlessly from an empty cache, greedily.
        state.seq_lens.zero_()[:batch] = torch.tensor([len(p) for p in prompts], dtype=torch.int32)
        state.tokens.zero_()
        state.steps.zero_()
        state.seeds.copy_(torch.arange(state.slots, device=self.device) + seed * state.slots)
        state.sampling.set_rows([sampling] * batch)
        first = sample_next_tokens(state, logits, batch, sampling_variant(sampling))
        self._longest = longest
        return first.tolist()

    @torch.inference_mode()
    def start_from_random_cache(self, batch: int, context: int, seed: int = 0) -> None:
        """Benchmarks: rows [0, batch) as if each had prefilled `context` tokens (random keys and values, random
        next tokens, greedy), without running a prefill that long. Call `reserve` first."""
        state = self.state
        generator = torch.Generator(self.device).manual_seed(seed)
        for tensor in (*state.keys, *state.values):
            tensor.normal_(generator=generator)
        state.seq_lens.zero_()[:batch] = context
        state.tokens.random_(self.model.config.vocab_size, generator=generator)
        state.steps.zero_()
        state.sampling.set_rows([SamplingParams()] * batch)
        self._longest = context

    @torch.inference_mode()
    def decode(self, batch: int, sampling: SamplingParams) -> Iterator[list[int]]:
        """Yields the next token of rows [0, batch) after each step, for as long as the caller iterates and the
        reserved context lasts. With graphs, the step after the yielded one is already running on the device."""
        step = self.step_function(batch, sampling_variant(sampling))
        if not self.use_graphs:
            while self._advance():
                step()
                yield self.state.tokens[:batch].tolist()
            return
        tokens = self.state.tokens
        # Two pinned host buffers: the reader converts one while the next step's copy lands in the other.
        slots = [(torch.empty(tokens.shape, dtype=tokens.dtype, pin_memory=True), torch.cuda.Event()) for _ in "ab"]
        in_flight: deque[tuple[torch.Tensor, torch.cuda.Event]] = deque()
        launched = 0
        while True:
            while len(in_flight) < 2 and self._advance():
                step()
                host, ready = slots[launched % 2]
                host.copy_(tokens, non_blocking=True)
                ready.record()
                in_flight.append((host, ready))
                launched += 1
            if not in_flight:
                return
            host, ready = in_flight.popleft()
            ready.synchronize()
            yield host[:batch].tolist()

    def _advance(self) -> bool:
        """Accounts for one more step on the host; False once the longest row's reserved context is full."""
        if self._longest >= self.state.capacity:
            return False
        self._longest += 1
        return True

    def step_function(self, batch: int, variant: str, table_columns: int | None = None, masked: bool = False):
        """A callable that advances rows [0, batch) by one step: the forward, then the choice (two graph replays,
        or the eager halves). `masked`: the rows' grammar masks apply (a choice graph of its own, so unconstrained
        steps do no mask work)."""
        forward, choose = self.forward_function(batch, table_columns), self.choose_function(batch, variant, masked)

        def step() -> None:
            forward()
            choose()

        return step

    def forward_function(self, batch: int, table_columns: int | None = None) -> Callable[[], torch.Tensor]:
        """A callable that runs the forward half of a step over rows [0, batch) (decode_step.decode_forward) and
        returns the bucket's logits [bucket, V] (the state's buffer, ready once the device gets there)."""
        # Eager or captured, the step runs the whole bucket: matrix products then have the same shapes, so the
        # two paths give the same numbers.
        bucket = batch_bucket(batch)
        columns = table_columns or self.state.block_tables.shape[1]
        model, state = self.model, self.state
        if not self.use_graphs:
            return lambda: decode_forward(model, state, bucket, columns)
        graph = self._graph(("forward", bucket, columns), lambda: decode_forward(model, state, bucket, columns))
        logits = state.logits[:bucket]

        def replay() -> torch.Tensor:
            graph.replay()
            return logits

        return replay

    def choose_function(self, batch: int, variant: str, masked: bool = False) -> Callable[[], None]:
        """A callable that chooses the next token of rows [0, batch) from the state's logits by the static
        sampling `variant` (decode_step.choose_next_tokens), inside the rows' token masks when `masked`. Its graph
        is small (no layers), so every variant is cheap to capture at first use."""
        bucket = batch_bucket(batch)
        state = self.state

        def choose() -> None:
            choose_next_tokens(state, state.logits[:bucket], bucket, variant, masked=masked)

        if not self.use_graphs:
            return choose
        return self._graph(("choose", bucket, variant, masked), choose).replay

    def _graph(self, key: tuple, run: Callable[[], object]) -> torch.cuda.CUDAGraph:
        """The graph of `run` under `key`, captured at first use."""
        if key not in self._graphs:
            self._graphs[key] = self._capture(run)
        return self._graphs[key]

    def _capture(self, run: Callable[[], object]) -> torch.cuda.CUDAGraph:
        global _first_capture_pending
        if _first_capture_pending:  # a throwaway graph in a pool of its own, freed with it
            _first_capture_pending = False
            self._capture_once(run, pool=None)
        graph = self._capture_once(run, self._pool)
        self._pool = graph.pool()
        return graph

    def _capture_once(self, run: Callable[[], object], pool: tuple[int, int] | None) -> torch.cuda.CUDAGraph:
        state = self.state
        saved = [t.clone() for t in (state.tokens, state.seq_lens, state.steps)]
        # A warm-up run outside the graph compiles the Triton kernels and creates cuBLAS workspaces; it writes the
        # slots the first replay writes again, and the row buffers are restored afterwards.
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            run()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        for buffer, value in zip((state.tokens, state.seq_lens, state.steps), saved, strict=True):
            buffer.copy_(value)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            run()
        return graph
