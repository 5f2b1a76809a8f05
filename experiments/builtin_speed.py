"""Speed of the built-in model's shape (warpcode.training.model_config.BUILTIN), random weights, on this machine:

- training: optimizer steps of `--train-rows` windows of 2,048 tokens through warpcode.training's training forward
  (dense experts, causal SDPA), backward and AdamW, in fp32 on a CPU or bf16 autocast on a GPU: tokens/s, and the
  FLOPs a token costs (to extrapolate to another machine);
- the runtime, batch 1 (the serving engine; random weights, or the checkpoint `--model DIR`, in each of
  `--weights`): prefill of a `--prompt`-token prompt (an agent turn's system prompt and tools are about 2,000 tokens
  with the built-in tokenizer) and greedy decode tok/s.

One JSON line per measurement. Run: python experiments/builtin_speed.py [--device cpu|cuda] [--threads N]
[--model DIR] [--weights bf16,mxfp8] [--no-training]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

from warpcode.model_runtime import load, load_random
from warpcode.training import trainable
from warpcode.training.model_config import BUILTIN
from warpcode.training.train import PRETRAIN, _optimizer


def train_flops_per_token(length: int) -> float:
    """Forward and backward (3x the forward) matmul FLOPs per token at sequence length `length`, dense experts."""
    c = BUILTIN
    attention_projections = c.hidden_size * c.head_dim * (2 * c.num_attention_heads + 2 * c.num_key_value_heads)
    experts = c.num_experts * 3 * c.hidden_size * c.expert_intermediate_size + c.num_experts * c.hidden_size
    scores = 2 * c.num_attention_heads * c.head_dim * length / 2  # QK^T and PV, causal: half the keys on average
    per_layer = 2 * (attention_projections + experts) + 2 * scores
    return 3 * (c.num_hidden_layers * per_layer + 2 * c.vocab_size * c.hidden_size)


def measure_training(device: torch.device, rows: int, steps: int) -> dict:
    model = trainable.new_model(BUILTIN, seed=0, device=device)
    optimizer = _optimizer(model, PRETRAIN, device)
    ids = torch.randint(0, BUILTIN.vocab_size, (rows, PRETRAIN.sequence_length + 1), device=device)
    times = []
    for _ in range(steps + 1):  # the first step pays for allocation and kernel selection
        start = time.perf_counter()
        with torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda"):
            logits, balance = trainable.forward(model, ids[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()) + 0.01 * balance
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
        times.append(time.perf_counter() - start)
    per_step = sorted(times[1:])[len(times[1:]) // 2]
    tokens = rows * PRETRAIN.sequence_length
    flops = train_flops_per_token(PRETRAIN.sequence_length)
    return {"measure": "train_step", "device": str(device), "threads": torch.get_num_threads(), "tokens": tokens,
            "seconds_per_step": round(per_step, 3), "tokens_per_s": round(tokens / per_step),
            "train_gflop_per_token": round(flops / 1e9, 4),
            "achieved_tflop_per_s": round(flops * tokens / per_step / 1e12, 3)}  # fmt: skip


def measure_runtime(device: torch.device, prompt: int, new_tokens: int, model: str | None, weights: str) -> dict:
    if model:
        engine = load(model, device=device, weights=weights, show_progress=False)
    else:
        engine = load_random(BUILTIN, device=device, weights=weights)
    ids = torch.randint(3, BUILTIN.vocab_size, (prompt,), generator=torch.Generator().manual_seed(0)).tolist()
    engine.generate(ids[:64], 8, stop_token_ids=[])  # start the serving engine
    engine.generate(ids, new_tokens, stop_token_ids=[])
    stats = engine.last_stats
    engine.shutdown()
    return {"measure": "runtime_batch_1", "device": str(device), "threads": torch.get_num_threads(),
            "model": model or "random weights", "weights": weights, "dtype": str(engine.dtype),
            "prompt_tokens": prompt, "prefill_s": round(stats.prompt_seconds, 3),
            "prefill_tokens_per_s": round(stats.prompt_tokens_per_second), "new_tokens": new_tokens,
            "decode_tokens_per_s": round(stats.decode_tokens_per_second, 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own choice)")
    parser.add_argument("--train-rows", type=int, default=4, help="windows of 2,048 tokens per training step")
    parser.add_argument("--train-steps", type=int, default=3)
    parser.add_argument("--prompt", type=int, default=2000)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--model", help="a checkpoint directory of the shape (default: random weights)")
    parser.add_argument("--weights", default="bf16", help="comma-separated: bf16, mxfp8 (default: bf16)")
    parser.add_argument("--no-training", action="store_true", help="time the runtime only")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    for weights in args.weights.split(","):
        print(json.dumps(measure_runtime(device, args.prompt, args.new_tokens, args.model, weights)), flush=True)
    if not args.no_training:
        print(json.dumps(measure_training(device, args.train_rows, args.train_steps)), flush=True)


if __name__ == "__main__":
    main()
