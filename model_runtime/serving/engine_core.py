"""The serving engine's loop: one thread owns the model, the paged KV cache and every request's sequence.

Each iteration takes new requests and cancellations, admits what fits, runs at most one prefill forward pass (a
token budget of prompt chunks, smaller while streams decode) and keeps decode steps in flight for every sequence
past its prefill. On the GPU two steps are in flight at once: the host reads step n's tokens while step n + 1 runs,
so a sequence that finishes at step n has one more token computed and dropped. A step is two launches, the forward
and the choice of the tokens (decode_step.py). While a row has a grammar, the choice of step n + 1 needs its
grammar advanced by step n's token: the host launches n + 1's forward, then reads step n and builds the masks while
that forward runs, then launches n + 1's choice, so the masks cost the device nothing while they take less time
than a forward. The decode rows change only between
steps: the steps in flight are read first, then the rows' buffers are written again (tokens, lengths, block tables,
sampling). Rows beyond the batch point at block 0, which no sequence owns, so what they write harms nobody.
"""

from __future__ import annotations

import atexit
import logging
import operator
import queue
import random
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, replace

import torch

from warpcode.model_runtime.decode_runner import DecodeRunner, batch_bucket
from warpcode.model_runtime.decode_step import SCRATCH_BLOCK, DecodeState, choose_next_tokens
from warpcode.model_runtime.detokenize import IncrementalDetokenizer, StopStringFilter
from warpcode.model_runtime.devices import one_thread_on_cpu
from warpcode.model_runtime.model import MoeForCausalLM
from warpcode.model_runtime.prefill import PrefillChunk, prefill_forward, prefill_in_steps
from warpcode.model_runtime.prefill_graphs import PrefillGraphs, token_bucket
from warpcode.model_runtime.sampling import SamplingParams
from warpcode.model_runtime.serving.block_manager import BlockManager
from warpcode.model_runtime.serving.config import EngineConfig
from warpcode.model_runtime.serving.grammar import GrammarMatcher, mask_words
from warpcode.model_runtime.serving.kv_budget import blocks_in_budget
from warpcode.model_runtime.serving.logits_processors import NO_PROCESSING, LogitsProcessing, RowProcessors
from warpcode.model_runtime.serving.request import RequestHandle, RequestRefused
from warpcode.model_runtime.serving.row_sampling import chooser, grammar_masks, row_processors, sample, variant
from warpcode.model_runtime.serving.scheduler import Scheduler
from warpcode.model_runtime.serving.sequence import Sequence
from warpcode.model_runtime.serving.token_logprobs import (
    MAX_PROMPT_LOGPROBS_TOKENS,
    StepLogprobs,
    TokenLogprob,
    prompt_logprobs,
    token_logprobs,
)
from warpcode.model_runtime.speculative import Speculator, verify_draft

STEPS_IN_FLIGHT = 2  # eager steps too: the CPU then runs the GPU's pipeline, one token computed past each end
MIN_COLUMN_SLOTS = 1024  # the smallest attention span of a step's graph
SEED_RANGE = range(-(2**63), 2**63)  # the rows' seeds are int64
FAILURES_WITHOUT_A_REQUEST = 3  # iterations in a row that fail with no request to blame: the engine itself is broken

logger = logging.getLogger(__name__)


_RUNNING: weakref.WeakSet[EngineCore] = weakref.WeakSet()


@atexit.register
def _stop_running_engines() -> None:
    # A loop thread still alive while the interpreter tears torch down aborts the process at exit.
    for core in list(_RUNNING):
        core.shutdown()


@dataclass
class _Step:
    rows: list[Sequence]
    tokens: torch.Tensor  # the sampled tokens, on the host once `ready` completed
    ready: torch.cuda.Event | None
    logprobs: StepLogprobs | None = None  # when some row asked for logprobs, ready with the tokens


@dataclass
class _PrefillPass:  # a prefill forward pass in progress, a few layers per loop iteration while streams decode
    plan: list[tuple[Sequence, int]]
    steps: Generator[None, None, torch.Tensor]

    def holds(self, seq: Sequence) -> bool:
        return any(s is seq for s, _ in self.plan)


@dataclass
class EngineCounters:
    prompt_tokens: int = 0  # over every prefill, preempted ones again
    cached_tokens: int = 0  # of those, served from the prefix cache
    generated_tokens: int = 0
    decode_steps: int = 0
    preemptions: int = 0
    verify_steps: int = 0  # speculative decoding: one per request and verify pass
    draft_tokens: int = 0
    accepted_tokens: int = 0


class EngineCore:
    def __init__(
        self,
        model: MoeForCausalLM,
        config: EngineConfig,
        decode: Callable[[list[int]], str] | None,
        eos_token_ids: Iterable[int],
    ) -> None:
        self._decode, self.eos_token_ids = decode, frozenset(eos_token_ids)
        model_config = model.config
        self.context_length = config.max_model_len or model_config.context_length
        self.runner = DecodeRunner(model, config.use_graphs)
        self.device, self.dtype = self.runner.device, self.runner.dtype
        self.config = config = replace(config, block_size=config.block_size_on(self.device))
        self.model = model
        num_blocks = config.num_blocks or blocks_in_budget(model, config)
        max_blocks = -(-self.context_length // config.block_size)
        self.rows_capacity = batch_bucket(config.max_num_seqs)
        self.state = DecodeState.allocate(
            model_config, self.rows_capacity, num_blocks + 1, config.block_size, max_blocks, self.device, self.dtype
        )
        self.runner.use_state(self.state)
        graphed_prefill = self.runner.use_graphs if config.prefill_graphs is None else config.prefill_graphs
        self.prefill_graphs = (
            PrefillGraphs(model, self.state, config.prefill_layers_per_step) if graphed_prefill else None
        )
        self.blocks = BlockManager(num_blocks + 1, config.block_size, reserved=1)
        self.scheduler = Scheduler(self.blocks, config.max_num_seqs, self._copy_blocks)
        self.counters = EngineCounters()
        self._rows: list[Sequence] = []
        self._verifying: list[Sequence] = []  # past their prefill with a draft to verify: not in the decode rows
        self._rows_stale = False
        self._processors: RowProcessors | None = None  # the rows' logit_bias and penalties, when some row has them
        self._top_logprobs: int | None = None  # the most alternatives a row reports; None: no row wants logprobs
        self._masked = False  # some row has a grammar: its steps apply the rows' token masks
        self._pass: _PrefillPass | None = None
        self._in_flight: deque[_Step] = deque()
        self._host_tokens = [self._host_buffer((self.rows_capacity,), torch.long) for _ in range(STEPS_IN_FLIGHT)]
        # the next step's grammar masks: written after the step before was read, so that step's copy has landed
        self._host_masks = self._host_buffer((self.rows_capacity, mask_words(model_config.vocab_size)), torch.int32)
        self._launched = 0
        self._inbox: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._sequences: dict[int, Sequence] = {}
        # requests in the inbox, not yet in _sequences: the inbox also carries cancellations, which are no requests
        self._arriving = 0
        self._next_id = 0
        self._lock = threading.Lock()  # request ids; a request moving from _arriving to _sequences (counted once)
        self._failure: str | None = None
        self._failures_in_a_row = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="warpcode-engine", daemon=True)
        self._thread.start()
        _RUNNING.add(self)

    # Any thread.
    def submit(
        self,
        prompt_ids: list[int],
        max_new_tokens: int,
        sampling: SamplingParams,
        seed: int | None,
        stop_token_ids: Iterable[int] | None,
        stop_strings: Iterable[str],
        processing: LogitsProcessing = NO_PROCESSING,
        grammar: GrammarMatcher | None = None,
        documents: Iterable[Iterable[int]] = (),
    ) -> RequestHandle:
        """`processing`: logit_bias, penalties and the logprobs to report; `grammar`: structured generation, this
        request's own matcher (every token sampled inside it, after the processing changed the logits);
        `documents`: token sequences speculative decoding may copy from besides the request's own tokens."""
        try:  # integers only (a float or a string id is a caller's bug, not a token); C-speed over 16K-token prompts
            prompt_ids = list(map(operator.index, prompt_ids))
        except TypeError as error:
            raise RequestRefused(f"token ids must be integers ({error})") from None
        if processing.prompt_logprobs is not None and len(prompt_ids) > MAX_PROMPT_LOGPROBS_TOKENS:
            raise RequestRefused(
                f"the prompt's logprobs (echo with logprobs) are served for prompts of up to "
                f"{MAX_PROMPT_LOGPROBS_TOKENS} tokens, and this one has {len(prompt_ids)}: shorten it or drop echo"
            )
        self._check(prompt_ids, max_new_tokens)
        try:
            processing.check(self.model.config.vocab_size)
        except ValueError as error:
            raise RequestRefused(str(error)) from None
        if seed is not None and seed not in SEED_RANGE:
            raise RequestRefused(f"seed must be a 64-bit integer (-2**63 to 2**63 - 1), got {seed}")
        if sampling.top_k >= self.model.config.vocab_size:  # keeping every token is no filter at all
            sampling = replace(sampling, top_k=0)
        stop_ids = self.eos_token_ids if stop_token_ids is None else frozenset(stop_token_ids)
        stop_strings = tuple(s for s in stop_strings if s)
        if stop_strings and self._decode is None:
            raise ValueError("matching stop strings needs a tokenizer, and this model was loaded without one")
        with self._lock:
            request_id, self._next_id = self._next_id, self._next_id + 1
        handle = RequestHandle(request_id, len(prompt_ids), self._decode, stop_strings, stop_ids, self._cancel)
        drafting = self.config.speculative.draft
        seq = Sequence(
            handle, prompt_ids, max_new_tokens, sampling, random.getrandbits(31) if seed is None else seed,
            stop_ids, self._stop_string_watcher(stop_strings) if stop_strings else None, processing, grammar,
            None if drafting is None else Speculator(drafting, prompt_ids, documents),
        )  # fmt: skip
        with self._lock:
            self._arriving += 1
            self._inbox.put(("add", seq))
        self._wake.set()
        return handle

    def shutdown(self) -> None:
        """Stops the loop thread (once; later calls return at once)."""
        if self._stopping:
            return
        self._stopping = True
        self._wake.set()
        self._thread.join()
        _RUNNING.discard(self)

    @property
    def failure(self) -> str | None:
        """Why the engine stopped serving (an error it could not pin on one request), None while it serves."""
        return self._failure

    @property
    def active_requests(self) -> int:
        """Requests submitted and not finished (waiting, prefilling or decoding); a cancelled one until the engine
        thread has ended it."""
        with self._lock:
            return len(self._sequences) + self._arriving

    @property
    def held_blocks(self) -> int:
        """Cache blocks some sequence holds (a finished one's are released within a step)."""
        return self.blocks.usable - self.blocks.available

    def _check(self, prompt_ids: list[int], max_new_tokens: int) -> None:
        if self._failure is not None:
            raise RequestRefused(f"the engine stopped after an error ({self._failure}); load the model again")
        if self._stopping:
            raise RequestRefused("the engine is shut down")
        if not prompt_ids:
            raise RequestRefused("the prompt needs at least one token")
        vocab = self.model.config.vocab_size
        if min(prompt_ids) < 0 or max(prompt_ids) >= vocab:
            raise RequestRefused(f"token ids must be in [0, {vocab}), got {min(prompt_ids)}..{max(prompt_ids)}")
        if max_new_tokens < 1:
            raise RequestRefused(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        total = len(prompt_ids) + max_new_tokens
        if total > self.context_length:
            raise RequestRefused(
                f"the prompt ({len(prompt_ids)} tokens) plus max_new_tokens ({max_new_tokens}) exceed the context of "
                f"{self.context_length} tokens; shorten the prompt or ask for fewer tokens"
            )
        if self.blocks.blocks_for(total + STEPS_IN_FLIGHT) > self.blocks.usable:
            raise RequestRefused(
                f"the prompt plus max_new_tokens ({total} tokens) exceed the whole KV cache "
                f"({self.blocks.usable * self.blocks.block_size} tokens); give the cache more memory (--kv-cache-gb)"
            )

    def _cancel(self, handle: RequestHandle) -> None:
        self._inbox.put(("cancel", handle))
        self._wake.set()

    def _stop_string_watcher(self, stop_strings: tuple[str, ...]) -> Callable[[int], bool]:
        detokenizer, stops = IncrementalDetokenizer(self._decode), StopStringFilter(stop_strings)

        def seen(token: int) -> bool:
            stops.feed(detokenizer.push(token))
            return stops.stopped

        return seen

    # The engine thread.
    def _loop(self) -> None:
        with torch.inference_mode():
            while not self._stopping:
                try:
                    self._take_inbox()
                    if self.scheduler.idle and not self._in_flight:
                        self._wake.wait()
                        self._wake.clear()
                        continue
                    self._iterate()
                    self._failures_in_a_row = 0
                except Exception as exc:
                    if not self._isolate(exc):  # every request ends with the error instead of waiting forever
                        self._failure = f"{type(exc).__name__}: {exc}"
                        for seq in list(self._sequences.values()):
                            seq.handle.fail(f"generation failed: {self._failure}")
                        self._sequences.clear()
                        return
        for seq in list(self._sequences.values()):
            seq.handle.deliver([], "abort")
        self._sequences.clear()

    def _isolate(self, error: Exception) -> bool:
        """After an iteration failed: finds the request to blame and keeps serving the others; False when the
        engine itself is broken (the device failed, or failures no request explains).

        The sequences of the failed iteration (its decode rows, steps in flight and prefill pass) go back to the
        front of the queue as suspects, their blocks released, to be prefilled again from their tokens. The scheduler
        admits one suspect at a time, and a suspect stays one until a decode step with it succeeds: a suspect in a
        failing iteration has failed twice, so it is the culprit, and it fails alone.
        """
        if self.device.type == "cuda":
            try:  # a device-side fault is sticky: nothing can run on this context any more
                torch.cuda.synchronize(self.device)
            except Exception:
                return False
        computing = self._iteration_sequences()
        self._in_flight.clear()
        if self._pass is not None:
            self._pass.steps.close()
            self._pass = None
        self._rows, self._verifying, self._rows_stale = [], [], True
        for seq in computing:
            if seq.finish_reason is not None:  # finished before the failure: released as _rebuild_rows would
                self.scheduler.retire(seq)
        involved = list(dict.fromkeys(s for s in computing if s.finish_reason is None))
        if not involved:
            self._failures_in_a_row += 1
            return self._failures_in_a_row < FAILURES_WITHOUT_A_REQUEST
        self._failures_in_a_row = 0
        for culprit in (s for s in involved if s.suspect):
            culprit.finish_reason = "abort"
            self.scheduler.retire(culprit)
            self._sequences.pop(culprit.handle.request_id, None)
            culprit.handle.fail(f"generation failed: {type(error).__name__}: {error}")
        for seq in reversed([s for s in involved if not s.suspect]):
            seq.suspect, seq.in_flight = True, 0
            self.scheduler.requeue(seq)
        return True

    def _iteration_sequences(self) -> list[Sequence]:
        """The sequences the current iteration was computing: decode rows, steps in flight, the prefill pass, the
        sequences verifying drafts."""
        in_flight = [seq for step in self._in_flight for seq in step.rows]
        in_pass = [seq for seq, _ in self._pass.plan] if self._pass is not None else []
        return [*self._rows, *in_flight, *in_pass, *self._verifying]

    def _take_inbox(self) -> None:
        while True:
            try:
                kind, item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "add":
                with self._lock:  # active_requests counts it once: never in both places, nor in neither
                    self._sequences[item.handle.request_id] = item
                    self._arriving -= 1
                self.scheduler.waiting.append(item)
            elif kind == "warm_up":
                self._capture_graphs(*item)
            elif (seq := self._sequences.get(item.request_id)) is not None and seq.finish_reason is None:
                seq.finish_reason = "abort"
                self._finish(seq)

    def _iterate(self) -> None:
        for seq in self.scheduler.admit():
            self.counters.prompt_tokens += seq.length
            self.counters.cached_tokens += seq.computed
            self._rows_stale |= seq.pending == 1  # all but its last token cached: straight to decoding
        if self._rows_stale:
            self._rebuild_rows()
        launched = False
        with one_thread_on_cpu(self.device):  # decode steps
            while self._rows and len(self._in_flight) < STEPS_IN_FLIGHT and not (launched and self._masked):
                if not self._launch():
                    break
                launched = True
        if self._pass is None:
            budget = self.config.interleaved_prefill_tokens if self._rows else self.config.max_prefill_tokens
            if plan := self.scheduler.prefill_plan(budget):
                self._pass = _PrefillPass(plan, self._prefill_steps(plan))
        if self._pass is not None:
            self._advance_prefill()
        if self._verifying and not self._rows_stale:  # stale: a preemption or a new row changed who verifies
            self._verify()
        if self._in_flight and not (launched and self._masked):  # a masked launch read the step before it
            self._read(self._in_flight.popleft())

    def _copy_blocks(self, pairs: list[tuple[int, int]]) -> None:
        """Copies whole blocks (source, target) in every layer's key and value pool: one fused launch on the GPU,
        enqueued before the prefill that reads them; plain indices, so nothing waits for the device."""
        pools = [*self.state.keys, *self.state.values]
        targets = [pool[target] for pool in pools for _, target in pairs]
        torch._foreach_copy_(targets, [pool[source] for pool in pools for source, _ in pairs])

    def _prefill_steps(self, plan: list[tuple[Sequence, int]]) -> Generator[None, None, torch.Tensor]:
        """One sequence's chunk that fits a token bucket replays the prefill graphs; anything else runs eagerly."""
        chunks = [PrefillChunk(s.tokens(s.computed, s.computed + n), s.computed, s.block_table) for s, n in plan]
        if self.prefill_graphs is not None and len(chunks) == 1 and token_bucket(len(chunks[0].token_ids)):
            return self.prefill_graphs.steps(chunks[0].token_ids, chunks[0].start, chunks[0].block_table)
        layers = self.config.prefill_layers_per_step if self._rows else len(self.model.model.layers)
        return prefill_in_steps(self.model, self.state, chunks, layers)

    def _capture_graphs(self, max_batch: int, max_tokens: int, done: threading.Event, counts: list[int]) -> None:
        """Every row points at the scratch block (the rows' buffers are written again before real steps), so the
        capture's warm-up step writes nothing a sequence owns."""
        try:
            state = self.state
            state.block_tables.fill_(SCRATCH_BLOCK)
            state.seq_lens.zero_()
            made, bucket = 0, 1
            while self.runner.use_graphs and bucket <= batch_bucket(min(max_batch, self.rows_capacity)):
                self.runner.choose_function(bucket, "greedy")  # the other variants' choices are cheap at first use
                tokens = MIN_COLUMN_SLOTS
                while True:
                    self.runner.forward_function(bucket, self._table_columns(min(tokens, max_tokens)))
                    made += 1
                    if tokens >= min(max_tokens, self.state.capacity):
                        break
                    tokens *= 2
                bucket = batch_bucket(bucket + 1)
            if self.prefill_graphs is not None:
                made += self.prefill_graphs.capture(self.config.interleaved_prefill_tokens)
            counts.append(made)
            self._rows_stale = True
        finally:
            done.set()

    def _rebuild_rows(self) -> None:
        """Reads the steps in flight, drops finished sequences, and writes the rows' buffers for the sequences
        now past their prefill."""
        while self._in_flight:
            self._read(self._in_flight.popleft())
        for seq in self._rows:
            if seq.finish_reason is not None:
                self.scheduler.retire(seq)
        ready = [s for s in self.scheduler.admitted if s.pending == 1 and s.finish_reason is None]
        self._verifying = [s for s in ready if self._draft(s)]
        rows = [s for s in ready if s not in self._verifying]
        self._rows = rows[: self.rows_capacity]
        self._rows_stale = False
        bucket = batch_bucket(len(self._rows)) if self._rows else 0
        state, count = self.state, len(self._rows)
        if not count:
            return
        padding = bucket - count
        tables = torch.full((bucket, state.block_tables.shape[1]), SCRATCH_BLOCK, dtype=torch.int32)
        for row, seq in enumerate(self._rows):
            tables[row, : len(seq.block_table)] = torch.tensor(seq.block_table, dtype=torch.int32)
        state.block_tables[:bucket].copy_(tables)
        state.tokens[:bucket].copy_(torch.tensor([s.last_token for s in self._rows] + [0] * padding))
        state.seq_lens[:bucket].copy_(torch.tensor([s.computed for s in self._rows] + [0] * padding))
        state.seeds[:bucket].copy_(torch.tensor([s.seed for s in self._rows] + [0] * padding))
        state.steps[:bucket].copy_(torch.tensor([len(s.output_ids) for s in self._rows] + [0] * padding))
        state.sampling.set_rows([s.sampling for s in self._rows] + [SamplingParams()] * padding)
        wanted = [s.processing.logprobs for s in self._rows if s.processing.logprobs is not None]
        self._top_logprobs = max(wanted, default=None)
        self._masked = any(s.grammar is not None for s in self._rows)
        self._processors = None
        if any(s.processing.changes_logits for s in self._rows):
            self._processors = row_processors(self._rows, bucket, self.model.config.vocab_size, self.device)

    def _launch(self) -> bool:
        """Starts one decode step of every row; False (rows to rebuild) when one had to be preempted."""
        for row, seq in enumerate(self._rows):
            slot = seq.computed + seq.in_flight
            had = len(seq.block_table)
            if not self.scheduler.grow(seq, slot + 1):
                self._make_room()
                return False
            if len(seq.block_table) > had:
                new = torch.tensor(seq.block_table[had:], dtype=torch.int32)
                self.state.block_tables[row, had : len(seq.block_table)].copy_(new)
        longest = max(s.computed + s.in_flight + 1 for s in self._rows)
        rows, count, columns = list(self._rows), len(self._rows), self._table_columns(longest)
        bucket, kind = batch_bucket(count), variant(self._rows)
        logits = self.runner.forward_function(count, columns)()
        if self._masked:  # the grammars take the tokens of the step before while this forward runs
            while self._in_flight:
                self._read(self._in_flight.popleft())
            masks = self._host_masks[:bucket]
            grammar_masks(rows, masks.numpy())
            self.state.token_mask[:bucket].copy_(masks, non_blocking=True)
        if self._processors is None:
            self.runner.choose_function(count, kind, self._masked)()
        else:  # logit_bias and penalties: an eager choice over the forward's logits
            choose_next_tokens(self.state, logits, bucket, kind, process=self._processors, masked=self._masked)
            self._processors.count(self.state.tokens[:bucket])
        logprobs = None  # of the raw logits, not the processed or masked ones
        if self._top_logprobs is not None:
            logprobs = StepLogprobs.of(logits[:count], self.state.tokens[:count], self._top_logprobs)
        host = self._host_tokens[self._launched % STEPS_IN_FLIGHT]
        host[:count].copy_(self.state.tokens[:count], non_blocking=True)
        ready = None
        if self.device.type == "cuda":
            ready = torch.cuda.Event()
            ready.record()
        self._in_flight.append(_Step(rows, host, ready, logprobs))
        self._launched += 1
        for seq in rows:
            seq.in_flight += 1
        self.counters.decode_steps += 1
        return True

    def _make_room(self) -> None:
        """Reads the steps in flight; if no sequence finished in them (whose blocks now come back), preempts the
        newest running one. The rows are written again before the next step either way."""
        while self._in_flight:
            self._read(self._in_flight.popleft())
        self._rows_stale = True
        finished = [s for s in self._rows if s.finish_reason is not None]
        self._rows = []
        for seq in finished:
            self.scheduler.retire(seq)
        if finished:
            return
        victim = self.scheduler.preempt_newest()
        if self._pass is not None and self._pass.holds(victim):  # its blocks are gone: the pass starts again later
            self._pass.steps.close()
            for seq, _ in self._pass.plan:
                if seq.finish_reason is not None:
                    self.scheduler.retire(seq)
            self._pass = None
        victim.in_flight = 0
        self.counters.preemptions += 1

    def _read(self, step: _Step) -> None:
        if step.ready is not None:
            step.ready.synchronize()
        tokens = step.tokens[: len(step.rows)].tolist()
        logprobs = step.logprobs.rows(tokens) if step.logprobs is not None else [None] * len(tokens)
        for seq, token, logprob in zip(step.rows, tokens, logprobs, strict=True):
            seq.in_flight -= 1
            if seq.finish_reason is not None:
                continue  # finished after this step was launched: the token is dropped
            seq.computed += 1
            seq.suspect = False  # a decode step with it went through
            self._append(seq, token, logprob)
            self.scheduler.register_computed(seq)
            if seq.speculator is not None and seq.finish_reason is None:
                seq.speculator.decoded()
                self._rows_stale |= bool(self._draft(seq))  # a draft to verify: it leaves the decode rows

    def _advance_prefill(self) -> None:
        """Runs the prefill pass's next layers; once it is through, its sequences' tokens count as computed and
        those at their last token sample it."""
        try:
            with one_thread_on_cpu(self.device, sum(count for _, count in self._pass.plan)):
                next(self._pass.steps)
            return
        except StopIteration as done:
            logits, plan, self._pass = done.value, self._pass.plan, None
        done = []
        for row, (seq, count) in enumerate(plan):
            if seq.finish_reason is not None:  # cancelled meanwhile: its blocks were kept until now
                self.scheduler.retire(seq)
                continue
            seq.computed += count
            self.scheduler.register_computed(seq)
            if seq.pending == 0:
                done.append((row, seq))
        if done:
            rows = torch.tensor([row for row, _ in done], device=logits.device)
            seqs, logits = [s for _, s in done], logits[rows]
            tokens = sample(seqs, logits)
            logprobs: list[TokenLogprob | None] = [None] * len(seqs)
            top = max((s.processing.logprobs for s in seqs if s.processing.logprobs is not None), default=None)
            if top is not None:
                logprobs = token_logprobs(logits, torch.tensor(tokens, device=logits.device), top)
            for seq, token, logprob in zip(seqs, tokens, logprobs, strict=True):
                self._append(seq, token, logprob)
            self._rows_stale = True  # they decode from the next step on

    def _append(self, seq: Sequence, token: int, logprob: TokenLogprob | None = None) -> None:
        if seq.processing.prompt_logprobs is not None and seq.handle.prompt_logprobs is None:
            # before the first token reaches the caller
            seq.handle.prompt_logprobs = prompt_logprobs(self.model, seq.prompt_ids, seq.processing.prompt_logprobs)
        seq.append(token, logprob)
        if seq.speculator is not None:
            seq.speculator.observe(token)
        self.counters.generated_tokens += 1
        stats = seq.handle.stats
        if stats.first_token_at is None:
            stats.first_token_at = time.perf_counter()
        stats.completion_tokens = len(seq.output_ids)
        if seq.finish_reason is not None:
            self._finish(seq)
        else:
            seq.handle.deliver([token], None, logprobs=seq.logprobs[seq.delivered :] or None)
            seq.delivered = len(seq.output_ids)

    def _finish(self, seq: Sequence) -> None:
        """Hands the last tokens and the reason to the caller; the blocks are released once no step in flight
        writes them any more."""
        new = seq.output_ids[seq.delivered :] if seq.finish_reason != "abort" else []
        logprobs = seq.logprobs[seq.delivered : seq.delivered + len(new)] or None
        seq.delivered = len(seq.output_ids)
        stats = seq.handle.stats
        stats.finished_at = time.perf_counter()
        if stats.verify_steps:
            logger.info(
                "request %d: %d tokens; speculative decoding: %d verify steps, %d of %d drafted tokens accepted, "
                "%.2f tokens per verify step", seq.handle.request_id, len(seq.output_ids), stats.verify_steps,
                stats.accepted_tokens, stats.draft_tokens, stats.tokens_per_verify_step,
            )  # fmt: skip
        seq.handle.deliver(new, seq.finish_reason, logprobs=logprobs)
        self._sequences.pop(seq.handle.request_id, None)
        if seq in self._rows:
            self._rows_stale = True
        elif self._pass is None or not self._pass.holds(seq):  # else the pass still writes its blocks
            self.scheduler.retire(seq)

    def _draft(self, seq: Sequence) -> list[int]:
        """The tokens `seq` verifies next ([]: it decodes): none while more than speculative.max_running
        sequences are admitted, and at most what the cache's free blocks and its max_tokens leave room for."""
        if seq.speculator is None or len(self.scheduler.admitted) > self.config.speculative.max_running:
            return []
        fits = (len(seq.block_table) + self.blocks.available) * self.blocks.block_size - seq.computed - 1
        return seq.speculator.draft(min(fits, seq.max_new_tokens - len(seq.output_ids) - 1))

    def _verify(self) -> None:
        """One verify step of every sequence with a draft: its last token and the drafted ones through the model as
        one extension of its cached history (prefill's path; the sequences in one pass), logits at every position;
        then each keeps what verify.py accepts. A sequence left without a draft decodes from the next iteration."""
        batch = []
        for seq in self._verifying:
            if seq.finish_reason is not None:
                continue
            draft = self._draft(seq)
            if not draft or not self.scheduler.grow(seq, seq.computed + 1 + len(draft)):
                self._rows_stale = True
                continue
            batch.append((seq, draft))
        if not batch:
            return
        chunks = [PrefillChunk([s.last_token, *d], s.computed, s.block_table, len(d) + 1) for s, d in batch]
        with one_thread_on_cpu(self.device, sum(len(chunk.token_ids) for chunk in chunks)):
            logits = prefill_forward(self.model, self.state, chunks)
        first = 0
        for seq, draft in batch:
            self._accept(seq, draft, logits[first : first + len(draft) + 1])
            first += len(draft) + 1

    def _accept(self, seq: Sequence, draft: list[int], logits: torch.Tensor) -> None:
        """Commits what verify.py accepts of `draft` given its logits [len(draft) + 1, V], each token through
        _append (stop rules, logprobs, the grammar, delivery) as a decode step's would be; then rolls the cache back
        to the committed tokens: `computed` counts only theirs (the prefix cache registers no other), the rejected
        tokens' slots are overwritten later, and blocks only they used go back to the pool."""
        seq.suspect = False  # a pass with it went through
        stats, top = seq.handle.stats, seq.processing.logprobs
        stats.verify_steps += 1
        stats.draft_tokens += len(draft)
        committed: list[int] = []

        def commit(token: int) -> bool:
            position = len(committed)
            logprob = None
            if top is not None:
                chosen = torch.tensor([token], device=logits.device)
                logprob = token_logprobs(logits[position : position + 1], chosen, top)[0]
            stats.accepted_tokens += position < len(draft) and token == draft[position]  # before the last delivery
            committed.append(token)
            self._append(seq, token, logprob)
            return seq.finish_reason is None

        verdict = verify_draft(draft, chooser(seq, logits), commit)
        seq.speculator.verified(len(draft), verdict.accepted)
        self.counters.verify_steps += 1
        self.counters.draft_tokens += len(draft)
        self.counters.accepted_tokens += verdict.accepted
        if seq.finish_reason is not None:
            return  # _finish released its blocks
        seq.computed += verdict.committed  # its last token and the accepted ones; the one after is the next input
        keep = self.blocks.blocks_for(seq.computed + 1)
        self.blocks.release(seq.block_table[keep:])
        del seq.block_table[keep:]
        self.scheduler.register_computed(seq)

    def _table_columns(self, longest: int) -> int:
        """Block-table columns a step launches attention over: the next power of two of slots (at least
        MIN_COLUMN_SLOTS), so that a long generation needs few graphs (and kernel variants) and short rows do not
        launch programs for splits past their keys."""
        tokens = min(max(MIN_COLUMN_SLOTS, 1 << (longest - 1).bit_length()), self.state.capacity)
        return -(-tokens // self.config.block_size)

    def warm_up(self, max_batch: int, max_tokens: int) -> int:
        """Captures the greedy decode graphs of every batch bucket up to `max_batch` and every column count up
        to `max_tokens` slots, and the prefill graphs of every token bucket up to interleaved_prefill_tokens, now
        instead of at first use (each capture compiles and records for a second or more on the qwen3 shape). Call
        it while the engine is idle; returns the graphs made."""
        if not self.scheduler.idle or self._in_flight:
            raise RuntimeError("warm the engine up before it serves requests")
        done = threading.Event()
        counts: list[int] = []
        self._inbox.put(("warm_up", (max_batch, max_tokens, done, counts)))
        self._wake.set()
        done.wait()
        return counts[0] if counts else 0

    def _host_buffer(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """Pinned on the GPU's host, so copies to and from it do not wait for the host."""
        return torch.empty(shape, dtype=dtype, pin_memory=self.device.type == "cuda")
