"""Model replicas on Ray, scaled: the same generation-driven batch with `--replicas 1` then `--replicas 2` (or any
list) in one call, each a `warpcode batch --ray local` process of its own. Each of `--jobs` scripted jobs over
`--repos` small git repositories made in a temporary folder runs `--turns` model requests, each first generating
`--tokens` greedy tokens on the job's replica (`"generate_tokens"`, over a prompt that grows by up to
`--prompt-tokens` a turn), then replaying its tool call (read, then edit, then the final answer). Reports, per
replica count: aggregate generated tok/s (the tokens over the span from the first request's start to the last one's
end, taken from the rows), how the sessions spread over the replicas, that every request of a session was answered
by its own replica, and the prefix-cache hits per turn (mean cached prompt tokens); then the ratio of the last count
to the first (goal: 2 replicas >= 1.8x one). Exit code 1 when a job did not succeed. A session
cannot leave its replica (its requests name it, and another replica refuses that name): the cached tokens of its
later turns show its replica's prefix cache serving it.

    python3 -m warpcode.bench.batch_replicas --model random:tiny --jobs 4 --turns 2 --tokens 8    # CPU, seconds

--workers defaults to --jobs (every session at once: one replica then batches all of them, two split them). With
--workers-per-replica K, each count runs K x R at once instead (the same batch per replica: pure data parallelism).

On one H200 (kind nvidia-h200; Ray travels as below): two bf16 qwen3-30b-a3b replicas hold 2 x 61 GB (2 x 56.8
GiB) of weights of the 140 GiB, so each replica's KV cache must be given (the default, half the free memory, would
leave the second replica too little). A session's context reaches about 16 + turns x (prompt tokens + tokens):
with `--turns 3 --tokens 128 --prompt-tokens 128` 784 tokens, 4 blocks of 256 at 96 KiB a token (24 MiB a block),
so 64 sessions on one replica need 6 GiB, 32 on each of two 3 GiB; `--kv-cache-gb 7` (6.5 GiB each) leaves
140 - 2 x 56.8 - 2 x 6.5 = 13 GiB for the CUDA contexts, graphs and activations:

    bash experiments/carry_ray.sh join && python3 -m warpcode.bench.batch_replicas --model random:qwen3-30b-a3b \
        --jobs 64 --turns 3 --tokens 128 --prompt-tokens 128 --replicas 1,2 --replica-gpus 0.5 --kv-cache-gb 7 \
        --warm-up 64,1024 --json $OUT/replicas_one_gpu.json 2>&1 | tee $OUT/replicas_one_gpu.log

(--replicas 1 with --replica-gpus 0.5 takes half the GPU too; the ratio there says what a second replica on the
same GPU adds, not the scaling.) With `--model random:olmoe-1b-7b` (2 x 14 GB) the defaults fit.

On nvidia-h200-x2 (Ray is not installed there and its cp312 wheel, 79 MB, is over one call's 64 MiB: it travels
in two halves, see experiments/carry_ray.sh): first, here, `bash experiments/carry_ray.sh prepare`; then call 1
(carry [".carry-a"], command `bash experiments/carry_ray.sh stage`), then at once, while the machine is warm (30 s),
call 2 (carry [".carry-b"], timeout_s 600):

    bash experiments/carry_ray.sh join && export NCCL_NVLS_ENABLE=0 && python3 -m warpcode.bench.batch_replicas \
        --model random:qwen3-30b-a3b --jobs 64 --repos 8 --turns 4 --tokens 256 --replicas 1,2 --warm-up 64,4096 \
        --json $OUT/replicas.json 2>&1 | tee $OUT/replicas.log
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPLICA_MARK = "-> replica "


def make_repositories(folder: Path, count: int) -> list[Path]:
    repos = []
    for number in range(count):
        repo = folder / f"service-{number}"
        repo.mkdir()
        (repo / "app.py").write_text(f'"""Service {number}."""\n\nVALUE = 1\n')
        for command in (["init", "-q"], ["add", "-A"],
                        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base"]):  # fmt: skip
            subprocess.run(["git", *command], cwd=repo, check=True)
        repos.append(repo)
    return repos


def script_turns(turns: int, tokens: int, prompt_tokens: int) -> list[dict]:
    """`turns` model requests, each generating first: reads of app.py, its edit, then the answer that ends the turn."""
    edit = {"name": "edit_file", "arguments": {"path": "app.py", "old_text": "VALUE = 1", "new_text": "VALUE = 2"}}
    read = {"name": "read_file", "arguments": {"path": "app.py"}}
    calls = [[read]] * max(turns - 2, 0) + [[edit]] * (turns >= 2)
    generate = {"generate_tokens": tokens, "prompt_tokens": prompt_tokens}
    return [*({**generate, "tool_calls": c} for c in calls), {**generate, "text": "done"}]


def run(folder: Path, jobs: Path, args: argparse.Namespace, replicas: int) -> dict:
    out = folder / f"replicas-{replicas}" / "RESULTS.jsonl"
    workers = args.workers_per_replica * replicas if args.workers_per_replica else args.workers or args.jobs
    command = [sys.executable, "-m", "warpcode.agent", "batch", str(jobs), "--out", str(out), "--model", args.model,
               "--ray", "local", "--replicas", str(replicas), "--replica-gpus", f"{args.replica_gpus:g}",
               "--workers", str(workers), "--replica-warm-up", args.warm_up]  # fmt: skip
    if args.kv_cache_gb:
        command += ["--replica-kv-cache-gb", f"{args.kv_cache_gb:g}"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"warpcode batch --replicas {replicas} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    result = measure(rows)
    result.update(replicas=replicas, workers=workers, wall_s=round(wall, 1))
    result["summary"] = [line for line in done.stderr.splitlines() if line.startswith("replica ")]
    return result


def measure(rows: list[dict]) -> dict:
    """What the rows say: generated tokens and their span, sessions per replica, cache hits per turn."""
    requests = [request for row in rows for request in row["usage"].get("generation", [])]
    generated = sum(request["generated_tokens"] for request in requests)
    span = max(r["ended"] for r in requests) - min(r["started"] for r in requests) if requests else 0.0
    sessions: Counter = Counter()
    turns: list[list[tuple[int, int]]] = []
    for row in rows:
        replica = row["worker"].rsplit(REPLICA_MARK, 1)[1] if REPLICA_MARK in row["worker"] else None
        sessions[replica] += 1
        for turn, request in enumerate(row["usage"].get("generation", [])):
            turns.extend([] for _ in range(turn + 1 - len(turns)))
            turns[turn].append((request["prompt_tokens"], request["cached_tokens"]))
    return {
        "statuses": dict(Counter(row["status"] for row in rows)),
        "generated_tokens": generated,
        "generation_span_s": round(span, 3),
        "tokens_per_s": round(generated / span, 1) if span else 0.0,
        "sessions_per_replica": {str(k): v for k, v in sorted(sessions.items(), key=str)},
        "per_turn_mean_prompt_cached": [
            [round(sum(p for p, _ in t) / len(t)), round(sum(c for _, c in t) / len(t))] for t in turns
        ],
    }


def report(result: dict) -> str:
    turns = ", ".join(f"{cached}/{prompt}" for prompt, cached in result["per_turn_mean_prompt_cached"])
    return (f"--replicas {result['replicas']} ({result['workers']} workers): {result['tokens_per_s']:.1f} generated "
            f"tok/s ({result['generated_tokens']} tokens in {result['generation_span_s']:.1f} s; "
            f"{result['wall_s']:.1f} s wall with Ray and the replicas' start); rows {result['statuses']}; "
            f"sessions per replica {result['sessions_per_replica']}; cached/prompt tokens per turn (mean) "
            f"{turns}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="random:qwen3-30b-a3b", help="the replicas' model: random:PRESET, local:DIR")
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--repos", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4, help="model requests per job, each generating first")
    parser.add_argument("--tokens", type=int, default=256, help="greedy tokens generated per turn")
    parser.add_argument("--prompt-tokens", type=int, default=256, help="new prompt tokens per turn, at most")
    parser.add_argument("--replicas", default="1,2", help="replica counts, run one after the other")
    parser.add_argument("--replica-gpus", type=float, default=1.0, help="GPUs per replica (0.5: two share one)")
    parser.add_argument("--workers", type=int, help="jobs at once (default: --jobs)")
    parser.add_argument("--workers-per-replica", type=int, help="instead: this many jobs at once per replica")
    parser.add_argument("--kv-cache-gb", type=float, help="each replica's KV cache (default: the engine's)")
    parser.add_argument("--warm-up", default="8,4096", help="decode graphs each replica captures: STREAMS,TOKENS")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    counts = [int(count) for count in args.replicas.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        repos = make_repositories(folder, args.repos)
        script = folder / "generate.json"
        script.write_text(json.dumps({"turns": script_turns(args.turns, args.tokens, args.prompt_tokens)}))
        jobs = folder / "jobs.jsonl"
        rows = [{"id": f"job-{n}", "repo": str(repos[n % len(repos)]), "instruction": "bump VALUE",
                 "model": f"scripted:{script}"} for n in range(args.jobs)]  # fmt: skip
        jobs.write_text("".join(json.dumps(row) + "\n" for row in rows))
        results = []
        for count in counts:
            results.append(run(folder, jobs, args, count))
            print(report(results[-1]), flush=True)
            for line in results[-1]["summary"]:
                print(f"    {line}", flush=True)
    ratio = results[-1]["tokens_per_s"] / results[0]["tokens_per_s"] if results[0]["tokens_per_s"] else 0.0
    if len(results) > 1:
        goal = "met" if counts[-1] == 2 * counts[0] and ratio >= 1.8 else "not met"
        print(f"--replicas {counts[-1]} / --replicas {counts[0]}: {ratio:.2f}x generated tok/s (goal >= 1.8x for "
              f"twice the replicas: {goal})", flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"arguments": vars(args) | {"json": str(args.json)}, "runs": results,
                                         "ratio": round(ratio, 3)}, indent=1))  # fmt: skip
    bad = [r for r in results if set(r["statuses"]) != {"succeeded"}]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
