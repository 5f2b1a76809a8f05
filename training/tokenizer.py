"""The built-in model's tokenizer: a byte-level BPE trained on Python sources, with Qwen3-Coder's control tokens.

- Byte-level: every string encodes, and decoding gives back its exact bytes (no normaliser: code is not text to
  tidy up).
- Pre-tokenisation splits as Qwen2/Qwen3's tokenizers do (the regex below, as in their tokenizer.json): letters
  with one leading non-letter (` self`, `_name`), numbers digit by digit, punctuation runs, and whitespace runs on
  their own, so a line's indentation is one token whatever follows it.
- The special tokens are ChatML's, as in the Qwen tokenizers: `<|im_start|>`, `<|im_end|>` (the end of a turn, the
  end-of-generation token) and `<|endoftext|>` (between pre-training documents, padding). They are control tokens:
  the runtime makes them only where the chat template's own markup writes them.
- The tool-call and reasoning markers are added tokens that are not special, as Qwen3-Coder's tokenizer has them
  (`<tool_call>`, `</tool_call>`, `<tool_response>`, `</tool_response>`, `<think>`, `</think>`): the model writes them
  as text the tool-call parser reads, and decoding with special tokens skipped keeps them. The XML tags inside a call
  (`<function=`, `<parameter=`) are ordinary BPE text there too.

Ids: the special tokens first (0, 1, 2), then the learned vocabulary, then the markers: exactly `vocab_size` in all.
Training is deterministic: the same texts in the same order give the same tokenizer.json, byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from warpcode.model_runtime.tokenizer import Tokenizer as RuntimeTokenizer

END_OF_TEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)
MARKER_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")
# Qwen2 / Qwen3 pre-tokenisation (their tokenizer.json's Split pattern).
PRE_TOKENIZE = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """A byte-level BPE of exactly `vocab_size` tokens (special tokens and markers included) learned from `texts`."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKENIZE), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(MARKER_TOKENS),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.add_tokens([AddedToken(marker, special=False, normalized=False) for marker in MARKER_TOKENS])
    if tokenizer.get_vocab_size() != vocab_size:
        raise ValueError(
            f"the texts hold too little to learn {vocab_size} tokens (got {tokenizer.get_vocab_size()}): "
            "give more text or ask for a smaller vocabulary"
        )
    return tokenizer


CHAT_TEMPLATE = (Path(__file__).resolve().parent / "chat_template.jinja").read_text()


def runtime_tokenizer(tokenizer: Tokenizer) -> RuntimeTokenizer:
    """The tokenizer as the runtime reads it from the checkpoint: with our chat template and its end-of-turn token,
    so training renders conversations exactly as the agent's local backend will (conversation_prompt_ids)."""
    return RuntimeTokenizer(
        tokenizer, chat_template=CHAT_TEMPLATE, eos_token=IM_END, special_tokens={"pad_token": END_OF_TEXT}
    )
