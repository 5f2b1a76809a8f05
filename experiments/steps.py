"""A table's step and how one call runs it: a step is a name, a one-line help, the commands it runs (commands,
arms run alternating and compared, or work done here) and its log under --out; the session runs steps in order,
each in its own log, with the environment they share (carried wheels, the installed tree).
"""

from __future__ import annotations

import collections
import os
import shlex
import shutil
import tarfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import trees
from ab import Arm, alternate, compare, environment, measurements, stream, summary

BASE_TREE = Path("/tmp/warpcode-ab-base")  # where the base tarball of an A/B is unpacked
RETURNED_FILES = 8  # a device call brings back at most this many files from $OUT


@dataclass(frozen=True)
class Action:
    """Work the runner does itself (installing, noting the commit), described for --dry-run."""

    describe: str
    do: Callable[[Session, TextIO], int]


@dataclass(frozen=True)
class Compare:
    """A step whose commands are arms, run alternating for --rounds rounds and then compared (experiments/ab.py)."""

    reference: str
    keys: tuple[str, ...] | None = None  # None: every non-float field names the case
    metrics: tuple[str, ...] | None = None  # None: every float field


@dataclass(frozen=True)
class Step:
    name: str
    help: str
    log: str  # under --out; a .jsonl log (and a compared step's) takes stdout alone, stderr going to STEM_err.log
    commands: Callable[[Any, list[str]], Sequence[Arm | Action]]  # from the runner's options and the step's arguments
    args: str = ""  # default extra arguments, replaced by `--args NAME="..."`
    show: Callable[[str], str | None] = lambda line: line  # the console view of an output line (None: hidden)
    tail: int = 0  # show only each command's last TAIL lines (0: every line as it comes)
    compare: Compare | None = None
    keep: tuple[str, ...] = ()  # files copied under --out after the step


class Session:
    """The steps of one call: the environment they share (carried wheels, this tree) and their logs."""

    def __init__(self, root: Path, out: Path, rounds: int = 2, base_tarball: Path | None = None):
        self.root, self.out, self.rounds, self.base_tarball = root, out, rounds, base_tarball
        self.base_env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # with the carried wheels once installed
        self.tree_env: dict[str, str] = {}  # what makes this tree the imported warpcode

    def run(self, step: Step, plan: Sequence[Arm | Action]) -> int:
        print(f"== {step.name}: {step.help}", flush=True)
        log_path = self.out / step.log
        err_path = None
        if step.compare or step.log.endswith(".jsonl"):
            err_path = self.out / f"{Path(step.log).stem}_err.log"
        with log_path.open("a") as log, err_path.open("a") if err_path else nullcontext() as err:
            try:
                status = self._compared(step, plan, log, err) if step.compare else self._plain(step, plan, log, err)
            except (OSError, ValueError) as error:  # a missing base tarball, an arm's name twice
                print(f"{step.name}: {error}", flush=True)
                status = 1
        if err_path and not step.compare:
            last = err_path.read_text().splitlines()[-5:]
            print("\n".join(f"  stderr: {line}" for line in last), flush=True)
        for kept in step.keep:
            if (self.root / kept).is_file():
                shutil.copy(self.root / kept, self.out)
        return status

    def _plain(self, step: Step, plan: Sequence[Arm | Action], log: TextIO, err: TextIO | None) -> int:
        failed = 0
        for item in plan:
            if isinstance(item, Action):
                status = item.do(self, log)
                failed = failed or status
                continue
            view = Console(step)
            prefix = f"{item.name} " if item.name else ""
            env = environment({**self.base_env, **self.tree_env}, item.env)
            status = stream(item.argv, item.cwd, env, log, prefix, err, lambda line, p=prefix, v=view: v.line(p, line))
            view.flush()
            failed = failed or status
        return failed

    def _compared(self, step: Step, plan: Sequence[Arm | Action], log: TextIO, err: TextIO) -> int:
        arms = [item for item in plan if isinstance(item, Arm)]
        names = [arm.name for arm in arms]
        if len(set(names)) != len(names) or "" in names:
            raise ValueError(f"the arms need distinct names, not {names}")
        if any(arm.cwd == BASE_TREE for arm in arms):
            trees.unpack(self.base_tarball or self.root / "ab_base.tar", BASE_TREE)

        def prepare(arm: Arm) -> Mapping[str, str]:
            return trees.install(arm.cwd, err, self.base_env) if arm.install else self.tree_env

        log.flush()
        start = log.tell()
        view = Console(step)
        status = alternate(arms, self.rounds, log, err, self.base_env, prepare, view.line)
        view.flush()
        if any(arm.install for arm in arms):  # this tree is the installed one again
            self.tree_env = trees.install(self.root, err, self.base_env)
        log.flush()
        with open(log.name) as written:
            written.seek(start)
            found = measurements(written.read().splitlines())
        rule = step.compare
        assert rule is not None
        names_found = {measurement.arm for measurement in found}
        reference = rule.reference if rule.reference in names_found else None
        lines = summary(compare(found, reference, rule.keys, rule.metrics), reference)
        log.write("".join(f"# {line}\n" for line in lines))
        print("\n".join(lines), flush=True)
        return status


class Console:
    """A step's console: each output line through the step's view, shown as it comes or only the last TAIL."""

    def __init__(self, step: Step):
        self.show = step.show
        self.kept: collections.deque[str] | None = collections.deque(maxlen=step.tail) if step.tail else None

    def line(self, prefix: str, line: str) -> None:
        try:
            shown = self.show(line)
        except (ValueError, KeyError, TypeError):  # not the JSON the view expects: the line as it is
            shown = line
        if shown is None:
            return
        if self.kept is not None:
            self.kept.append(prefix + shown)
        else:
            print(prefix + shown, flush=True)

    def flush(self) -> None:
        if self.kept:
            print("\n".join(self.kept), flush=True)
            self.kept.clear()


def pack(out: Path) -> None:
    """More files than a device call brings back go into one tarball."""
    files = sorted(path for path in out.iterdir() if path.is_file() and path.name != "session.tar.gz")
    if len(files) <= RETURNED_FILES:
        return
    with tarfile.open(out / "session.tar.gz", "w:gz") as archive:
        for path in files:
            archive.add(path, arcname=path.name)
    for path in files:
        path.unlink()
    print(f"{len(files)} files under {out}, more than a device call brings back: packed into session.tar.gz")


def describe(step: Step, plan: Sequence[Arm | Action], out: Path, rounds: int) -> list[str]:
    """What a step would do, for --dry-run."""
    lines = [f"== {step.name}: {step.help}", f"   log: {out / step.log}"]
    if step.compare:
        metrics = ", ".join(step.compare.metrics or ("every float field",))
        lines.append(f"   {rounds} rounds alternating; {metrics} as ratios to {step.compare.reference}")
    for item in plan:
        if isinstance(item, Action):
            lines.append(f"   [{item.describe}]")
            continue
        label = f"{item.name}: " if item.name else ""
        installed = "(its tree installed) " if item.install else ""
        cd = f"cd {item.cwd} && " if item.cwd != Path(".") else ""
        env = "".join(f"{name}={shlex.quote(value)} " for name, value in item.env.items() if value is not None)
        unset = "".join(f"-u {name} " for name, value in item.env.items() if value is None)
        env = f"env {unset}{env}" if unset else env
        lines.append(f"   {label}{installed}{cd}{env}{shlex.join(item.argv)}")
    lines.extend(f"   [copy {kept} to {out}]" for kept in step.keep)
    return lines
