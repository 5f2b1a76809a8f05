"""The built-in model's shape: qwen3_moe (routed experts, top-k routing renormalised, q/k norms) small enough to ship
inside the package and to answer quickly on a laptop's CPU.

    vocabulary 16,384 (tokenizer.py), chosen by experiments/builtin_vocab.py (below)
    hidden 256, 8 layers, 4 query heads and 2 key/value heads of 64
    every layer MoE: 16 experts of intermediate size 96, 4 routed per token, probabilities renormalised
    tied input and output embeddings; context 8,192 tokens, RoPE theta 1e6

15.24M parameters, 30.5 MB in bf16 (the package's budget is 32 MB); per token it uses 8.2M of them (the
attention, 4 of 16 experts, the embedding row and the 4.2M-parameter output projection). The experts are
fine-grained as Qwen3's are (expert width 0.375 x hidden, like Qwen3-30B-A3B's 768 / 2048): 4 of 16 gives 1,820
expert combinations per layer where 2 of 8 of twice the width gives 28, for the same parameters and work.

The vocabulary: BPEs of 8K / 12K / 16K / 24K tokens trained on 52 MB of permissive site-packages code gave 3.78 /
3.96 / 4.08 / 4.21 bytes per token on code they never saw, and wrote the agent's real prompt (system prompt, tools,
a short tool-calling exchange) in 3,040 / 2,742 / 2,631 / 2,566 tokens, for 4.2 / 6.3 / 8.4 / 12.6 MB of tied
embedding. Each MB of embedding bought 0.087, then 0.056, then 0.031 bytes per token: past 16K it buys half as much,
and the MB are better spent on experts.

The context, 8,192 tokens: the agent's prompt alone is about 2,600 (above) before the repository map and the work
itself. RoPE theta 1e6, Qwen3's: the slowest 15 of the 32 rotary frequencies turn less than once over the whole
context, so positions past the 2,048-token pre-training windows (met in fine-tuning) are no new angles for them.

SMOKE is the same architecture at toy size, for tests and the `--smoke` pipeline on a CPU (seconds).
"""

from __future__ import annotations

from dataclasses import replace

from warpcode.model_runtime.config import ModelConfig
from warpcode.training.tokenizer import END_OF_TEXT, IM_END, SPECIAL_TOKENS

VOCAB_SIZE = 16384
SMOKE_VOCAB_SIZE = 512

BUILTIN = ModelConfig(
    model_type="qwen3_moe",
    vocab_size=VOCAB_SIZE,
    hidden_size=256,
    # the dense MLP width, which no layer uses (every layer is MoE); config.json must still name one
    intermediate_size=768,
    moe_intermediate_size=96,
    num_hidden_layers=8,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    num_experts=16,
    num_experts_per_tok=4,
    norm_topk_prob=True,
    qk_norm="per_head",
    rms_norm_eps=1e-6,
    rope_theta=1e6,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
    eos_token_ids=[SPECIAL_TOKENS.index(IM_END)],
    pad_token_id=SPECIAL_TOKENS.index(END_OF_TEXT),
)

SMOKE = replace(
    BUILTIN,
    vocab_size=SMOKE_VOCAB_SIZE,
    hidden_size=64,
    intermediate_size=128,
    moe_intermediate_size=32,
    num_hidden_layers=2,
    head_dim=16,
    num_experts=8,
    num_experts_per_tok=2,
    max_position_embeddings=2048,
)

SHAPES = {"builtin": BUILTIN, "smoke": SMOKE}


def parameter_count(config: ModelConfig) -> int:
    """Parameters of a qwen3_moe model of this shape, every layer MoE, as stored (a tied LM head counted once)."""
    hidden, heads, kv_heads, head_dim = (
        config.hidden_size,
        config.num_attention_heads,
        config.num_key_value_heads,
        config.head_dim,
    )
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads) + 2 * head_dim  # q, o, k, v; q/k norms
    experts = config.num_experts * 3 * hidden * config.expert_intermediate_size + config.num_experts * hidden
    layer = attention + experts + 2 * hidden  # and the two layer norms
    embeddings = config.vocab_size * hidden * (1 if config.tie_word_embeddings else 2)
    return config.num_hidden_layers * layer + embeddings + hidden  # and the final norm
