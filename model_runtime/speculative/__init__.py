"""warpcode.model_runtime.speculative: speculative decoding without a draft model (issue 50).

A coding agent's output is mostly text it has seen: the file it rewrites, the old text of an edit, a patch's context
lines. drafter.py proposes the next tokens of a request by suffix matching (in the style of prompt-lookup decoding
and SuffixDecoding): the longest suffix of the request's tokens that occurred earlier in them, or in documents the
agent read (the plain text of files, which read_file shows with line numbers), and the tokens that followed it.
policy.py chooses how many of them to verify each step (the full draft only after a fully accepted one, else a short
probe, none while drafts keep failing). verify.py decides which drafted tokens a verify step keeps (exact for greedy,
lossless for sampling); speculator.py is one request's drafter and policy inside the serving engine, and config.py
the engine's switch (`off`, `ngram`, `suffix`). Plain Python over token ids: no torch.

bench/speculative_acceptance.py measures drafting on real commits of public repositories (teacher forcing), and
bench/speculative_engine.py the engine end to end.
"""

from warpcode.model_runtime.speculative.config import MODES, SpeculativeConfig, default_mode
from warpcode.model_runtime.speculative.drafter import DraftConfig, Match, SuffixDrafter
from warpcode.model_runtime.speculative.policy import DraftPolicy
from warpcode.model_runtime.speculative.speculator import Speculator
from warpcode.model_runtime.speculative.verify import Verdict, verify_draft

__all__ = [
    "MODES",
    "DraftConfig",
    "DraftPolicy",
    "Match",
    "SpeculativeConfig",
    "Speculator",
    "SuffixDrafter",
    "Verdict",
    "default_mode",
    "verify_draft",
]
