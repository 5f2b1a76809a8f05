"""The choices of one request: n of each prompt (and every prompt of a completions batch) as engine requests,
their outputs merged as they come, their usage counted.

Choice i of a prompt samples with the request's seed + i, as vLLM's parallel sampling does
(vllm/v1/engine/parallel_sampling.py), so it is the same as a separate request with that seed; without a seed each
choice draws its own. Choices are numbered prompt-major, index = prompt_index * n + i, as OpenAI and vLLM do.

The prompt is shared, not computed n times: a prompt's first choice goes to the engine at once, the others once it
has its first token. By then its prefill has registered the prompt's full KV-cache blocks in the prefix cache, so
the others take those blocks (one more reference each) and compute only the prompt's partly filled last block.
Submitted together, they would all be admitted before any block is registered, and each would prefill the prompt.

A structured request's grammar is compiled once (structured.py); every choice samples inside its own copy of it,
which follows that choice's tokens only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from fastapi import Request

from warpcode.model_runtime.openai_server.errors import bad_request
from warpcode.model_runtime.openai_server.generation import ClientGone, Generation, disconnected
from warpcode.model_runtime.openai_server.schemas import INT64_MAX, Sampling
from warpcode.model_runtime.serving.grammar import GrammarMatcher
from warpcode.model_runtime.serving.request import RequestOutput, tokens_per_verify_step
from warpcode.model_runtime.serving.token_logprobs import TokenLogprob


class Choices:
    def __init__(
        self,
        engine: Any,
        prompts: list[list[int]],
        request: Sampling,
        max_tokens: int | None,
        param: str,
        grammar: GrammarMatcher | None = None,
    ) -> None:
        """`grammar`: the request's compiled grammar, never advanced itself (each choice gets a fresh copy)."""
        self.n, self.seed = request.n, request.seed
        if self.seed is not None and self.seed + self.n - 1 > INT64_MAX:
            message = f"seed: choice i samples with seed + i, so seed + n - 1 must be at most {INT64_MAX}"
            raise bad_request(message, "seed")
        processing = request.processing()
        # the prompt's logprobs (echo) are the same for every choice of it: its first choice alone has them computed
        later = replace(processing, prompt_logprobs=None)
        self._submit_to = lambda prompt_ids, seed, first: Generation(
            engine,
            prompt_ids,
            request,
            max_tokens,
            param,
            seed,
            processing if first else later,
            None if grammar is None else grammar.copy(),
        )
        self.prompts = prompts
        self.generations: list[Generation | None] = [None] * (len(prompts) * self.n)
        try:  # every prompt is checked (and its first choice submitted) before the response starts
            for number in range(len(prompts)):
                self._submit(number * self.n)
        except Exception:
            self.cancel()
            raise

    @property
    def count(self) -> int:
        return len(self.generations)

    def _submit(self, index: int) -> None:
        seed = None if self.seed is None else self.seed + index % self.n
        self.generations[index] = self._submit_to(self.prompts[index // self.n], seed, index % self.n == 0)

    def prompt_logprobs(self, index: int) -> list[TokenLogprob | None]:
        """The logprobs of choice `index`'s prompt (when asked), set once that prompt's first choice has its first
        token, which is before any other choice of the prompt has any."""
        return self.generations[index - index % self.n].handle.prompt_logprobs

    async def outputs(self) -> AsyncIterator[tuple[int, RequestOutput]]:
        """(choice index, engine output) as they come, each choice's in order; raises what a choice raises."""
        queue: asyncio.Queue[tuple[int, RequestOutput | None, Exception | None]] = asyncio.Queue()
        tasks: list[asyncio.Future] = []

        async def follow(index: int) -> None:
            try:
                async for out in self.generations[index].outputs():
                    if index % self.n == 0 and self.generations[index + self.n - 1] is None:
                        # its first token: the prompt is in the prefix cache, the other choices reuse it
                        for other in range(index + 1, index + self.n):
                            self._submit(other)
                            tasks.append(asyncio.ensure_future(follow(other)))
                    queue.put_nowait((index, out, None))
            except Exception as error:  # an ApiError, or a bug: the consumer raises it
                queue.put_nowait((index, None, error))
                return
            queue.put_nowait((index, None, None))

        tasks += [asyncio.ensure_future(follow(index)) for index in range(0, self.count, self.n)]
        try:
            ended = 0
            while ended < self.count:
                index, out, error = await queue.get()
                if error is not None:
                    raise error
                if out is None:
                    ended += 1
                else:
                    yield index, out
        finally:
            for task in tasks:
                task.cancel()
            self.cancel()

    def cancel(self) -> None:
        for generation in self.generations:
            if generation is not None:
                generation.cancel()

    def usage(self) -> dict[str, Any]:
        """Each prompt counted once (with what the prefix cache served of it when it was first read), the
        completion tokens of every choice; and, when some choice verified drafted tokens, `speculative`: the verify
        steps, the tokens drafted and accepted over every choice, and the tokens each verify step committed (an
        extension field, as vLLM's `reasoning_content` is: OpenAI's objects are open)."""
        firsts = [self.generations[index].handle.stats for index in range(0, self.count, self.n)]
        every = [g.handle.stats for g in self.generations if g is not None]
        prompt = sum(stats.prompt_tokens for stats in firsts)
        completion = sum(stats.completion_tokens for stats in every)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": sum(stats.cached_tokens for stats in firsts)},
        }
        steps = sum(stats.verify_steps for stats in every)
        if steps:
            accepted = sum(stats.accepted_tokens for stats in every)
            usage["speculative"] = {
                "verify_steps": steps,
                "draft_tokens": sum(stats.draft_tokens for stats in every),
                "accepted_tokens": accepted,
                "tokens_per_verify_step": round(tokens_per_verify_step(accepted, steps), 3),
            }
        return usage


@dataclass
class Collected:
    token_ids: list[int]
    text: str
    finish_reason: str
    logprobs: list[TokenLogprob]  # one per token id, when the request asked for logprobs


async def collect(choices: Choices, request: Request) -> list[Collected]:
    """Every output of a non-streamed request, per choice; cancels it if the client disconnects while it waits."""
    results = [Collected([], "", "stop", []) for _ in range(choices.count)]

    async def drain() -> None:
        async for index, out in choices.outputs():
            result = results[index]
            result.token_ids += out.token_ids
            result.text += out.text
            result.logprobs += out.logprobs or []
            result.finish_reason = out.finish_reason or result.finish_reason

    draining, watching = asyncio.ensure_future(drain()), asyncio.ensure_future(disconnected(request))
    try:
        await asyncio.wait({draining, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when this handler is cancelled (the server stopping)
        watching.cancel()
        if not draining.done():
            choices.cancel()
            draining.cancel()
    if not draining.done() or draining.cancelled():
        raise ClientGone
    draining.result()  # raises what a choice raised
    return results
