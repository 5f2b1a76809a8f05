"""`warpcode generate`: stream a completion from a local checkpoint (or random weights) and report tok/s."""

from __future__ import annotations

import argparse
import sys

from warpcode.agent.extras import require_runtime
from warpcode.model_runtime.weight_formats import WEIGHT_FORMATS

# --dtype spelling -> torch attribute name; auto picks per device in the runtime
DTYPES = {
    "auto": None,
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float32": "float32",
    "fp32": "float32",
}


def add_weights_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--weights",
        default="bf16",
        choices=WEIGHT_FORMATS,
        help="bf16: the weights in --dtype; mxfp8: projections and experts in MXFP8, quantised on the device as they "
        "load (default: %(default)s)",
    )


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="stream a completion from a local model and print tok/s",
        description="Generate from a Hugging Face MoE checkpoint directory with the in-process runtime. Text is "
        "streamed to stdout; prompt and decode tok/s go to stderr.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        metavar="DIR",
        help="checkpoint directory (config.json, safetensors, tokenizer), or builtin (warpcode's own small model)",
    )
    source.add_argument("--random-weights", action="store_true", help="random weights at --preset's shape")
    parser.add_argument("--preset", help="model shape for --random-weights: tiny, qwen3-30b-a3b, mixtral-8x7b, ...")
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="prompt text (needs the checkpoint's tokenizer)")
    prompt.add_argument("--prompt-ids", help="prompt as comma-separated token ids; prints token ids back")
    parser.add_argument("--chat", action="store_true", help="wrap --prompt as a user message in the chat template")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N (default: cuda when available)")
    parser.add_argument("--dtype", default="auto", choices=sorted(DTYPES), help="default: bf16 on GPU, fp32 on CPU")
    add_weights_argument(parser)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--min-p", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.set_defaults(handler=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    require_runtime("warpcode generate")
    from warpcode.model_runtime import load, load_random
    from warpcode.model_runtime.builtin_model import model_directory
    from warpcode.model_runtime.devices import dtype_named, resolve_device

    if args.random_weights and not args.preset:
        raise ValueError("--random-weights needs --preset NAME")
    if args.prompt is None and args.prompt_ids is None:
        raise ValueError("give --prompt TEXT or --prompt-ids 1,2,3")
    if args.random_weights and args.prompt is not None:
        raise ValueError(
            "--random-weights builds a model without a tokenizer: give the prompt as token ids, e.g. --prompt-ids 1,2,3"
        )
    prompt_ids = _token_ids(args.prompt_ids) if args.prompt_ids is not None else None
    device = resolve_device(args.device)
    dtype = dtype_named(DTYPES[args.dtype])
    if args.random_weights:
        engine = load_random(args.preset, device=device, dtype=dtype, seed=args.seed or 0, weights=args.weights)
    else:
        engine = load(model_directory(args.model), device=device, dtype=dtype, weights=args.weights)
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, seed=args.seed)
    if prompt_ids is not None:
        print(" ".join(map(str, engine.generate(prompt_ids, args.max_new_tokens, **sampling))), flush=True)
    else:
        if engine.tokenizer is None:
            source = (
                "--random-weights builds a model without a tokenizer"
                if args.random_weights
                else (f"{args.model} has no tokenizer.json")
            )
            raise ValueError(f"{source}: give the prompt as token ids, e.g. --prompt-ids 1,2,3")
        if args.chat:  # the prompt is a user message: its text, control tokens only from the template
            prompt_ids = engine.tokenizer.chat_prompt_ids([{"role": "user", "content": args.prompt}])
        else:  # a raw prompt is the caller's whole input, special tokens included
            prompt_ids = engine.tokenizer.encode(args.prompt)
        for delta in engine.stream(prompt_ids, args.max_new_tokens, **sampling):
            print(delta, end="", flush=True)
        print()
    stats = engine.last_stats
    print(
        f"prompt: {stats.prompt_tokens} tokens, {stats.prompt_tokens_per_second:.1f} tok/s | "
        f"decode: {stats.new_tokens} tokens, {stats.decode_tokens_per_second:.1f} tok/s",
        file=sys.stderr,
    )
    return 0


def _token_ids(text: str) -> list[int]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    bad = next((part for part in parts if not part.isdigit()), None)
    if bad is not None or not parts:
        raise ValueError(f"--prompt-ids takes comma-separated token ids such as 1,2,3; {bad or text!r} is not one")
    return [int(part) for part in parts]
