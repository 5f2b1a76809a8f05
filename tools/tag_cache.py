"""Tags of every source file in the workspace, cached on disk by (path, mtime_ns, size).

The cache lives in the workspace's private state directory, checked before each read and write (workspace.py),
and is JSON all the same: never pickle, which would run whatever a cache file it was handed says.
A cold run parses in a process pool when there are many files; a warm run only stats files.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

from warpcode.tools.atomic import atomic_write
from warpcode.tools.errors import GrammarUnavailable, ToolError
from warpcode.tools.globs import PathGlob
from warpcode.tools.languages import language_of
from warpcode.tools.tags import FileTags, extract_tags
from warpcode.tools.workspace import Workspace

CACHE_VERSION = 2  # 2: CommonJS, fields and C++ headers named .h; signatures after annotations
CACHE_NAME = "repo-map-tags.json"
MAX_SOURCE_BYTES = 1024 * 1024  # larger files are generated code or data: skipped, with a note
MAX_WORKERS = 8
POOL_THRESHOLD = 64  # below this many files to parse, starting worker processes costs more than it saves


def parse_one(job: tuple[str, str, str, str]) -> tuple[str, list[object] | None]:
    rel, path, language, root = job
    try:
        source = _workspace(root).read_bytes(path)
    except (OSError, ToolError):
        return rel, None
    if b"\0" in source[:8192]:
        return rel, None
    try:
        return rel, extract_tags(source, language_of(rel, source) or language).to_json()
    except GrammarUnavailable:
        return rel, None  # the map covers the languages it can parse


@functools.lru_cache(maxsize=4)
def _workspace(root: str) -> Workspace:
    return Workspace(root)


class TagCache:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.path = ws.state_dir / CACHE_NAME
        self.skipped_large: list[str] = []

    def _load(self) -> dict[str, list[object]]:
        try:
            self.ws.ensure_state_dir()
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return {}
        files = data.get("files")
        return files if isinstance(files, dict) else {}

    def collect(self, glob: str | None = None) -> dict[str, FileTags]:
        """Tags of every non-ignored source file (matching `glob` if given), parsing only the files that changed
        since the last run. Cache entries of files outside `glob` are kept for later runs."""
        selected = PathGlob(glob) if glob else None
        cached = self._load()
        fresh: dict[str, list[object]] = {}
        jobs: list[tuple[str, str, str, str]] = []
        keys: dict[str, list[int]] = {}
        for entry in self.ws.walk():
            language = language_of(entry.rel)
            if language is None or (selected is not None and not selected.admits(entry.rel)):
                continue
            if entry.size > MAX_SOURCE_BYTES:
                self.skipped_large.append(entry.rel)
                continue
            stat = os.stat(entry.path)
            key = [stat.st_mtime_ns, stat.st_size]
            hit = cached.get(entry.rel)
            if isinstance(hit, list) and len(hit) == 3 and hit[0] == key:
                fresh[entry.rel] = hit
            else:
                keys[entry.rel] = key
                jobs.append((entry.rel, entry.path, language, str(self.ws.root)))
        for rel, tags in self._parse(jobs):
            if tags is not None:
                fresh[rel] = [keys[rel], language_of(rel), tags]
        if jobs or (selected is None and len(fresh) != len(cached)):
            self._save({**cached, **fresh} if selected is not None else fresh)
        return {rel: FileTags.from_json(entry[2]) for rel, entry in fresh.items()}  # type: ignore[arg-type]

    def _parse(self, jobs: list[tuple[str, str, str, str]]) -> list[tuple[str, list[object] | None]]:
        workers = min(os.cpu_count() or 1, MAX_WORKERS)
        if len(jobs) < POOL_THRESHOLD or workers < 2:
            return [parse_one(job) for job in jobs]
        # Plain worker processes (`python -m` this module) rather than multiprocessing: spawn/forkserver would
        # re-import the caller's __main__, and fork is unsafe in a threaded service.
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "warpcode.tools.tag_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            for _ in range(workers)
        ]
        ordered = sorted(jobs, key=lambda job: -os.path.getsize(job[1]))
        shares = [ordered[i::workers] for i in range(workers)]  # largest files dealt round-robin
        results: list[tuple[str, list[object] | None]] = []
        for proc, share in zip(procs, shares, strict=True):
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(share).encode())
            proc.stdin.close()
        for proc in procs:
            assert proc.stdout is not None
            output = proc.stdout.read()
            if proc.wait() != 0:
                raise RuntimeError(f"tag worker exited with {proc.returncode}")
            results.extend((rel, tags) for rel, tags in json.loads(output))
        return results

    def _save(self, files: dict[str, list[object]]) -> None:
        data = json.dumps({"version": CACHE_VERSION, "files": files}, separators=(",", ":"))
        # A read-only workspace still gets a map, just not a cached one.
        with contextlib.suppress(OSError):
            self.ws.ensure_state_dir()
            atomic_write(Path(self.path), data.encode("utf-8"))
