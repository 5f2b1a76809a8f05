"""warpcode.model_runtime.speculative: drafting without a draft model, for speculative decoding (issue 50).

A coding agent's output is mostly text it has seen: the file it rewrites, the old text of an edit, a patch's context
lines. drafter.py proposes the next tokens of a request by suffix matching (in the style of prompt-lookup decoding
and SuffixDecoding): the longest suffix of the request's tokens that occurred earlier in them, or in documents the
agent read (the plain text of files, which read_file shows with line numbers), and the tokens that followed it.
policy.py chooses how many of them to verify each step (the full draft only after a fully accepted one, else a short
probe, none while drafts keep failing). Plain Python over token ids: no torch.

bench/speculative_acceptance.py measures both on real commits of public repositories (teacher forcing).
"""

from warpcode.model_runtime.speculative.drafter import DraftConfig, Match, SuffixDrafter
from warpcode.model_runtime.speculative.policy import DraftPolicy

__all__ = ["DraftConfig", "DraftPolicy", "Match", "SuffixDrafter"]
