"""The A/B harness: one measurement in several arms, alternating round by round, and each arm's JSON-line
measurements as ratios to a reference arm.

An arm is a name, a command, the directory it runs in and its environment changes: this tree against a base tree
(the same command in another root, each tree installed before its run), or variants of one tree, each passed
explicitly (an argument, or an environment variable naming a config file). Rounds alternate (A B A B ...) because
a GPU's clocks and temperature drift over a call: alternating spreads the drift over every arm, and only ratios
taken in one call are compared (BENCHMARKS.md).

    python3 experiments/ab.py --arm this=. --arm base=/tmp/warpcode-ab-base --install --rounds 2 --log ab.log \\
        --reference base --keys batch,context --metrics tokens_per_second \\
        -- python3 -m warpcode.agent bench decode --preset qwen3-30b-a3b --random-weights --batch 1 --json
    python3 experiments/ab.py --summarize ab.log --reference base

Each stdout line goes into the log as "ARM round N LINE" (stderr into the error log beside it); the lines that are
JSON objects are the measurements. A case is a row's values of `keys` (default: every field that is not a float),
a metric one of `metrics` (default: every float field); the summary gives, per case and metric, each arm's value
per round and its mean's ratio to the reference arm's mean (the first arm unless named).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import trees


@dataclass(frozen=True)
class Arm:
    name: str  # one word, which starts the arm's log lines ("": none, for a command run alone)
    argv: tuple[str, ...]
    cwd: Path = Path(".")
    env: Mapping[str, str | None] = field(default_factory=dict)  # None unsets a variable
    install: bool = False  # a tree arm: `pip install -e` its directory before each of its runs

    def __post_init__(self):
        if any(space.isspace() for space in self.name):
            raise ValueError(f"an arm's name is one word, not {self.name!r}")


@dataclass(frozen=True)
class Measurement:
    arm: str
    round: int
    row: dict


@dataclass(frozen=True)
class Comparison:
    """One arm's values of one metric in one case, and its mean's ratio to the reference arm's mean."""

    case: tuple[tuple[str, object], ...]
    metric: str
    arm: str
    values: tuple[float, ...]
    ratio: float | None  # None: the reference arm has no value here (or a zero mean)


def environment(base: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    env = dict(base)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def stream(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    log: TextIO,
    prefix: str = "",
    err: TextIO | None = None,
    on_line: Callable[[str], None] = lambda line: None,
) -> int:
    """Runs ARGV; each stdout line goes into LOG after PREFIX and to ON_LINE, stderr into ERR (None: with stdout).
    Returns the exit status (127 when the program is not there)."""
    log.flush()
    try:
        process = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=err or subprocess.STDOUT, text=True
        )
    except OSError as error:  # the program itself is missing: say so in the log, as a shell would
        log.write(f"{prefix}{argv[0]}: {error.strerror}\n")
        on_line(f"{argv[0]}: {error.strerror}")
        return 127
    assert process.stdout is not None
    for line in process.stdout:
        log.write(prefix + line)
        log.flush()
        on_line(line.rstrip("\n"))
    return process.wait()


def alternate(
    arms: Sequence[Arm],
    rounds: int,
    log: TextIO,
    err: TextIO,
    env: Mapping[str, str] | None = None,
    prepare: Callable[[Arm], Mapping[str, str | None]] | None = None,
    on_line: Callable[[str, str], None] = lambda prefix, line: None,
) -> int:
    """Runs every arm once a round, in order, ROUNDS times; PREPARE (before each run) returns environment changes,
    e.g. those that make a tree arm's tree the imported one; ON_LINE gets each output line and its "ARM round N "
    prefix. Returns the first failing exit status, else 0."""
    failed = 0
    for round_number in range(1, rounds + 1):
        for arm in arms:
            changes = {**(prepare(arm) if prepare else {}), **arm.env}
            prefix = f"{arm.name} round {round_number} "
            status = stream(
                arm.argv, arm.cwd, environment(env or os.environ, changes), log, prefix, err,
                lambda line, prefix=prefix: on_line(prefix, line),
            )  # fmt: skip
            failed = failed or status
    return failed


def measurements(lines: Iterable[str]) -> list[Measurement]:
    """The JSON-object lines of a log written by `alternate`; other lines are skipped."""
    found = []
    for line in lines:
        parts = line.rstrip("\n").split(" ", 3)
        if len(parts) < 4 or parts[1] != "round" or not parts[2].isdigit() or not parts[3].startswith("{"):
            continue
        try:
            row = json.loads(parts[3])
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            found.append(Measurement(parts[0], int(parts[2]), row))
    return found


def compare(
    found: Sequence[Measurement],
    reference: str | None = None,
    keys: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
) -> list[Comparison]:
    """Per case and metric, each arm's values in round order and its mean's ratio to the REFERENCE arm's mean."""
    arms = list(dict.fromkeys(measurement.arm for measurement in found))
    if reference is not None and reference not in arms:
        raise ValueError(f"no arm {reference!r} in the measurements (arms: {', '.join(arms) or 'none'})")
    reference = reference or (arms[0] if arms else None)
    values: dict[tuple, dict[str, list[float]]] = {}
    for measurement in found:
        row = measurement.row
        case_fields = keys if keys is not None else [name for name, value in row.items() if _names_the_case(value)]
        case = tuple((name, _hashable(row.get(name))) for name in case_fields)
        row_metrics = metrics if metrics is not None else [name for name, value in row.items() if _is_metric(value)]
        for metric in row_metrics:
            value = row.get(metric)
            if isinstance(value, int | float) and not isinstance(value, bool):
                per_arm = values.setdefault((case, metric), {})
                per_arm.setdefault(measurement.arm, []).append(float(value))
    comparisons = []
    for (case, metric), per_arm in values.items():
        reference_values = per_arm.get(reference)
        reference_mean = _mean(reference_values) if reference_values else 0.0
        for arm in arms:
            if arm in per_arm:
                ratio = _mean(per_arm[arm]) / reference_mean if reference_mean else None
                comparisons.append(Comparison(case, metric, arm, tuple(per_arm[arm]), ratio))
    return comparisons


def summary(comparisons: Sequence[Comparison], reference: str | None = None) -> list[str]:
    """Printable lines: a header per case and metric, then one line per arm (values by round, ratio)."""
    if not comparisons:
        return ["no JSON measurements to compare"]
    reference = reference or comparisons[0].arm
    width = max(len(comparison.arm) for comparison in comparisons)
    lines, header = [], None
    for comparison in comparisons:
        if (comparison.case, comparison.metric) != header:
            header = (comparison.case, comparison.metric)
            case = " ".join(f"{name}={value}" for name, value in comparison.case)
            lines.append(f"{case}: {comparison.metric}, mean's ratio to {reference}'s")
        rounds = " / ".join(f"{value:.6g}" for value in comparison.values)
        ratio = "-" if comparison.ratio is None else f"x{comparison.ratio:.4f}"
        lines.append(f"  {comparison.arm:<{width}}  {rounds:<32} {ratio}")
    return lines


def _is_metric(value: object) -> bool:
    return isinstance(value, float)


def _names_the_case(value: object) -> bool:
    """Numbers other than floats and short words name a case; prose (a benchmark row's note, which quotes its own
    measurements) would make every run's row a case of its own."""
    return not _is_metric(value) and not (isinstance(value, str) and " " in value)


def _hashable(value: object) -> object:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _names(text: str | None) -> list[str] | None:
    return [name.strip() for name in text.split(",") if name.strip()] if text else None


def _tree_arm(text: str, command: tuple[str, ...], install: bool) -> Arm:
    name, separator, folder = text.partition("=")
    if not separator or not name or not folder:
        raise SystemExit(f"--arm takes NAME=DIR (a tree to run the command in), not {text!r}")
    if not Path(folder).is_dir():
        raise SystemExit(f"--arm {text}: no directory {folder}")
    return Arm(name, command, Path(folder), install=install)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run one command in several trees, alternating rounds, and compare their JSON-line outputs.",
        epilog="Example: --arm this=. --arm base=/tmp/base --rounds 2 --log ab.log -- python3 -m ... --json",
    )
    parser.add_argument("--arm", action="append", default=[], metavar="NAME=DIR", help="a tree (two or more)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, each running every arm once (default 2)")
    parser.add_argument("--log", type=Path, default=Path("ab.log"), help="the log (stderr goes to LOG_err.log)")
    parser.add_argument("--install", action="store_true", help="pip install -e each tree before each of its runs")
    parser.add_argument("--reference", help="the arm the ratios are to (default: the first)")
    parser.add_argument("--keys", help="comma-separated fields naming a case (default: the non-float fields)")
    parser.add_argument("--metrics", help="comma-separated fields to compare (default: the float fields)")
    parser.add_argument("--summarize", type=Path, metavar="LOG", help="only print the summary of an existing log")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command, run in each tree's root")
    args = parser.parse_args(argv)
    command = tuple(args.command[1:] if args.command[:1] == ["--"] else args.command)
    log_path = args.summarize
    if log_path is None:
        if len(args.arm) < 2 or not command:
            parser.error("name two trees or more (--arm NAME=DIR) and, after --, the command to run in each")
        arms = [_tree_arm(text, command, args.install) for text in args.arm]
        log_path = args.log
        with log_path.open("a") as log, log_path.with_name(log_path.stem + "_err.log").open("a") as err:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            prepare = (lambda arm: trees.install(arm.cwd, err, env)) if args.install else None
            alternate(arms, args.rounds, log, err, env, prepare, on_line=lambda prefix, line: print(prefix + line))
            if args.install:  # the first tree is the installed one again
                trees.install(arms[0].cwd, err, env)
    if not log_path.is_file():
        parser.error(f"no log {log_path}")
    found = measurements(log_path.read_text().splitlines())
    try:
        comparisons = compare(found, args.reference, _names(args.keys), _names(args.metrics))
    except ValueError as error:
        parser.error(str(error))
    print("\n".join(summary(comparisons, args.reference)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
