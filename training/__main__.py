"""python -m warpcode.training COMMAND: the steps that make the built-in model, each into one working folder.

    prepare   --site-packages DIR... --out WORK [--smoke] [--tokenizer FILE]   corpus, tokenizer, token streams
    render    --out WORK --trajectories FILE.jsonl[.gz]...     conversations as examples (conversations.py)
    pretrain  --out WORK --minutes M (--steps N | --budget-minutes B)   (train.py; resume: --minutes only)
    finetune  --out WORK --minutes M (--steps N | --budget-minutes B)
    export    --out WORK --model-dir DIR [--phase P]           the Hugging Face checkpoint (checkpoint.py)
    evaluate  --model-dir DIR --tokens WORK/heldout.tokens      held-out perplexity through the runtime

Each command imports what it needs when it runs: preparing the corpus needs no torch, and reading trajectories
needs the trajectory generator's module only there.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m warpcode.training", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    prepare = commands.add_parser("prepare", help="find the code, train the tokenizer, write the token streams")
    prepare.add_argument("--site-packages", type=Path, nargs="+", required=True, help="folders of installed packages")
    prepare.add_argument("--out", type=Path, required=True, help="the working folder")
    prepare.add_argument("--smoke", action="store_true", help="the toy model and vocabulary (tests, CPU, seconds)")
    prepare.add_argument(
        "--tokenizer", type=Path, help="an earlier prepare's tokenizer.json, used instead of training one"
    )

    render = commands.add_parser("render", help="render agent trajectories (JSONL) as fine-tuning examples")
    render.add_argument("--out", type=Path, required=True, help="the working folder (prepared)")
    render.add_argument("--trajectories", type=Path, nargs="+", required=True,
                        help="JSONL files of trajectories (or .jsonl.gz)")  # fmt: skip
    render.add_argument("--workers", type=int, default=1, help="processes rendering at once")

    for name in ("pretrain", "finetune"):
        phase = commands.add_parser(name, help=f"run (or resume) the {name} phase")
        phase.add_argument("--out", type=Path, required=True, help="the working folder")
        phase.add_argument("--minutes", type=float, required=True, help="this command's training time, at most")
        length = phase.add_mutually_exclusive_group()
        length.add_argument("--steps", type=int, help="the phase's length in optimizer steps (first command only)")
        length.add_argument(
            "--budget-minutes", type=float, help="the phase's length in training minutes (first command only)"
        )
        phase.add_argument("--seed", type=int, default=0, help="initialisation and data order (first command only)")

    export = commands.add_parser("export", help="write the trained model as a Hugging Face checkpoint directory")
    export.add_argument("--out", type=Path, required=True, help="the working folder")
    export.add_argument("--model-dir", type=Path, required=True, help="the checkpoint directory to write")
    export.add_argument("--phase", choices=("pretrain", "finetune"), default="finetune", help="whose weights")

    evaluate = commands.add_parser("evaluate", help="held-out perplexity of a checkpoint through the runtime")
    evaluate.add_argument("--model-dir", type=Path, required=True)
    evaluate.add_argument("--tokens", type=Path, required=True, help="a token stream from prepare (heldout.tokens)")
    evaluate.add_argument("--weights", nargs="+", default=["bf16", "mxfp8"], help="weight formats to compare")
    evaluate.add_argument("--device", default="cpu")
    evaluate.add_argument("--windows", type=int, default=64, help="windows of --length tokens scored")
    evaluate.add_argument("--length", type=int, default=2048)

    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _prepare(args) -> int:
    from warpcode.training.prepare import prepare

    prepare(args.site_packages, args.out, "smoke" if args.smoke else "builtin", args.tokenizer)
    return 0


def _text(path: Path) -> str:
    """A file's text; a .gz file's uncompressed (trajectories travel compressed: they shrink about 17 times)."""
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def _render(args) -> int:
    from warpcode.training.conversations import load_row, render_examples, write_examples
    from warpcode.training.train import Workspace

    workspace = Workspace(args.out)
    longest = workspace.phase("finetune").sequence_length + 1
    rows = [json.loads(line) for path in args.trajectories for line in _text(path).splitlines() if line]
    folder = args.out / "conversations"
    folder.mkdir(exist_ok=True)
    for split in sorted({row["split"] for row in rows}):
        conversations = [load_row(row) for row in rows if row["split"] == split]
        examples = render_examples(args.out / "tokenizer.json", conversations, args.workers)
        kept = [example for example in examples if len(example.ids) <= longest]
        write_examples(kept, folder / split)
        print(json.dumps({"split": split, "conversations": len(conversations), "kept": len(kept),
                          "longer_than_context": len(conversations) - len(kept),
                          "tokens": sum(len(e.ids) for e in kept),
                          "learned_tokens": int(sum(e.targets.sum() for e in kept))}))  # fmt: skip
    return 0


def _phase(args) -> int:
    from warpcode.training.train import Workspace, run_phase

    run_phase(Workspace(args.out), args.command, args.minutes, args.steps, args.budget_minutes, args.seed)
    return 0


def _export(args) -> int:
    from tokenizers import Tokenizer

    from warpcode.training.checkpoint import write_checkpoint
    from warpcode.training.train import Workspace, final_weights

    workspace = Workspace(args.out)
    tokenizer = Tokenizer.from_file(str(args.out / "tokenizer.json"))
    write_checkpoint(final_weights(workspace, args.phase), workspace.config, tokenizer, args.model_dir)
    size = sum(f.stat().st_size for f in args.model_dir.iterdir())
    print(json.dumps({"model_dir": str(args.model_dir), "phase": args.phase, "bytes": size}))
    return 0


def _evaluate(args) -> int:
    from warpcode.training.evaluate import checkpoint_perplexity

    for weights in args.weights:
        result = checkpoint_perplexity(args.model_dir, args.tokens, weights, args.device, args.windows, args.length)
        print(json.dumps(result), flush=True)
    return 0


COMMANDS = {"prepare": _prepare, "render": _render, "pretrain": _phase, "finetune": _phase, "export": _export,
            "evaluate": _evaluate}  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
