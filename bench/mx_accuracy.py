"""What MXFP8 weights cost in quality, measured on a model trained here: no trained MoE can be downloaded on the GPU
machine and random weights say nothing about quality, so one run trains a small qwen3_moe on the Python sources it
finds there and compares warpcode's runtime with bf16 and with MXFP8 weights on held-out files.

python3 -m warpcode.bench.mx_accuracy --device cuda --train-seconds 180 --out $OUT/mx_accuracy.json    # about 5 minutes
python3 -m warpcode.bench.mx_accuracy --tiny --device cpu --weights bf16 --out /tmp/mx.json    # a CPU smoke run
python3 -m warpcode.bench.mx_accuracy --model builtin --device cpu --max-mb 8    # the shipped model, nothing trained
(warpcode must import: `pip install --no-deps -e .` first, as experiments/gpu_session.py does.)

1. Data: every `.py` file under the interpreter's library folders (site-packages and the standard library), identical
   files once; a file is held out when sha256(seed, path) falls in the first `--heldout` of the hash range, so the
   split does not depend on which files exist. Beyond `--max-mb` a hash-ordered subset is kept (spread over packages).
2. Tokenizer: a byte-level BPE (`tokenizers`) trained on up to `--tokenizer-mb` of the training files; documents are
   joined with <|endoftext|>.
3. Model: transformers' Qwen3MoeForCausalLM (one dense MLP layer first, so MXFP8 dense MLPs are measured too),
   trained for `--train-seconds` on random windows of `--seq-len` tokens with AdamW and a router balance loss. The
   model runs in bf16 with fp32 master weights held by the optimiser (the step is taken in fp32 and copied back):
   transformers' grouped-GEMM experts cast activations to the weights' dtype, so fp32 weights under autocast would
   run the experts in fp32. Saved with save_pretrained (bf16 safetensors) and the tokenizer into a temp folder.
4. Evaluation on non-overlapping held-out windows, the same for every model: perplexity exp(mean NLL) from
   `engine.logits` for each `--weights` format (and from the transformers model itself, the runtime's cross-check),
   teacher-forced top-1 agreement and mean KL(bf16 || format) against the runtime's bf16 logits, and greedy
   continuations of held-out prompts (`engine.generate_batch`, temperature 0, no stop tokens): positionwise token
   agreement and the mean length of the common prefix.
5. A table on stdout and every number in `--out` (JSON); `ppl_relative_change[format]` = (ppl - ppl_bf16) / ppl_bf16.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import math
import os
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

END_OF_TEXT = "<|endoftext|>"
_start = time.perf_counter()


def log(message: str) -> None:
    print(f"[{time.perf_counter() - _start:7.1f}s] {message}", flush=True)


@dataclass
class Setup:
    """Everything a run's size depends on: `--tiny` swaps in a few-second CPU configuration."""

    hidden_size: int = 512
    num_hidden_layers: int = 8
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    head_dim: int = 64
    num_experts: int = 64
    num_experts_per_tok: int = 8
    moe_intermediate_size: int = 256
    intermediate_size: int = 1536  # the dense MLP of layer 0
    vocab_size: int = 16384
    seq_len: int = 512
    batch_size: int = 64  # sequences per optimiser step
    learning_rate: float = 2e-3
    warmup_steps: int = 50
    max_steps: int = 0  # 0: until --train-seconds
    max_files: int = 0  # 0: no limit but the size cap
    eval_windows: int = 512
    eval_batch: int = 16
    kl_windows: int = 16  # windows whose bf16 distributions are kept for KL
    prompts: int = 48
    prompt_len: int = 96
    new_tokens: int = 64


TINY = Setup(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    num_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    intermediate_size=96,
    vocab_size=400,
    seq_len=64,
    batch_size=4,
    warmup_steps=2,
    max_steps=6,
    max_files=60,
    eval_windows=6,
    eval_batch=3,
    kl_windows=2,
    prompts=3,
    prompt_len=16,
    new_tokens=6,
)


def library_roots() -> list[Path]:
    paths = sysconfig.get_paths()
    roots = {Path(paths[key]).resolve() for key in ("purelib", "platlib", "stdlib") if key in paths}
    return sorted(root for root in roots if root.is_dir())


def collect_sources(max_bytes: int, heldout: float, seed: int, max_files: int) -> tuple[list[str], list[str], dict]:
    """(training texts, held-out texts, what was found): one text per distinct file, in hash order."""
    files: dict[Path, str] = {}  # resolved path -> split key (the path under its root, so roots may overlap)
    for root in library_roots():
        for folder, _, names in os.walk(root):  # not into linked folders: no loops, no foreign trees
            for name in names:
                if not name.endswith(".py"):
                    continue
                path = Path(folder, name)
                try:
                    resolved = path.resolve()
                    if resolved not in files and resolved.is_file() and 0 < resolved.stat().st_size <= 1 << 20:
                        files[resolved] = str(path.relative_to(root))
                except OSError:
                    continue
    ranked = sorted(files, key=lambda path: _hash(seed, files[path]))
    train, held, seen, total = [], [], set(), 0
    for path in ranked:
        if total >= max_bytes or (max_files and len(train) + len(held) >= max_files):
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        digest = hashlib.sha256(text.encode()).digest()
        if digest in seen or not text.strip():
            continue
        seen.add(digest)
        total += len(text.encode())
        in_heldout = _hash(seed, "split:" + files[path]) < heldout
        (held if in_heldout else train).append(text)
    info = {
        "roots": [str(root) for root in library_roots()],
        "files_found": len(files),
        "files_train": len(train),
        "files_heldout": len(held),
        "bytes_train": sum(len(t.encode()) for t in train),
        "bytes_heldout": sum(len(t.encode()) for t in held),
    }
    return train, held, info


def _hash(seed: int, key: str) -> float:
    """A uniform number in [0, 1) from (seed, key), the same on every machine."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big") / 2**64


def train_tokenizer(texts: list[str], vocab_size: int, max_bytes: int) -> Tokenizer:
    sample, size = [], 0
    for text in texts:  # already in hash order: a prefix is a spread-out sample
        if size >= max_bytes:
            break
        sample.append(text)
        size += len(text)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(sample, trainer, length=len(sample))
    return tokenizer


def encode_stream(tokenizer: Tokenizer, texts: list[str], chunk: int = 256) -> torch.Tensor:
    """All texts' ids in one int32 stream, each document followed by <|endoftext|>."""
    end = tokenizer.token_to_id(END_OF_TEXT)
    pieces = []
    for start in range(0, len(texts), chunk):  # chunked: an Encoding holds far more than its ids
        for encoding in tokenizer.encode_batch(texts[start : start + chunk], add_special_tokens=False):
            pieces.append(torch.tensor([*encoding.ids, end], dtype=torch.int32))
    return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.int32)


def build_model(setup: Setup, end_id: int):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        vocab_size=setup.vocab_size,
        hidden_size=setup.hidden_size,
        intermediate_size=setup.intermediate_size,
        num_hidden_layers=setup.num_hidden_layers,
        num_attention_heads=setup.num_attention_heads,
        num_key_value_heads=setup.num_key_value_heads,
        head_dim=setup.head_dim,
        num_experts=setup.num_experts,
        num_experts_per_tok=setup.num_experts_per_tok,
        moe_intermediate_size=setup.moe_intermediate_size,
        mlp_only_layers=[0],
        norm_topk_prob=True,
        max_position_embeddings=max(2048, setup.seq_len),
        tie_word_embeddings=False,
        router_aux_loss_coef=0.01,
        bos_token_id=None,
        eos_token_id=end_id,
        pad_token_id=None,
    )
    torch.manual_seed(0)
    return Qwen3MoeForCausalLM(config)


def train(model, tokens: torch.Tensor, setup: Setup, seconds: float, device: torch.device, dtype: torch.dtype) -> dict:
    """AdamW on fp32 master weights while the model computes in `dtype`; linear warm-up, then a linear decay to a
    tenth of the peak over the time budget. Returns the step / token counts and the loss log."""
    model.to(device=device, dtype=dtype).train()
    params = [p for p in model.parameters() if p.requires_grad]
    master = [p.detach().float().clone().requires_grad_(True) for p in params]
    decay = [m for m, p in zip(master, params, strict=True) if p.dim() >= 2]
    no_decay = [m for m, p in zip(master, params, strict=True) if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=setup.learning_rate, betas=(0.9, 0.95), fused=device.type == "cuda")
    tokens = tokens.to(device)
    generator = torch.Generator(device=device).manual_seed(0)
    high = len(tokens) - setup.seq_len
    offsets_range = torch.arange(setup.seq_len, device=device)
    coef = model.config.router_aux_loss_coef
    losses, step, begin, last_log = [], 0, time.perf_counter(), 0.0
    while True:
        elapsed = time.perf_counter() - begin
        if (setup.max_steps and step >= setup.max_steps) or (not setup.max_steps and elapsed >= seconds):
            break
        fraction = min(elapsed / seconds, 1.0) if not setup.max_steps else step / setup.max_steps
        lr = setup.learning_rate * min((step + 1) / setup.warmup_steps, 1.0) * (1.0 - 0.9 * fraction)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, high, (setup.batch_size,), device=device, generator=generator)
        batch = tokens[starts[:, None] + offsets_range].long()
        out = model(input_ids=batch, labels=batch, output_router_logits=True, use_cache=False)
        out.loss.backward()
        for m, p in zip(master, params, strict=True):
            m.grad = None if p.grad is None else p.grad.float()  # an expert no token chose has none
            p.grad = None
        grad_norm = torch.nn.utils.clip_grad_norm_(master, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            torch._foreach_copy_(params, master)
        step += 1
        lm_loss = (out.loss - coef * out.aux_loss).item()  # also a sync: the time budget counts finished steps
        now = time.perf_counter() - begin
        if now - last_log >= 10.0 or step == 1 or (setup.max_steps and step == setup.max_steps):
            last_log = now
            rate = step * setup.batch_size * setup.seq_len / now
            losses.append({"step": step, "seconds": round(now, 2), "loss": lm_loss, "lr": lr})
            log(f"step {step:5d}  loss {lm_loss:.4f}  grad norm {grad_norm.item():.2f}  lr {lr:.2e}  {rate:,.0f} tok/s")
    seconds_used = time.perf_counter() - begin
    model.eval()
    return {
        "steps": step,
        "tokens": step * setup.batch_size * setup.seq_len,
        "seconds": seconds_used,
        "tokens_per_second": step * setup.batch_size * setup.seq_len / seconds_used,
        "final_loss": losses[-1]["loss"] if losses else None,
        "loss_log": losses,
        "experts_implementation": getattr(model.config, "_experts_implementation", None),
    }


@torch.inference_mode()
def score_windows(logits_fn, windows: torch.Tensor, batch: int, keep: int) -> dict:
    """Teacher-forced scores of `windows` [N, T] under logits_fn (int [B, T] -> [B, T, V]): summed NLL of every
    next token, each position's argmax, and the log-probabilities of the first `keep` windows (on the CPU)."""
    nll, argmax, kept = 0.0, [], []
    for start in range(0, len(windows), batch):
        ids = windows[start : start + batch]
        logits = logits_fn(ids)[:, :-1].float()
        log_probs = logits.log_softmax(dim=-1)
        targets = ids[:, 1:].to(log_probs.device)
        nll += -log_probs.gather(-1, targets[..., None]).double().sum().item()
        argmax.append(logits.argmax(dim=-1).cpu())
        if start < keep:
            kept.append(log_probs[: keep - start].cpu())
    count = windows.shape[0] * (windows.shape[1] - 1)
    return {
        "nll": nll / count,
        "ppl": math.exp(nll / count),
        "argmax": torch.cat(argmax),
        "log_probs": torch.cat(kept) if kept else None,
    }


def compare_scores(reference: dict, other: dict) -> dict:
    """Teacher-forced top-1 agreement and mean KL(reference || other) per position."""
    out = {"top1_agreement": (reference["argmax"] == other["argmax"]).double().mean().item()}
    if reference["log_probs"] is not None and other["log_probs"] is not None:
        total = 0.0
        for p, q in zip(reference["log_probs"], other["log_probs"], strict=True):  # a window at a time, in float64
            p, q = p.double(), q.double()
            total += (p.exp() * (p - q)).sum().item()
        out["kl"] = total / (reference["log_probs"].shape[0] * reference["log_probs"].shape[1])
    return out


def greedy_agreement(reference: list[list[int]], other: list[list[int]]) -> dict:
    """Positionwise token agreement (position i counts as agreeing when both continuations have the same token
    there; a missing token disagrees), mean common-prefix length, and the fraction of identical continuations."""
    agree, positions, prefixes = 0, 0, []
    for ref, oth in zip(reference, other, strict=True):
        length = max(len(ref), len(oth))
        agree += sum(a == b for a, b in zip(ref, oth, strict=False))
        positions += length
        prefix = 0
        while prefix < min(len(ref), len(oth)) and ref[prefix] == oth[prefix]:
            prefix += 1
        prefixes.append(prefix)
    return {
        "token_agreement": agree / positions if positions else 1.0,
        "common_prefix_mean": sum(prefixes) / len(prefixes) if prefixes else 0.0,
        "identical_fraction": sum(a == b for a, b in zip(reference, other, strict=True)) / max(len(reference), 1),
    }


def evaluate_runtime(path: Path, weights: str, device: torch.device, dtype: torch.dtype, windows, prompts, setup):
    from warpcode.model_runtime import load

    begin = time.perf_counter()
    kv_cache_gb = 2.0 if device.type == "cuda" else 0.25
    engine = load(path, device=device, dtype=dtype, weights=weights, show_progress=False, kv_cache_gb=kv_cache_gb)
    loaded = time.perf_counter()
    scores = score_windows(engine.logits, windows, setup.eval_batch, setup.kl_windows)
    scored = time.perf_counter()
    continuations = engine.generate_batch(prompts, setup.new_tokens, temperature=0.0, stop_token_ids=[])
    generated = time.perf_counter()
    engine.shutdown()
    del engine
    free_device_memory(device)
    timings = {"load_seconds": loaded - begin, "ppl_seconds": scored - loaded, "generate_seconds": generated - scored}
    log(f"runtime {weights}: ppl {scores['ppl']:.4f}  ({', '.join(f'{k} {v:.1f}' for k, v in timings.items())})")
    return scores, continuations, timings


def free_device_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def heldout_eval_set(tokens: torch.Tensor, setup: Setup) -> tuple[torch.Tensor, list[list[int]]]:
    """Non-overlapping windows of seq_len tokens, and prompts from windows spread evenly over them."""
    count = min(len(tokens) // setup.seq_len, setup.eval_windows)
    if count < 1:
        raise SystemExit(f"only {len(tokens)} held-out tokens: fewer than one window of {setup.seq_len}")
    windows = tokens[: count * setup.seq_len].view(count, setup.seq_len).long()
    picks = torch.linspace(0, count - 1, min(setup.prompts, count)).round().long().unique()
    prompts = [windows[i, : setup.prompt_len].tolist() for i in picks.tolist()]
    return windows, prompts


def print_table(report: dict) -> None:
    header = ("model", "ppl", "d ppl", "top-1 agr", "KL", "greedy agr", "prefix")
    widths = (20, 10, 9, 10, 10, 11, 8)
    print(
        "\n" + " ".join(f"{h:{'<' if i == 0 else '>'}{w}}" for i, (h, w) in enumerate(zip(header, widths, strict=True)))
    )
    for name, r in report["results"].items():
        greedy = r.get("greedy", {})
        cells = (
            name if name == "transformers" else f"runtime {name}",
            f"{r['ppl']:.4f}",
            _pct(r.get("ppl_relative_change")),
            _num(r.get("top1_agreement"), 4),
            _num(r.get("kl"), 6),
            _num(greedy.get("token_agreement"), 4),
            _num(greedy.get("common_prefix_mean"), 1),
        )
        print(" ".join(f"{c:{'<' if i == 0 else '>'}{w}}" for i, (c, w) in enumerate(zip(cells, widths, strict=True))))
    print(f"(changes, agreements and KL against runtime bf16; {report['eval']['tokens']:,} held-out tokens)\n")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.3f}%"


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def prepare_data(
    args: argparse.Namespace, setup: Setup, timings: dict
) -> tuple[Tokenizer, torch.Tensor, torch.Tensor, dict]:
    """(tokenizer, training stream, held-out stream, what the data is)."""
    mark = time.perf_counter()
    max_bytes = int((0.2 if args.tiny else args.max_mb) * 1e6)
    train_texts, held_texts, data = collect_sources(max_bytes, args.heldout, args.seed, setup.max_files)
    if not held_texts:  # a tiny file set can miss the held-out range entirely
        held_texts = [train_texts.pop()]
        data.update(files_train=len(train_texts), files_heldout=1)
    timings["collect_seconds"] = time.perf_counter() - mark
    log(f"{data['files_train']} training files ({data['bytes_train'] / 1e6:.1f} MB), {data['files_heldout']} held out")
    mark = time.perf_counter()
    tokenizer = train_tokenizer(train_texts, setup.vocab_size, int(args.tokenizer_mb * 1e6))
    timings["tokenizer_seconds"] = time.perf_counter() - mark
    mark = time.perf_counter()
    train_tokens, held_tokens = encode_stream(tokenizer, train_texts), encode_stream(tokenizer, held_texts)
    timings["encode_seconds"] = time.perf_counter() - mark
    data.update(tokens_train=len(train_tokens), tokens_heldout=len(held_tokens), vocab_size=tokenizer.get_vocab_size())
    log(
        f"tokenizer: {tokenizer.get_vocab_size()} tokens; {len(train_tokens):,} training, {len(held_tokens):,} held out"
    )
    return tokenizer, train_tokens, held_tokens, data


def save_checkpoint(model, tokenizer: Tokenizer, path: Path) -> None:
    """bf16 safetensors, config.json, tokenizer.json and its end-of-text token."""
    path.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(path)
    tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"eos_token": END_OF_TEXT}))


def evaluate_transformers(model, windows: torch.Tensor, setup: Setup, device: torch.device, dtype: torch.dtype):
    """The transformers model's own scores in the runtime's dtype: the cross-check of the runtime's bf16."""
    model.to(dtype)
    logits = lambda ids: model(input_ids=ids.to(device), use_cache=False).logits
    scores = score_windows(logits, windows, setup.eval_batch, setup.kl_windows)
    log(f"transformers: ppl {scores['ppl']:.4f}")
    return scores


def runtime_results(path: Path, formats: list[str], scores: dict, device, dtype, windows, prompts, setup) -> dict:
    """The checkpoint in `path` through the runtime in each weight format, beside `scores`' transformers entry,
    each compared with the runtime's bf16 (`scores` gains every format's)."""
    continuations, results = {}, {}
    for weights in formats:
        scores[weights], continuations[weights], times = evaluate_runtime(
            path, weights, device, dtype, windows, prompts, setup
        )
        results[weights] = {"ppl": scores[weights]["ppl"], "nll": scores[weights]["nll"], **times}
    results["transformers"] = {"ppl": scores["transformers"]["ppl"], "nll": scores["transformers"]["nll"]}
    compare_all(scores, continuations, results)
    return results


def compare_all(scores: dict, continuations: dict, results: dict) -> None:
    """Adds each result's change against the runtime's bf16: perplexity, top-1, KL and greedy agreement."""
    reference = scores["bf16"]
    for name, result in results.items():
        result["ppl_relative_change"] = (result["ppl"] - reference["ppl"]) / reference["ppl"]
        result.update(compare_scores(reference, scores[name]))
        if name in continuations:
            result["greedy"] = greedy_agreement(continuations["bf16"], continuations[name])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--train-seconds", type=float, default=180.0)
    parser.add_argument("--weights", default="bf16,mxfp8", help="runtime weight formats, bf16 (the reference) first")
    parser.add_argument("--out", help="JSON report")
    parser.add_argument("--tiny", action="store_true", help="a tiny model, a few files and steps: a CPU smoke run")
    parser.add_argument("--max-mb", type=float, default=96.0, help="source text to use, in MB")
    parser.add_argument("--tokenizer-mb", type=float, default=24.0, help="of which the tokenizer trains on")
    parser.add_argument("--heldout", type=float, default=0.02, help="fraction of files held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-dir", help="keep the trained checkpoint here (default: a temp folder, removed)")
    parser.add_argument(
        "--model",
        metavar="DIR",
        help="measure this checkpoint (a directory, or builtin: warpcode's own model) instead of training one",
    )
    args = parser.parse_args(argv)
    if args.weights.split(",")[0] != "bf16":
        parser.error("--weights must start with bf16, the reference")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    global _start
    _start = time.perf_counter()
    formats = args.weights.split(",")
    setup = TINY if args.tiny else Setup()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32  # training, the runtime and the evaluation
    timings: dict[str, float] = {}
    if args.model:
        return measure_checkpoint(args, setup, device, dtype, formats, timings)
    tokenizer, train_tokens, held_tokens, data = prepare_data(args, setup, timings)
    windows, prompts = heldout_eval_set(held_tokens, setup)

    model = build_model(setup, tokenizer.token_to_id(END_OF_TEXT))
    parameters = sum(p.numel() for p in model.parameters())
    budget = f"{setup.max_steps} steps" if setup.max_steps else f"{args.train_seconds:.0f} s"
    log(f"model: {parameters / 1e6:.1f}M parameters; training for {budget} on {device}")
    training = train(model, train_tokens, setup, args.train_seconds, device, dtype)
    del train_tokens
    timings["train_seconds"] = training["seconds"]
    log(f"trained {training['steps']} steps, {training['tokens']:,} tokens ({training['experts_implementation']})")

    scores = {}
    folder = contextlib.nullcontext(args.checkpoint_dir) if args.checkpoint_dir else tempfile.TemporaryDirectory()
    with folder as path:
        mark = time.perf_counter()
        save_checkpoint(model, tokenizer, Path(path))
        timings["save_seconds"] = time.perf_counter() - mark
        mark = time.perf_counter()
        scores["transformers"] = evaluate_transformers(model, windows, setup, device, dtype)
        timings["transformers_ppl_seconds"] = time.perf_counter() - mark
        model_config = model.config.to_dict()
        del model
        free_device_memory(device)
        results = runtime_results(Path(path), formats, scores, device, dtype, windows, prompts, setup)

    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__, **_library_versions()},
        "setup": asdict(setup),
        "model_config": model_config,
        "parameters": parameters,
        "data": data,
        "train": training,
        "eval": {
            "windows": len(windows),
            "window_len": setup.seq_len,
            "tokens": len(windows) * (setup.seq_len - 1),
            "prompts": len(prompts),
            "prompt_len": setup.prompt_len,
            "new_tokens": setup.new_tokens,
            "kl_windows": min(setup.kl_windows, len(windows)),
            "dtype": str(dtype),
        },
        **results_report(results, formats),
        "timings": timings,
        "total_seconds": time.perf_counter() - _start,
    }
    return finish(report, args.out)


def measure_checkpoint(args, setup: Setup, device, dtype, formats: list[str], timings: dict) -> dict:
    """The same measures on a checkpoint made elsewhere (--model), in its own tokenizer, on the held-out files.
    Which files a model made elsewhere trained on is not known here (the built-in model held out whole packages,
    not hashed files), so its perplexities may be flattered; the formats' change against bf16 is the measure."""
    from transformers import AutoModelForCausalLM

    from warpcode.model_runtime.builtin_model import model_directory

    path = model_directory(args.model)
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    mark = time.perf_counter()
    _, held_texts, data = collect_sources(int(args.max_mb * 1e6), args.heldout, args.seed, setup.max_files)
    held_tokens = encode_stream(tokenizer, held_texts)
    timings["collect_seconds"] = time.perf_counter() - mark
    data.update(tokens_heldout=len(held_tokens), vocab_size=tokenizer.get_vocab_size())
    windows, prompts = heldout_eval_set(held_tokens, setup)
    log(f"{args.model}: {len(windows)} held-out windows of {setup.seq_len} tokens, {len(prompts)} prompts")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    with torch.no_grad():
        scores = {"transformers": evaluate_transformers(model, windows, setup, device, dtype)}
    del model
    free_device_memory(device)
    results = runtime_results(path, formats, scores, device, dtype, windows, prompts, setup)
    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "model": str(args.model),
        "data": data,
        "eval": {
            "windows": len(windows),
            "window_len": setup.seq_len,
            "tokens": len(windows) * (setup.seq_len - 1),
            "prompts": len(prompts),
            "dtype": str(dtype),
        },
        **results_report(results, formats),
        "timings": timings,
    }
    return finish(report, args.out)


def results_report(results: dict, formats: list[str]) -> dict:
    """The report's results and what they say against bf16 and against transformers."""
    transformers_ppl = results["transformers"]["ppl"]
    return {
        "results": results,
        "ppl_relative_change": {name: results[name]["ppl_relative_change"] for name in formats if name != "bf16"},
        "runtime_vs_transformers_ppl_relative": (results["bf16"]["ppl"] - transformers_ppl) / transformers_ppl,
        "goal": "ppl_relative_change within +1%",
    }


def finish(report: dict, out: str | None) -> dict:
    """The table on stdout, and the report in `out` when given."""
    print_table(report)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(report, indent=2, default=str))
        log(f"wrote {out}")
    return report


def _library_versions() -> dict[str, str]:
    import tokenizers
    import transformers

    return {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    main()
