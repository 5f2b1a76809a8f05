"""Batch-1 decode step time (CUDA-graph replay) under variants of the device's tuned-config file: warp-decode, GEMV,
attention and the small kernels' launch parameters, and where the attention merge runs. Each variant is a config
folder (experiments/config_variant.py's changes, written here into a temporary folder) measured in a process of its
own under WARPCODE_TUNED_CONFIG_FOLDER, the shipped file first and last; nothing in the runtime is patched.

    python experiments/sweep_decode_variants.py [--contexts 512,8192] [--steps 64] [--no-merge-variants]
        [--variant "CHANGE[; CHANGE ...]"] ...   (CHANGE as config_variant.py reads it)
        [--folder FOLDER] ...                    (a variant folder written beforehand)

    --variant "warp_decode/2048,768,128,8/1: gate_up_cols=1024"
    --variant "gemv/5120,2048/1: block_n=8, block_k=1024, num_warps=4"
    --variant "decode_attention: block_n=32, num_warps=4; route: prefetch_rows=32"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from config_variant import apply_change, parse_change

from warpcode.bench.config_file import write_config_file
from warpcode.kernels.tuning import CONFIG_FOLDER, FOLDER_VARIABLE, device_file_name

MERGE_VARIANTS = {
    "attention merge always in the split kernel": "decode_attention: merge_kernel_min_splits=1000000000",
    "always a merge kernel": "decode_attention: merge_kernel_min_splits=2",
}


def write_variant(changes: str, folder: Path, device: str) -> Path:
    """The shipped file of `device` with the ';'-separated changes, written into `folder`."""
    name = device_file_name(device)
    data = json.loads((CONFIG_FOLDER / name).read_text())
    for change in filter(None, (part.strip() for part in changes.split(";"))):
        apply_change(data, *parse_change(change))
    write_config_file(folder / name, data)
    return folder


def variants(args, scratch: Path, device: str) -> list[tuple[str, Path | None]]:
    """(label, config folder or None for the shipped file) for every variant the flags ask for, the shipped file
    first and last."""
    found: list[tuple[str, Path | None]] = [("baseline", None)]
    found += [(f"folder {folder}", folder) for folder in args.folder]
    labelled = [(change, change) for change in args.variant]
    labelled += [] if args.no_merge_variants else list(MERGE_VARIANTS.items())
    for index, (label, changes) in enumerate(labelled):
        found.append((label, write_variant(changes, scratch / str(index), device)))
    return [*found, ("baseline again", None)]


def measure(contexts: list[int], steps: int) -> None:
    """In the variant's process: seconds per step at each context, as JSON lines."""
    from warpcode.bench.decode import WARMUP_STEPS, decode_seconds
    from warpcode.model_runtime import load_random

    runner = load_random("qwen3-30b-a3b", device="cuda").runner
    # Contexts in ascending order, each with the cache capacity `warpcode bench decode` gives it (the split count
    # follows the capacity).
    for context in sorted(contexts):
        runner.reserve(1, context + WARMUP_STEPS + steps + 2)
        runner.drop_graphs()
        print(json.dumps({"context": context, "seconds": decode_seconds(runner, 1, context, steps)}), flush=True)


def run_variant(label: str, folder: Path | None, args) -> None:
    env = {name: value for name, value in os.environ.items() if name != FOLDER_VARIABLE}
    if folder is not None:
        env[FOLDER_VARIABLE] = str(folder)
    command = [sys.executable, __file__, "--measure", "--contexts", args.contexts, "--steps", str(args.steps)]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    for line in lines:
        seconds = line["seconds"]
        print(f"{line['context']:6d} keys  {label:50s} {seconds * 1e3:.3f} ms {1 / seconds:.0f} tok/s", flush=True)
    if result.returncode:  # e.g. a launch setting too large for the device
        error = (result.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"{'':6s}       {label:50s} failed: {error}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contexts", default="512,8192")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--no-merge-variants", action="store_true")
    parser.add_argument("--variant", action="append", default=[], help="';'-separated config_variant.py changes")
    parser.add_argument("--folder", action="append", default=[], type=Path, help="a variant folder")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # a variant's own process
    args = parser.parse_args()
    if args.measure:
        measure([int(c) for c in args.contexts.split(",")], args.steps)
        return
    import torch

    with tempfile.TemporaryDirectory() as scratch:
        try:
            found = variants(args, Path(scratch), torch.cuda.get_device_name())
        except ValueError as error:
            parser.error(str(error))
        for label, folder in found:
            run_variant(label, folder, args)


if __name__ == "__main__":
    main()
