"""Synthetic agent trajectories: each task solved by the real agent loop, the oracle in the model's place.

For each task the repository is written to a fresh folder, a headless agent is made there exactly as `warpcode run`
and `warpcode batch` make theirs (mode auto), the oracle (oracle.py) takes the model's place, and the agent runs
the instruction: the tools really run, so every tool result in the trajectory is real. The training conversation is
what the oracle received on its last request (the system prompt, the instruction, every call and result, and the
tools, exactly as the loop passed them) plus the final answer. The task's checker then confirms the outcome; a
trajectory whose task was not done is dropped and counted.

One JSON line per trajectory: {"family", "split", "seed", "layout", "edit_tool", "tools", "messages", "unlearned"},
the messages as dicts (role, content, tool_calls [{id, name, arguments}], tool_call_id, name, reasoning), and
"unlearned" the indices of the assistant turns that are the oracle's deliberate slips (oracle.py), which
fine-tuning does not learn. `load_row` turns a row back into (messages, tools, unlearned) for conversation_example,
which renders it as the agent's local backend does.

    python -m warpcode.training.trajectories --count 2000 --split train --seed 0 --out train.jsonl --workers 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warpcode.agent.config import Settings
from warpcode.agent.headless import headless_agent, nobody_to_ask
from warpcode.model_runtime.chat.messages import Message
from warpcode.training.oracle import SLIP_SHARE, OracleBackend
from warpcode.training.tasks import FAMILIES, SPLITS, Task, family_of, make_task
from warpcode.training.tasks.check import check, write_repo

FAMILY_ORDER = tuple(FAMILIES)
MOST_DROPPED = 20  # more dropped tasks than this and than were asked for: generate stops with the last reason


@dataclass
class Outcome:
    seed: int
    family: str
    row: dict[str, Any] | None  # None: dropped
    reason: str = ""  # why it was dropped


async def solve(task: Task, workdir: Path, slip_share: float = SLIP_SHARE) -> Outcome:
    """Run the agent with the oracle on a fresh copy of `task`'s repository under `workdir`; the trajectory row, or
    why there is none."""
    root = workdir / f"{uuid.uuid4().hex[:8]}" / "ws"
    root.mkdir(parents=True)
    write_repo(task.files, root)
    oracle = OracleBackend(task, random.Random(f"oracle:{task.family}:{task.split}:{task.seed}"), slip_share)
    agent = headless_agent(str(root), Settings(mode="auto"), "auto", lambda update: None,
                           nobody_to_ask([], yes=True), state_dir=workdir / "state")  # fmt: skip
    agent.backend = oracle
    result = await agent.prompt(task.instruction)
    if result.stop_reason != "end_turn" or result.failure:
        why = result.failure.message if result.failure else f"the turn ended with {result.stop_reason}"
        return Outcome(task.seed, task.family, None, why)
    verdict = await asyncio.to_thread(check, task, root)
    if not verdict.ok:
        return Outcome(task.seed, task.family, None, verdict.reason)
    answer = agent.messages[-1]
    row = {
        "family": task.family,
        "split": task.split,
        "seed": task.seed,
        "layout": task.layout,
        "edit_tool": "apply_patch" if oracle.patch else "edit_file",
        "tools": oracle.tools,
        "messages": [message_row(m) for m in [*oracle.received, answer]],
        "unlearned": oracle.unlearned,
    }
    return Outcome(task.seed, task.family, row)


def message_row(message: Message) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "reasoning": message.reasoning,
    }


def text_chars(row: dict[str, Any]) -> int:
    """The characters of a row's text: messages, call arguments and tool schemas as JSON. Close to the rendered
    prompt's length: a chat template adds its markup and writes the schemas and calls in its own way."""
    calls = sum(len(c["name"]) + len(json.dumps(c["arguments"])) for m in row["messages"] for c in m["tool_calls"])
    return calls + sum(len(m["content"]) for m in row["messages"]) + len(json.dumps(row["tools"]))


# --- many at once ---


def _solve_seed(job: tuple[str, int, str, float]) -> Outcome:
    """One task in a worker process, in a folder of its own that is removed afterwards."""
    split, seed, base, slip_share = job
    workdir = Path(tempfile.mkdtemp(prefix="trajectory-", dir=base))
    try:
        task = make_task(family_of(seed), split, seed)
        return asyncio.run(solve(task, workdir, slip_share))
    except Exception as exc:  # a generator bug drops the task and is reported, the rest goes on
        return Outcome(seed, family_of(seed), None, f"{type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def generate(
    split: str, count: int, seed: int, workers: int, base: str, slip_share: float = SLIP_SHARE
) -> Iterator[Outcome]:
    """Outcomes until `count` rows were made, the families balanced: seeds from `seed` on, each seed's family fixed
    (family_of); a dropped task's family gets the next seed of its own. Raises RuntimeError when more tasks were
    dropped than MOST_DROPPED and `count`: then the generator itself is broken, and trying more seeds never ends."""
    wanted = {f: count // len(FAMILY_ORDER) + (i < count % len(FAMILY_ORDER)) for i, f in enumerate(FAMILY_ORDER)}
    next_seed = {f: seed + (i - seed) % len(FAMILY_ORDER) for i, f in enumerate(FAMILY_ORDER)}
    dropped = 0
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        while any(wanted.values()):
            jobs = []
            for family, left in wanted.items():
                for _ in range(left):
                    jobs.append((split, next_seed[family], base, slip_share))
                    next_seed[family] += len(FAMILY_ORDER)
            jobs.sort(key=lambda job: job[1])
            for outcome in pool.imap(_solve_seed, jobs):
                if outcome.row is not None:
                    wanted[outcome.family] -= 1
                else:
                    dropped += 1
                    if dropped > max(MOST_DROPPED, count):  # the generator is broken, not a task unlucky
                        raise RuntimeError(f"{dropped} tasks were dropped (the last: {outcome.reason}); "
                                           "fix the generator before making more")  # fmt: skip
                yield outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m warpcode.training.trajectories",
        description="Generate synthetic agent trajectories (one JSON line each): the oracle solves made-up tasks "
        "through the real agent loop and tools.",
    )
    parser.add_argument("--count", type=int, required=True, help="trajectories to write (families balanced)")
    parser.add_argument("--split", choices=SPLITS, required=True, help="which names, values and layouts to use")
    parser.add_argument("--seed", type=int, default=0, help="the first task seed (default 0)")
    parser.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    parser.add_argument("--workers", type=int, default=1, help="tasks solved at once, one process each")
    parser.add_argument("--slips", type=float, default=SLIP_SHARE, help="the share of trajectories with one "
                        f"deliberate slip and its recovery (default {SLIP_SHARE}; oracle.py)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.count < 1 or args.workers < 1:
        parser.error("--count and --workers must be at least 1")
    if not 0 <= args.slips <= 1:
        parser.error("--slips is a share between 0 and 1")
    # The repositories' tests need no pytest plugin, and loading the machine's costs about a second per run.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    started = time.monotonic()
    made, dropped, chars = Counter(), Counter(), []
    with tempfile.TemporaryDirectory(prefix="warpcode-trajectories-") as base, open(args.out, "w") as out:
        try:
            for outcome in generate(args.split, args.count, args.seed, args.workers, base, args.slips):
                if outcome.row is None:
                    dropped[outcome.family] += 1
                    print(f"dropped {outcome.family} seed {outcome.seed}: {outcome.reason}", file=sys.stderr)
                    continue
                out.write(json.dumps(outcome.row) + "\n")
                made[outcome.family] += 1
                chars.append(text_chars(outcome.row))
                total = sum(made.values())
                if total % 25 == 0 or total == args.count:
                    rate = total / (time.monotonic() - started)
                    print(f"{total}/{args.count} trajectories, {rate:.2f}/s, {sum(dropped.values())} dropped",
                          file=sys.stderr, flush=True)  # fmt: skip
        except RuntimeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    elapsed = time.monotonic() - started
    print(f"wrote {sum(made.values())} trajectories to {args.out} in {elapsed:.0f} s "
          f"({sum(made.values()) / elapsed:.2f}/s with {args.workers} workers)")  # fmt: skip
    for family in FAMILY_ORDER:
        print(f"  {family}: {made[family]} written, {dropped[family]} dropped")
    print(f"  text characters per trajectory: mean {sum(chars) / len(chars):.0f}, max {max(chars)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
