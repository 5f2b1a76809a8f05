"""What a batch shows while it runs. On stderr: a live `rich` view when stderr is a terminal (done / running /
failed, ETA, the slowest running jobs), one line per finished job otherwise, and a closing summary table either
way. With --json, one event object a line on stdout (batch, started, retry, finished, summary) and nothing else.
Ids and errors reach the terminal with their control characters escaped, and never as `rich` markup."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from warpcode.agent.batch.ids import shown
from warpcode.agent.batch.results import STATUSES
from warpcode.agent.plural import counted
from warpcode.agent.tables import print_table

SLOWEST_SHOWN = 5
_STYLES = {"succeeded": "green", "failed": "yellow", "timeout": "magenta", "error": "red"}


@dataclass
class _Running:
    worker: str
    attempt: int
    since: float


class BatchProgress:
    def __init__(self, total: int, skipped: int, log: TextIO, events: TextIO | None = None) -> None:
        self.total, self.skipped, self.events = total, skipped, events
        self.console = Console(file=log, highlight=False, soft_wrap=True)
        self.counts: Counter = Counter()
        self.running: dict[str, _Running] = {}
        self.durations: dict[str, list[float]] = {status: [] for status in STATUSES}
        self.began = time.monotonic()
        self._live: Live | None = None

    def __enter__(self) -> BatchProgress:
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=4, transient=True, get_renderable=self._view)
            self._live.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def note(self, text: str) -> None:
        self.console.print(text, markup=False)

    def header(self, jobs: int, where: str, extra: str = "") -> None:
        counts = f"{counted(jobs, 'job')}, {self.skipped} already recorded, {self.total} to run"
        self.note(f"batch: {counts}, {where}{extra}")
        self._event("batch", jobs=jobs, to_run=self.total, skipped=self.skipped)

    def started(self, job_id: str, worker: str, attempt: int = 1, **where: Any) -> None:
        self.running[job_id] = _Running(worker, attempt, time.monotonic())
        self._event("started", id=job_id, attempt=attempt, worker=worker, **where)

    def retrying(self, job_id: str, attempt: int, error: str) -> None:
        self.running.pop(job_id, None)
        self.note(shown(f"{job_id}: {error}; trying again (attempt {attempt})"))
        self._event("retry", id=job_id, attempt=attempt, error=error)

    def finished(self, row: dict[str, Any]) -> None:
        self.running.pop(row["id"], None)
        status = row["status"]
        self.counts[status] += 1
        self.durations[status].append(row["duration_s"])
        done = sum(self.counts.values())
        problem = f" ({shown(row['error'])})" if status == "error" else ""
        line = Text(f"[{done}/{self.total}] {shown(row['id'])}: ")
        line.append(status, style=_STYLES.get(status))
        line.append(f" in {row['duration_s']:.1f}s{problem}")
        self.console.print(line)
        fields = ("id", "status", "attempts", "duration_s", "worker")
        self._event("finished", **{name: row.get(name) for name in fields})

    def summary(self, missing: int, interrupted: bool, notes: list[str] | None = None) -> None:
        elapsed = time.monotonic() - self.began
        counts = ", ".join(f"{self.counts[status]} {status}" for status in STATUSES)
        self.note(f"batch: {counts} in {elapsed:.1f}s; {self.skipped} skipped (already recorded)")
        table = Table()
        table.add_column("status")
        table.add_column("jobs", justify="right")
        table.add_column("mean time", justify="right")
        for status in STATUSES:
            times = self.durations[status]
            mean = f"{sum(times) / len(times):.1f}s" if times else "-"
            table.add_row(Text(status, style=_STYLES[status]), str(self.counts[status]), mean)
        table.add_row("skipped (recorded before)", str(self.skipped), "-")
        if missing:
            table.add_row("no row yet", str(missing), "-")
        print_table(self.console, table)
        for line in notes or []:
            self.note(line)
        self._event("summary", **{s: self.counts[s] for s in STATUSES}, skipped=self.skipped, missing=missing,
                    interrupted=interrupted, elapsed_s=round(elapsed, 3))  # fmt: skip

    def _view(self) -> Group:
        done = sum(self.counts.values())
        elapsed = time.monotonic() - self.began
        eta = f"ETA {_clock(elapsed / done * (self.total - done))}" if done else "ETA -"
        bad = self.counts["failed"] + self.counts["timeout"]
        line = Table.grid(padding=(0, 1))
        line.add_row(
            ProgressBar(total=max(self.total, 1), completed=done, width=30),
            f"{done}/{self.total} done · {len(self.running)} running · {bad} failed · {self.counts['error']} errors "
            f"· {_clock(elapsed)} · {eta}",
        )
        slowest = sorted(self.running.items(), key=lambda item: item[1].since)[:SLOWEST_SHOWN]
        rows = Table.grid(padding=(0, 2))
        now = time.monotonic()
        for job_id, running in slowest:
            retry = f" (attempt {running.attempt})" if running.attempt > 1 else ""
            rows.add_row(Text(f"  {shown(job_id)}{retry}"), Text(shown(running.worker)), _clock(now - running.since))
        return Group(line, rows)

    def _event(self, kind: str, **fields: Any) -> None:
        if self.events is not None:
            self.events.write(json.dumps({"event": kind, **fields}, ensure_ascii=False) + "\n")
            self.events.flush()


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}" if minutes >= 60 else f"{minutes}:{seconds:02d}"
