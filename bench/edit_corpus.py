"""edit_file against real history: model-style calls built from one-region edits of public repositories.

Each repository is a bare git mirror (the `fetch` tool puts them under /work/.mirror/OWNER+NAME/repo). From its
latest commits, every modified text file whose change is one region of at most 40 lines gives an edit (parent
file, child file); tests/tools/edit_corpus.py turns it into the exact call and the model-style variants and
grades each result against the child file. Prints, per variant and in total: calls, right, wrong text, wrong
place, refused (with candidates), refused without candidates, crashes; and the first few failures.

    PYTHONPATH=/tmp/tt-editfile python -m warpcode.bench.edit_corpus /work/.mirror/*/repo
    (PYTHONPATH holds a `tests` link to this checkout's tests/; run it with main's venv for the 'before' figures)

--sample BYTES writes about that many bytes of small edits (spread over repositories and file types) to
tests/fixtures/edit_corpus/edits.jsonl; --extra GIT_DIR:COMMIT adds one commit's edits (e.g. CRLF files).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

from warpcode.bench.edit_calls import FIXTURES, RealEdit, calls_for, grade

EXTENSIONS = {".py", ".go", ".js", ".rs", ".c", ".h", ".md", ".toml", ".yml", ".yaml", ".json", ".txt", ".rst"}
MAX_FILE_BYTES = 150_000
SAMPLE_FILE_BYTES = 12_000
# Repositories whose files may be kept as test data, with their licences (ruanyf/weekly has none: run only).
LICENCES = {
    "psf/requests": "Apache-2.0",
    "pallets/flask": "BSD-3-Clause",
    "spf13/cobra": "Apache-2.0",
    "expressjs/express": "MIT",
    "BurntSushi/ripgrep": "MIT OR Unlicense",
    "DaveGamble/cJSON": "MIT",
    "redis/redis": "RSALv2 / SSPLv1 / AGPLv3 (tri-licence; BSD-3-Clause before 7.4)",
    "ruanyf/es6tutorial": "CC BY-NC 4.0",
}


class Blobs:
    """`git cat-file --batch` kept open: one process per repository instead of one per file."""

    def __init__(self, git_dir: str) -> None:
        self.proc = subprocess.Popen(
            ["git", "--git-dir", git_dir, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def read(self, sha: str) -> bytes:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(sha.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        size = int(header[2])
        data = self.proc.stdout.read(size)
        self.proc.stdout.read(1)
        return data

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


def repo_name(git_dir: str) -> str:
    return Path(git_dir).parent.name.replace("+", "/")


def mine(git_dir: str, commits: int, per_repo: int, head: str = "HEAD") -> list[RealEdit]:
    log = subprocess.run(
        ["git", "--git-dir", git_dir, "log", "--no-merges", f"-n{commits}", "--format=%H %P", head],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    blobs = Blobs(git_dir)
    edits: list[RealEdit] = []
    for entry in log:
        ids = entry.split()
        if len(ids) != 2:
            continue
        commit, parent = ids
        raw = subprocess.run(
            ["git", "--git-dir", git_dir, "diff-tree", "-r", "--no-renames", "--diff-filter=M", "-z", parent, commit],
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        for meta, path in zip(raw[0::2], raw[1::2], strict=False):
            fields = meta.decode().split()
            if len(fields) < 4 or Path(path.decode(errors="replace")).suffix not in EXTENSIONS:
                continue
            edit = _edit(blobs, repo_name(git_dir), commit, path.decode("utf-8", "surrogateescape"), fields)
            if edit is not None:
                edits.append(edit)
        if len(edits) >= per_repo:
            break
    blobs.close()
    return edits[:per_repo]


def _edit(blobs: Blobs, repo: str, commit: str, path: str, fields: list[str]) -> RealEdit | None:
    before, after = blobs.read(fields[2]), blobs.read(fields[3])
    if max(len(before), len(after)) > MAX_FILE_BYTES or b"\0" in before or b"\0" in after:
        return None
    try:
        edit = RealEdit(repo, commit, path, before.decode("utf-8"), after.decode("utf-8"))
    except UnicodeDecodeError:
        return None
    return edit if calls_for(edit) else None


def report(edits: list[RealEdit], show: int) -> None:
    by_variant: dict[str, Counter[str]] = defaultdict(Counter)
    failures = []
    for edit, outcome in grade(edits):
        by_variant[outcome.call.variant][outcome.kind] += 1
        if outcome.kind not in ("right", "refused") or (outcome.call.variant == "exact" and outcome.kind != "right"):
            failures.append((edit, outcome))
    kinds = ["right", "wrong text", "wrong place", "refused", "refused without candidates", "crash"]
    print(f"{'variant':40} {'calls':>6} " + " ".join(f"{k[:12]:>12}" for k in kinds))
    total: Counter[str] = Counter()
    for variant, counts in sorted(by_variant.items()):
        print(f"{variant:40} {sum(counts.values()):>6} " + " ".join(f"{counts[k]:>12}" for k in kinds))
        if variant != "exact":
            total.update(counts)
    exact = by_variant["exact"]
    tolerant = sum(total.values())
    print(f"\nedits: {len(edits)}  calls: {tolerant + sum(exact.values())}")
    print(f"exact old_text: {exact['right']}/{sum(exact.values())} right")
    if tolerant:
        print(
            f"tolerant: {tolerant} calls, applied right {total['right']} ({100 * total['right'] / tolerant:.1f}%), "
            f"wrong text {total['wrong text']}, wrong place {total['wrong place']}, "
            f"refused {total['refused'] + total['refused without candidates']} "
            f"(without candidates {total['refused without candidates']}), crashes {total['crash']}"
        )
    for edit, outcome in failures[:show]:
        print(f"\n[{outcome.kind}] {outcome.call.variant}: {edit.repo} {edit.commit[:10]} {edit.path}")
        print(f"  {outcome.detail[:300]!r}")


def write_sample(edits: list[RealEdit], budget: int) -> None:
    """Small files of licensed repositories, spread over repositories and file types and richest in variants
    first, until `budget` bytes: the sample stays a few hundred KB."""
    pools: dict[tuple[str, str], list[RealEdit]] = defaultdict(list)
    for edit in edits:
        if edit.repo in LICENCES and max(len(edit.parent), len(edit.child)) <= SAMPLE_FILE_BYTES:
            pools[edit.repo, Path(edit.path).suffix].append(edit)
    for pool in pools.values():
        pool.sort(key=lambda edit: -len(calls_for(edit)))
    chosen: list[RealEdit] = []
    size = 0
    while any(pools.values()) and size < budget:
        for pool in pools.values():
            if pool and size < budget:
                chosen.append(pool.pop(0))
                size += len(chosen[-1].parent) + len(chosen[-1].child)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with open(FIXTURES / "edits.jsonl", "w", encoding="utf-8") as stream:
        for edit in chosen:
            record = {**edit.as_json(), "licence": LICENCES[edit.repo]}
            stream.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {len(chosen)} edits ({size} bytes) to {FIXTURES / 'edits.jsonl'}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("git_dirs", nargs="+", help="bare git mirrors")
    parser.add_argument("--commits", type=int, default=3000, help="latest non-merge commits walked per repository")
    parser.add_argument("--per-repo", type=int, default=80, help="edits taken per repository")
    parser.add_argument("--show", type=int, default=10, help="failures printed")
    parser.add_argument("--extra", action="append", default=[], help="GIT_DIR:COMMIT mined besides the latest")
    parser.add_argument("--sample", type=int, default=0, help="write about this many bytes of edits as fixture")
    args = parser.parse_args()
    edits = [edit for git_dir in args.git_dirs for edit in mine(git_dir, args.commits, args.per_repo)]
    for extra in args.extra:
        git_dir, commit = extra.rsplit(":", 1)
        edits += mine(git_dir, 1, args.per_repo, commit)
    if args.sample:
        write_sample(edits, args.sample)
    report(edits, args.show)


if __name__ == "__main__":
    main()
