"""`warpcode batch JOBS.jsonl --out RESULTS.jsonl`: headless agent jobs over many repositories,
`--workers` at once in this process or on Ray actors (`--ray`). Each job works in a throwaway copy of its
repository; RESULTS.jsonl gets one row per job as it finishes, and a re-run with the same --out resumes where the
last one stopped."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from warpcode.agent.batch.local_ray import INSTALL_RAY
from warpcode.agent.extras import MissingExtra, missing, require_runtime


def register(commands: argparse._SubParsersAction) -> None:
    batch = commands.add_parser(
        "batch",
        help="run headless agent jobs over many repositories (JOBS.jsonl -> RESULTS.jsonl)",
        description="Run each job of JOBS.jsonl (one JSON object a line: id, repo, instruction, and optionally "
        "base, model, mode, test_command, timeout_s, max_turn_requests) as a headless agent turn in a throwaway "
        "copy of its repository, then its test_command, and append its result row (status, patch, tests, usage, "
        "...) to --out as it finishes. Re-running with the same --out skips the jobs already recorded. The source "
        "repositories are never modified. Exit code 0 when every job has a row and none is `error` (a job that could "
        "not run: bad row, missing repository, model or infrastructure failure), 1 otherwise (--allow-errors: 0 "
        "whatever the rows' statuses), 130 when interrupted; `failed` and `timeout` rows do not change it. Progress "
        "and the summary go to stderr; --json writes one event object a line to stdout.",
    )
    batch.add_argument("jobs", type=Path, metavar="JOBS.jsonl", help="the jobs, one JSON object a line")
    batch.add_argument("--out", type=Path, required=True, metavar="RESULTS.jsonl", help="where the rows go")
    batch.add_argument("--workers", type=int, default=1, metavar="N", help="jobs at once (default 1)")
    batch.add_argument(
        "--ray",
        metavar="local|auto|ADDRESS",
        help="run the jobs on Ray actors: local (a fresh local instance, on loopback only and with a token of its "
        "own), auto (the running cluster) or an address (needs pip install 'warpcode[distributed]', Ray 2.52 or "
        "later)",
    )
    batch.add_argument(
        "--replicas",
        type=int,
        default=0,
        metavar="R",
        help="with --ray and a local:DIR or random:PRESET model, serve it from R replica actors of one GPU each, "
        "shared by all workers (random weights have no tokenizer: for jobs with a scripted model whose turns "
        "generate_tokens)",
    )
    batch.add_argument(
        "--replica-gpus",
        type=float,
        default=1.0,
        metavar="G",
        help="GPUs per replica (default 1; 0.5 puts two replicas on each GPU)",
    )
    batch.add_argument(
        "--replica-kv-cache-gb",
        type=float,
        metavar="G",
        help="each replica's KV cache in GB (default: half the GPU memory free when it starts; give it when "
        "replicas share a GPU)",
    )
    batch.add_argument(
        "--replica-warm-up",
        type=_warm_up_sizes,
        default=(8, 4096),
        metavar="STREAMS,TOKENS",
        help="decode graphs each GPU replica captures before serving, as serve-model's --warm-up (default: 8,4096)",
    )
    batch.add_argument(
        "--worker-cpus", type=float, default=1.0, metavar="C", help="CPUs Ray reserves per job worker (default 1)"
    )
    batch.add_argument("--model", help="the jobs' model spec unless a job names one (default: WARPCODE_MODEL, config)")
    batch.add_argument(
        "--mode", choices=("auto", "accept-edits"), default="auto", help="permission mode unless a job names one"
    )
    batch.add_argument("--timeout-s", type=float, metavar="S", help="each job's time limit unless it names one")
    batch.add_argument(
        "--max-attempts",
        type=int,
        default=3,
        metavar="N",
        help="tries of a job whose copy or model could not be set up or whose worker died (default 3)",
    )
    batch.add_argument("--json", action="store_true", help="event lines on stdout (started, retry, finished, summary)")
    batch.add_argument("--redo", action="store_true", help="run every job again, even those already recorded")
    batch.add_argument("--retry-errors", action="store_true", help="run the jobs recorded as error again")
    batch.add_argument(
        "--allow-errors",
        action="store_true",
        help="exit 0 even when some rows are `error` (by default the exit code is then 1)",
    )
    batch.add_argument("--fail-fast", action="store_true", help="stop at the first job that does not succeed")
    batch.add_argument(
        "--keep-workdirs", action="store_true", help="keep each job's copy (removed by the next run with this --out)"
    )
    batch.set_defaults(handler=run_batch_command)
    add_apply_command(batch)


def run_batch_command(args: argparse.Namespace) -> int:
    from warpcode.agent.backends import spec_relative_to
    from warpcode.agent.batch.config import BatchConfig
    from warpcode.agent.batch.driver import run_batch
    from warpcode.agent.batch.runner import Options

    config = BatchConfig(
        workers=args.workers,
        redo=args.redo,
        retry_errors=args.retry_errors,
        fail_fast=args.fail_fast,
        allow_errors=args.allow_errors,
        ray=args.ray,
        replicas=args.replicas,
        worker_cpus=args.worker_cpus,
        replica_gpus=args.replica_gpus,
        replica_kv_cache_gb=args.replica_kv_cache_gb,
        replica_warm_up=args.replica_warm_up,
        json_events=args.json,
    )
    if args.max_attempts < 1:
        raise ValueError("--max-attempts must be at least 1")
    if args.timeout_s is not None and args.timeout_s <= 0:
        raise ValueError("--timeout-s must be positive")
    if not args.jobs.is_file():
        raise ValueError(f"{args.jobs} is not a file: give the JOBS.jsonl to run")
    # The extras are checked before any job runs: missing, every job would end as an error row.
    if args.ray and missing(("ray",)):
        raise MissingExtra(INSTALL_RAY)
    if args.model and args.model.startswith(("local:", "random:")):
        require_runtime(f"the model {args.model}")
    options = Options(
        model=spec_relative_to(args.model, Path.cwd()) if args.model else None,
        mode=args.mode,
        timeout_s=args.timeout_s,
        keep_workdirs=args.keep_workdirs,
        max_attempts=args.max_attempts,
    )
    outcome = asyncio.run(run_batch(args.jobs, args.out.expanduser().absolute(), options, config))
    return outcome.exit_code


def _warm_up_sizes(text: str) -> tuple[int, int]:
    streams, _, tokens = text.partition(",")
    if not (streams.isdigit() and tokens.isdigit()):
        raise argparse.ArgumentTypeError(f"STREAMS,TOKENS: two non-negative integers (0,0: none), got {text!r}")
    return int(streams), int(tokens)


class _BatchParser(argparse.ArgumentParser):
    """`warpcode batch`'s parser, which hands `warpcode batch apply ...` to its apply parser (a JOBS file named
    `apply` is given as `./apply`)."""

    apply_parser: argparse.ArgumentParser

    def parse_known_args(self, args=None, namespace=None):
        if args and args[0] == "apply":
            return self.apply_parser.parse_known_args(args[1:], namespace)
        return super().parse_known_args(args, namespace)


def add_apply_command(batch: argparse.ArgumentParser) -> None:
    """`warpcode batch apply RESULTS.jsonl`: a parser of its own, chosen when the first argument after `batch` is
    `apply`, so that `warpcode batch JOBS.jsonl --out ...` stays as it is."""
    from warpcode.agent.batch.apply import SELECTIONS

    apply = argparse.ArgumentParser(
        prog=f"{batch.prog} apply",
        description="Turn each selected row of RESULTS.jsonl (written by `warpcode batch ... --out`) into a branch "
        "of its repository: PREFIX + the job id, one commit on top of the job's base commit holding exactly its "
        "patch. Made with git plumbing in a temporary index: the working tree, index, HEAD and other branches are "
        "never touched, and an existing branch is never moved (the same content: already applied; other content: "
        "a conflict). A line per row and a summary go to stderr. Exit code 0 when every selected row with a patch "
        "and a base commit was applied or already applied, 1 otherwise.",
    )
    apply.add_argument("results", type=Path, metavar="RESULTS.jsonl", help="the batch's result rows")
    apply.add_argument(
        "--branch-prefix", default="warpcode/", metavar="PREFIX", help="what each branch name starts with (warpcode/)"
    )
    apply.add_argument(
        "--only",
        choices=SELECTIONS,
        default="succeeded",
        help="the rows of this status (default succeeded); any: every row with a patch",
    )
    apply.add_argument("--json", action="store_true", help="one JSON object per row on stdout (id, repo, outcome, "
                       "branch, commit, reason), nothing else")  # fmt: skip
    apply.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    apply.set_defaults(handler=run_apply_command)
    batch.__class__ = _BatchParser  # the same parser, now dispatching `apply`
    batch.apply_parser = apply
    batch.epilog = (
        "Afterwards, `warpcode batch apply RESULTS.jsonl [--branch-prefix warpcode/] [--only succeeded] [--json]` "
        "turns the rows' patches into branches of their repositories (see `warpcode batch apply --help`)."
    )


def run_apply_command(args: argparse.Namespace) -> int:
    from warpcode.agent.batch.apply import apply_results

    return apply_results(args.results.expanduser().absolute(), args.branch_prefix, args.only, args.json)
