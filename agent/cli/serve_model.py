"""`warpcode serve-model`: an OpenAI-compatible server over the in-process engine (docs/reference/model-server.md)."""

from __future__ import annotations

import argparse
import os
import sys

from warpcode.agent.backends.local import SPECULATIVE_MODES
from warpcode.agent.cli.generate import DTYPES, add_weights_argument
from warpcode.agent.extras import SERVER_MODULES, require, require_runtime
from warpcode.model_runtime.openai_server.bound_socket import bind

KEY_VARIABLE = "WARPCODE_API_KEY"  # also what the `openai:` backend sends, so both ends can share one setting


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "serve-model",
        help="serve a local model over an OpenAI-compatible HTTP API",
        description="Serve a checkpoint (or random weights) with the in-process engine (continuous batching, prefix "
        "cache) at http://HOST:PORT/v1: /v1/models, /v1/completions, /v1/chat/completions (tools, streaming), "
        "and /health.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        metavar="DIR",
        help="checkpoint directory (config.json, safetensors, tokenizer), or builtin (warpcode's own small model); "
        "random:PRESET is --random-weights --preset",
    )
    source.add_argument("--random-weights", action="store_true", help="random weights at --preset's shape")
    parser.add_argument("--preset", help="model shape for --random-weights: tiny, qwen3-30b-a3b, mixtral-8x7b, ...")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N (default: cuda when available)")
    parser.add_argument("--dtype", default="auto", choices=sorted(DTYPES), help="default: bf16 on GPU, fp32 on CPU")
    add_weights_argument(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)")
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"key clients must send as `Authorization: Bearer KEY` (default: ${KEY_VARIABLE}, else none); given "
        f"here it shows in `ps` to every user: prefer ${KEY_VARIABLE}",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser Origin whose pages may call the API (repeatable; default: none, every page is refused)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name clients use to reach the server, besides localhost and IP addresses (repeatable; * for "
        "any): requests to other names are refused, as a web page rebinding its own name to this address sends",
    )
    parser.add_argument(
        "--max-body-mb", type=float, default=16.0, metavar="MB", help="largest request body (default: %(default)g)"
    )
    parser.add_argument("--served-model-name", metavar="NAME", help="the model's id in the API (default: DIR's name)")
    parser.add_argument("--kv-cache-gb", type=float, metavar="G", help="KV cache size (default: the engine's)")
    parser.add_argument("--max-model-len", type=int, metavar="N", help="most tokens per sequence (default: config's)")
    parser.add_argument(
        "--speculative",
        choices=SPECULATIVE_MODES,
        help="speculative decoding without a draft model, while one request runs: suffix (drafts from repeats of "
        "the request's own text, off while drafts fail), ngram (prompt-lookup style) or off (default: suffix on a "
        "CPU, off on a GPU, where verifying is not yet measured to pay)",
    )
    parser.add_argument(
        "--warm-up",
        default="8,4096",
        metavar="STREAMS,TOKENS",
        help="capture the GPU's decode graphs for up to STREAMS streams of up to TOKENS tokens before listening, "
        "instead of stalling the first requests of each size (default: %(default)s; 0,0: none)",
    )
    parser.set_defaults(handler=run_model_server)


def run_model_server(args: argparse.Namespace) -> int:
    streams, tokens = _warm_up_sizes(args.warm_up)
    if args.model and args.model.startswith("random:"):  # the model spec of `warpcode batch --replicas`
        args.random_weights, args.preset, args.model = True, args.model.removeprefix("random:"), None
    if args.random_weights and not args.preset:
        raise ValueError("--random-weights needs --preset NAME")
    sock = bind(args.host, args.port)  # before importing and loading: a port in use says so at once
    require_runtime("warpcode serve-model")
    require("warpcode serve-model", SERVER_MODULES, "runtime")
    from warpcode.model_runtime import load, load_random
    from warpcode.model_runtime.builtin_model import BUILTIN_NAME, BUILTIN_SPEC, model_directory
    from warpcode.model_runtime.devices import dtype_named, resolve_device
    from warpcode.model_runtime.openai_server import LISTENING, ModelServer, RequestLimits, base_url, create_app
    from warpcode.model_runtime.speculative import SpeculativeConfig

    limits = RequestLimits(
        allowed_origins=frozenset(args.allow_origin),
        allowed_hosts=frozenset(name.lower().rstrip(".") for name in args.allow_host),
        max_body_bytes=int(args.max_body_mb * 2**20),
    )
    device = resolve_device(args.device)
    dtype = dtype_named(DTYPES[args.dtype])
    sizes = {"kv_cache_gb": args.kv_cache_gb, "max_model_len": args.max_model_len,
             "speculative": SpeculativeConfig.for_device(args.speculative, device)}  # fmt: skip
    if args.random_weights:
        engine = load_random(args.preset, device=device, dtype=dtype, weights=args.weights, **sizes)
        name = args.served_model_name or args.preset
    else:
        directory = model_directory(args.model)
        engine = load(directory, device=device, dtype=dtype, weights=args.weights, **sizes)
        default_name = BUILTIN_NAME if args.model == BUILTIN_SPEC else directory.resolve().name
        name = args.served_model_name or default_name
    api_key = args.api_key or os.environ.get(KEY_VARIABLE) or None
    if streams and tokens and engine.device.type == "cuda":
        print(f"warpcode serve-model: capturing decode graphs (up to {streams} streams, {tokens} tokens)...",
              file=sys.stderr)  # fmt: skip
        engine.warm_up(streams, tokens)

    def announce() -> None:
        key_note = "API key required" if api_key else "no API key"
        print(f"{LISTENING} {base_url(sock)} (model: {name}; {key_note})", file=sys.stderr)
        sys.stderr.flush()

    try:
        ModelServer(create_app(engine, name, api_key, limits), sock, announce).run()
    finally:
        engine.shutdown()
    return 0


def _warm_up_sizes(text: str) -> tuple[int, int]:
    try:
        streams, tokens = (int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"--warm-up takes STREAMS,TOKENS (two integers, 0,0 for none), got {text!r}") from None
    if streams < 0 or tokens < 0:
        raise ValueError(f"--warm-up takes non-negative numbers, got {text!r}")
    return streams, tokens
