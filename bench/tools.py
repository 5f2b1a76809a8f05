"""Benchmarks of the tools layer: `python -m warpcode.bench.tools [--out FILE]`.

Measures edit_file and apply_patch on a 10,000-line file, and search and repo_map over the Python sources of
the installed torch package (located without importing torch). repo_map runs in fresh processes: cold (no
cache) and warm (cache left by the cold run), as an agent starting a new session would. "Cold" is about
warpcode's own caches: the files are in the operating system's page cache (search reads them once untimed
first), as a repository being worked on is.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from warpcode.tools.edit import edit_file
from warpcode.tools.patch import apply_patch
from warpcode.tools.repomap import repo_map
from warpcode.tools.text_search import search
from warpcode.tools.workspace import Workspace

LINES = 10_000
REPEATS = 50


def _median_ms(action: Callable[[int], object], repeats: int = REPEATS) -> float:
    timings = []
    for i in range(repeats):
        started = time.perf_counter()
        action(i)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def _big_file(root: Path) -> tuple[Workspace, str]:
    text = "".join(f"    value_{n} = compute({n}, scale=2)  # line {n}\n" for n in range(LINES))
    (root / "big.py").write_text(text)
    return Workspace(root), text


def bench_edit(root: Path) -> float:
    ws, _ = _big_file(root)
    marks = ("compute(5000, scale=2)", "compute(5000, scale=3)")
    return _median_ms(lambda i: edit_file(ws, "big.py", marks[i % 2], marks[(i + 1) % 2]))


def bench_patch(root: Path) -> float:
    ws, text = _big_file(root)
    lines = text.splitlines(keepends=True)
    changed = list(lines)
    changed[5000] = "    value_5000 = compute(5000, scale=3)  # changed\n"
    changed.insert(7000, "    inserted = True\n")
    forward = "".join(difflib.unified_diff(lines, changed, "a/big.py", "b/big.py"))
    backward = "".join(difflib.unified_diff(changed, lines, "a/big.py", "b/big.py"))
    return _median_ms(lambda i: apply_patch(ws, (forward, backward)[i % 2]))


def torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed: the search and repo_map benchmarks run over its sources.")
    return Path(next(iter(spec.submodule_search_locations)))


def bench_search(root: Path) -> tuple[float, int, int]:
    ws = Workspace(root)  # search keeps no state: nothing is written for it
    search(ws, "warm up the page cache", glob="*.py")
    started = time.perf_counter()
    result = search(ws, r"class \w+Observer\b", glob="*.py")  # few hits, so every file is scanned
    return (time.perf_counter() - started) * 1000, result.files_searched, len(result.matches)


def _repo_map_in_new_process(root: Path, state: str) -> dict[str, float]:
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-m", "warpcode.bench.tools", "--repo-map-once", str(root), state],
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(child.stdout)
    measured["process_s"] = time.perf_counter() - started
    return measured


def _repo_map_once(root: str, state: str) -> None:
    ws = Workspace(root, state_dir=state)
    started = time.perf_counter()
    result = repo_map(ws, max_tokens=2048, glob="*.py")
    elapsed = time.perf_counter() - started
    print(json.dumps({"repo_map_s": elapsed, "files": result.files, "shown": result.definitions_shown}))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--repo-map-once", nargs=2, metavar=("ROOT", "STATE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repo_map_once:
        _repo_map_once(*args.repo_map_once)
        return
    with tempfile.TemporaryDirectory() as tmp:
        edit_ms = bench_edit(Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        patch_ms = bench_patch(Path(tmp))
    root = torch_root()
    search_ms, searched, hits = bench_search(root)
    with tempfile.TemporaryDirectory(prefix="warpcode-bench-state-") as state:
        cold = _repo_map_in_new_process(root, state)
        warm = _repo_map_in_new_process(root, state)
    rows = [
        ("edit_file, 10,000-line file (median of 50)", f"{edit_ms:.2f} ms", "< 5 ms", edit_ms < 5),
        ("apply_patch, 10,000-line file, 2 hunks (median of 50)", f"{patch_ms:.2f} ms", "< 5 ms", patch_ms < 5),
        (f"search, regex over {searched} torch .py files ({hits} hits; files in the page cache, as a session's "
         "repository is)", f"{search_ms:.0f} ms", "< 1 s",
         search_ms < 1000),
        (f"repo_map cold (no tags cache; files in the page cache), {cold['files']:.0f} torch .py files",
         f"{cold['repo_map_s']:.1f} s "
         f"(process {cold['process_s']:.1f} s)", "< 30 s", cold["repo_map_s"] < 30),
        ("repo_map warm (new process, cached tags)", f"{warm['repo_map_s']:.2f} s "
         f"(process {warm['process_s']:.2f} s)", "< 2 s", warm["repo_map_s"] < 2),
    ]  # fmt: skip
    report = [
        f"Command: `python -m warpcode.bench.tools` — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"Machine: {os.cpu_count()}-core CPU ({_cpu_model()}), Python {platform.python_version()}, {platform.system()}",
        f"Tree: {root}",
        "",
        "| benchmark | result | goal | met |",
        "|---|---|---|---|",
        *(f"| {name} | {value} | {goal} | {'yes' if met else 'NO'} |" for name, value, goal, met in rows),
    ]
    text = "\n".join(report) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
