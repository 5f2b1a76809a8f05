"""Agent conversations as fine-tuning examples: the token ids the agent's local backend would send for the whole
conversation (conversation_prompt_ids with our chat template, so control tokens come only from its markup), and
which of them the model learns to write -- the assistant's turns, nothing else.

An assistant turn is learned from just after the prompt the model is given for it (the conversation before it and
the generation prompt `<|im_start|>assistant\\n`) through the `<|im_end|>` that ends it: its text, its tool calls
and the decision to stop. Each such prompt is rendered on its own and must be exactly the start of the whole
conversation's ids, so what the model is trained to continue is token for token what it will be asked to continue;
a template or tokenizer that broke that would be refused here, not learned around.

Examples are stored as three arrays beside each other (PATH.tokens, PATH.targets, PATH.offsets): every example's
ids back to back, a 0/1 byte per id saying it is learned, and where each example starts.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer as FastTokenizer

from warpcode.model_runtime.chat.messages import Message, ToolCall
from warpcode.model_runtime.chat.prompt import conversation_prompt_ids
from warpcode.model_runtime.tokenizer import Tokenizer
from warpcode.training.corpus import TOKEN_DTYPE
from warpcode.training.tokenizer import IM_END, runtime_tokenizer


@dataclass
class Example:
    ids: np.ndarray  # int64 [T]: the whole conversation
    targets: np.ndarray  # bool [T]: ids[t] is one the model learns to write (predicted from ids[:t])


def conversation_example(
    tokenizer: Tokenizer, messages: list[Message], tools: list[dict[str, Any]], unlearned: Collection[int] = ()
) -> Example:
    """The conversation's example; the assistant turns at the indices `unlearned` (a trajectory's deliberate slips)
    stay in its text, as what the later turns recover from, but are not learned."""
    ids = conversation_prompt_ids(tokenizer, messages, tools, add_generation_prompt=False)
    end_of_turn = tokenizer.token_to_id(IM_END)
    targets = np.zeros(len(ids), dtype=bool)
    for index in unlearned:
        if messages[index].role != "assistant":
            raise ValueError(f"message {index} is marked unlearned but is no assistant turn")
    for index, message in enumerate(messages):
        if message.role != "assistant" or index in unlearned:
            continue
        prompt = conversation_prompt_ids(tokenizer, messages[:index], tools)
        if ids[: len(prompt)] != prompt:
            raise ValueError(
                f"message {index}: the prompt for this assistant turn is not the start of the whole conversation's "
                "tokens, so the model would learn to continue a prompt it is never given (check the chat template)"
            )
        try:
            end = ids.index(end_of_turn, len(prompt))
        except ValueError:
            raise ValueError(f"message {index}: the assistant turn has no {IM_END}") from None
        targets[len(prompt) : end + 1] = True
    return Example(np.asarray(ids, dtype=np.int64), targets)


def write_examples(examples: Iterable[Example], path: Path) -> int:
    """Stores the examples at `path` (module docstring); returns how many."""
    offsets = [0]
    with path.with_suffix(".tokens").open("wb") as tokens, path.with_suffix(".targets").open("wb") as targets:
        for example in examples:
            tokens.write(example.ids.astype(TOKEN_DTYPE).tobytes())
            targets.write(example.targets.astype(np.uint8).tobytes())
            offsets.append(offsets[-1] + len(example.ids))
    np.save(path.with_suffix(".offsets.npy"), np.asarray(offsets, dtype=np.int64))
    return len(offsets) - 1


class StoredExamples:
    """The examples `write_examples` stored, read from memory-mapped arrays."""

    def __init__(self, path: Path):
        self.tokens = np.memmap(path.with_suffix(".tokens"), dtype=TOKEN_DTYPE, mode="r")
        self.targets = np.memmap(path.with_suffix(".targets"), dtype=np.uint8, mode="r")
        self.offsets = np.load(path.with_suffix(".offsets.npy"))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def length(self, index: int) -> int:
        return int(self.offsets[index + 1] - self.offsets[index])

    def __getitem__(self, index: int) -> Example:
        start, end = self.offsets[index], self.offsets[index + 1]
        return Example(np.asarray(self.tokens[start:end], dtype=np.int64), np.asarray(self.targets[start:end], bool))


Conversation = tuple[list[Message], list[dict[str, Any]], list[int]]  # messages, tools, unlearned turns (load_row)


def load_row(row: dict[str, Any]) -> tuple[list[Message], list[dict[str, Any]], list[int]]:
    """A trajectory row (trajectories.py) as the agent held it: (messages, tools, the unlearned turns), ready for
    conversation_example. Rows written before slips existed have none. Here, not beside the generator, so that
    rendering needs no agent (a GPU machine renders without the agent's packages)."""
    messages = [
        Message(
            m["role"],
            m["content"],
            [ToolCall(c["id"], c["name"], c["arguments"]) for c in m["tool_calls"]],
            m["tool_call_id"],
            m["name"],
            m["reasoning"],
        )
        for m in row["messages"]
    ]
    return messages, row["tools"], row.get("unlearned", [])


def render_examples(tokenizer_path: Path, conversations: Iterable[Conversation], workers: int) -> Iterator[Example]:
    """conversation_example for each conversation, in order, `workers` processes rendering at once (a long
    conversation takes a render and an encoding per assistant turn)."""
    with multiprocessing.get_context("spawn").Pool(workers, _start_worker, (str(tokenizer_path),)) as pool:
        yield from pool.imap(_render, conversations, chunksize=4)


_worker_tokenizer: Tokenizer | None = None


def _start_worker(tokenizer_path: str) -> None:
    global _worker_tokenizer
    _worker_tokenizer = runtime_tokenizer(FastTokenizer.from_file(tokenizer_path))


def _render(conversation: Conversation) -> Example:
    return conversation_example(_worker_tokenizer, *conversation)
