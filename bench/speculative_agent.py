"""Speculative decoding on an agent's own turns: each batch job run through `warpcode batch` with speculation off,
then on, job after job (so that the machine's load falls on both alike; one job at a time: the engine speculates
only while one request runs, batch 1, an agent's turn), and each model request's decode speed read from the rows'
`usage.generation` (tokens after the first / time from the first token to the last: prefill is the same either way
and is left out).

Requests are grouped by what the answer did: `edit` (it called edit_file, write_file or apply_patch: text copied
from the files read and the conversation), `other calls` (read, search, tests), `text` (no call: the turn's last
answer). Greedy decoding is lossless under speculation (tests/model_runtime/test_speculative_*.py hold it to plain
decoding token for token), but two runs of a job need not make the same requests: tool results hold text of their
own run (the job's folder name, temporary paths, test durations), so conversations may part after a few requests.
The table says how many requests of each run answered as the other run's did, request by request, until they part.

    python -m warpcode.training.tasks.jobs write --split heldout --count 20 --jobs J/JOBS.jsonl \\
        --expected J/EXPECTED.jsonl --repos J/repos
    python -m warpcode.bench.speculative_agent J/JOBS.jsonl                          # the built-in model, CPU
    python -m warpcode.bench.speculative_agent J/JOBS.jsonl --model local:DIR --on ngram --out speculative.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from warpcode.model_runtime.serving.request import tokens_per_verify_step

EDIT_TOOLS = frozenset({"edit_file", "write_file", "apply_patch"})
KINDS = ("edit", "other calls", "text")


def kind_of(request: dict[str, Any]) -> str:
    calls = request.get("tool_calls") or []
    return "edit" if EDIT_TOOLS.intersection(calls) else "other calls" if calls else "text"


def run_job(row: str, jobs: Path, work: Path, model: str, mode: str) -> dict[str, Any]:
    """The result row of `warpcode batch` on the one job `row` (a line of the job file `jobs`) with
    `model#speculative=mode`."""
    job = json.loads(row)
    job["repo"] = str((jobs.parent / job["repo"]).resolve())  # the one-job file lives in `work`
    single = work / f"{mode}-job.jsonl"
    single.write_text(json.dumps(job) + "\n")
    out = work / f"{mode}-{len(list(work.glob(f'{mode}-*.results.jsonl'))):04d}.results.jsonl"  # new each time
    spec = f"{model}{',' if '#' in model else '#'}speculative={mode}"
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(single), "--out", str(out), "--model", spec,
               "--workers", "1"]  # fmt: skip
    # the jobs' own test commands (pytest) must not load this environment's pytest plugins
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    (result,) = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return result


def same_requests(one: dict[str, Any], other: dict[str, Any]) -> tuple[int, int]:
    """(requests answered alike, requests) of two runs of a job, compared in order until the first that differs in
    its prompt's length, its answer's length or the calls it made."""
    first, second = (row["usage"].get("generation") or [] for row in (one, other))
    alike = 0
    for a, b in zip(first, second, strict=False):
        if (a["prompt_tokens"], a["generated_tokens"], a["tool_calls"]) != (
            b["prompt_tokens"], b["generated_tokens"], b["tool_calls"]
        ):  # fmt: skip
            break
        alike += 1
    return alike, min(len(first), len(second))


def summarize(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per kind of request: requests, decoded tokens (after the first), decode seconds, tok/s, verify steps,
    drafted and accepted tokens, tokens per verify step."""
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows.values():
        for request in row["usage"].get("generation") or []:
            if request.get("first_token") is None or request.get("ended") is None:
                continue
            total = sums[kind_of(request)]
            total["requests"] += 1
            total["tokens"] += request["generated_tokens"] - 1
            total["seconds"] += request["ended"] - request["first_token"]
            for name, value in (request.get("speculative") or {}).items():
                total[name] += value
    table = {}
    for kind in (*KINDS, "all"):
        parts = [sums[k] for k in KINDS] if kind == "all" else [sums[kind]]
        total = {name: sum(part.get(name, 0.0) for part in parts) for name in
                 ("requests", "tokens", "seconds", "verify_steps", "draft_tokens", "accepted_tokens")}  # fmt: skip
        total["tok/s"] = total["tokens"] / total["seconds"] if total["seconds"] else 0.0
        total["tokens_per_verify_step"] = tokens_per_verify_step(int(total["accepted_tokens"]),
                                                                 int(total["verify_steps"]))  # fmt: skip
        table[kind] = total
    return table


def turn_seconds(row: dict[str, Any]) -> float:
    """The agent's turn: from its first model request's start to its last one's end (its tool calls between; not
    the batch's copy of the repository, the model's loading or the job's test command)."""
    requests = row["usage"].get("generation") or []
    return requests[-1]["ended"] - requests[0]["started"] if requests else 0.0


def turn_times(rows: dict[str, dict[str, Any]]) -> dict[str, list[float]]:
    """Turn seconds, sorted, of the jobs that succeeded and of the others."""
    times: dict[str, list[float]] = {"succeeded": [], "failed": []}
    for row in rows.values():
        times["succeeded" if row["status"] == "succeeded" else "failed"].append(round(turn_seconds(row), 2))
    return {outcome: sorted(values) for outcome, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m warpcode.bench.speculative_agent",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("jobs", type=Path, help="a batch job file (e.g. held-out tasks: training.tasks.jobs write)")
    parser.add_argument("--model", default="builtin", help="builtin (default) or local:DIR[#OPTIONS]")
    parser.add_argument("--on", default="suffix", choices=("suffix", "ngram"), help="the speculative mode to time")
    parser.add_argument("--work", type=Path, help="where the batch results go (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the tables as JSON here")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="warpcode-speculative-agent-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = [line for line in args.jobs.read_text().splitlines() if line.strip()]
    results: dict[str, dict[str, dict[str, Any]]] = {"off": {}, args.on: {}}
    for number, row in enumerate(rows, 1):
        for mode in results:
            result = run_job(row, args.jobs, work, args.model, mode)
            results[mode][result["id"]] = result
        print(f"[{number}/{len(rows)}] {result['id']}: {result['status']}", file=sys.stderr, flush=True)
    off, on = results["off"], results[args.on]
    alike = [same_requests(off[i], on[i]) for i in off]
    tables = {mode: summarize(rows) for mode, rows in results.items()}
    print(f"{'requests':<12}{'n':>5}{'tokens':>8}{'off tok/s':>11}{args.on + ' tok/s':>13}{'speed-up':>10}"
          f"{'tok/verify':>12}{'accepted/drafted':>18}")  # fmt: skip
    for kind in (*KINDS, "all"):
        plain, fast = tables["off"][kind], tables[args.on][kind]
        ratio = fast["tok/s"] / plain["tok/s"] if plain["tok/s"] else 0.0
        drafted = f"{int(fast['accepted_tokens'])}/{int(fast['draft_tokens'])}"
        print(f"{kind:<12}{int(fast['requests']):>5}{int(fast['tokens']):>8}{plain['tok/s']:>11.1f}"
              f"{fast['tok/s']:>13.1f}{ratio:>9.2f}x{fast['tokens_per_verify_step']:>12.2f}{drafted:>18}")  # fmt: skip
    turns = {mode: turn_times(rows) for mode, rows in results.items()}
    for mode, times in turns.items():
        described = [f"{outcome} {len(values)}: median {values[len(values) // 2]:.1f} s, max {values[-1]:.1f} s"
                     for outcome, values in times.items() if values]  # fmt: skip
        print(f"agent turns with speculation {mode}: {'; '.join(described)}")
    succeeded = {mode: sum(row["status"] == "succeeded" for row in rows.values()) for mode, rows in results.items()}
    print(
        f"jobs: {len(off)}, succeeded off {succeeded['off']} / {args.on} {succeeded[args.on]}; requests answered "
        f"alike until the runs' conversations part: {sum(a for a, _ in alike)} of {sum(n for _, n in alike)}"
    )
    if args.out:
        document = {"model": args.model, "on": args.on, "succeeded": succeeded, "tables": tables, "turns": turns,
                    "alike": [sum(a for a, _ in alike), sum(n for _, n in alike)]}  # fmt: skip
        args.out.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
