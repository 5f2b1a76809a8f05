"""apply_patch against `git apply` and the commits' own trees, on the real history of public repositories.

    python -m warpcode.bench.patch_corpus /work/.mirror/psf+requests/repo ... [--commits 300] [--variants]
        [--save tests/fixtures/patch_corpus/NAME.json --save-count 12]

For each selected commit (no merges; commits with renames, binary files, quoted names, mode changes and CRLF
are taken first, then the most recent), the files the commit touches are written as the parent has them into two
directories; `git diff --binary --full-index -M parent commit` is applied with apply_patch to one and with
`git apply` to the other, and both are compared with the commit's tree. A commit is counted in every class it
belongs to. With --variants, each modified text file's own diff is also rewritten the way models write diffs
(line numbers shifted, `@@ -0,0 +0,0 @@`, bare `@@`, context indentation stripped) and applied alone: the right
answer is the commit's file, so each variant is right, refused or WRONG (the goal: 0 wrong).
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from warpcode.tools import Workspace, apply_patch
from warpcode.tools.errors import ToolError

GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C"}
GIT_ENV["GIT_LITERAL_PATHSPECS"] = "1"
UNSUPPORTED_MODES = {"120000", "160000"}
HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)


def git(repo: str, *args: str, stdin: bytes | None = None, cwd: str | None = None) -> bytes:
    run = subprocess.run(
        ["git", *args] if cwd else ["git", "--git-dir", repo, *args],
        input=stdin,
        cwd=cwd,
        env=GIT_ENV,
        capture_output=True,
        check=False,
    )
    if run.returncode:
        raise RuntimeError(run.stderr.decode(errors="replace").strip() or f"git {args[0]} failed")
    return run.stdout


def raw_changes(repo: str, parent: str, commit: str) -> list[dict]:
    """`git diff --raw -z -M`: one dict per changed path (modes, blobs, status, old and new names)."""
    fields = git(repo, "diff", "--raw", "-z", "-M", "--full-index", parent, commit).split(b"\0")
    out, index = [], 0
    while index < len(fields) - 1:
        old_mode, new_mode, old_blob, new_blob, status = fields[index].decode()[1:].split(" ")
        old = new = fields[index + 1]
        index += 2
        if status[0] in "RC":
            new = fields[index]
            index += 1
        out.append(
            {
                "old_mode": old_mode,
                "new_mode": new_mode,
                "old_blob": old_blob,
                "new_blob": new_blob,
                "status": status[0],
                "old": os.fsdecode(old),
                "new": os.fsdecode(new),
            }
        )
    return out


def blobs(repo: str, ids: list[str]) -> dict[str, bytes]:
    """Contents of many blobs through one `git cat-file --batch`."""
    wanted = sorted(set(ids))
    data = git(repo, "cat-file", "--batch", stdin="".join(f"{i}\n" for i in wanted).encode())
    out, position = {}, 0
    for blob in wanted:
        header_end = data.index(b"\n", position)
        size = int(data[position:header_end].split()[2])
        out[blob] = data[header_end + 1 : header_end + 1 + size]
        position = header_end + 2 + size
    return out


def side(changes: list[dict], contents: dict[str, bytes], which: str) -> dict[str, tuple[bytes, bool]]:
    """{path: (bytes, executable)} of the touched files as the parent ("old") or the commit ("new") has them."""
    files = {}
    for change in changes:
        if change[f"{which}_mode"] not in ("000000", "160000"):
            files[change[which]] = (contents[change[f"{which}_blob"]], change[f"{which}_mode"] == "100755")
    return files


def write_tree(root: Path, files: dict[str, tuple[bytes, bool]]) -> None:
    for rel, (data, executable) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o755 if executable else 0o644)


def read_tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    files = {}
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".warpcode"]
        for name in names:
            path = Path(directory, name)
            files[path.relative_to(root).as_posix()] = (path.read_bytes(), bool(path.stat().st_mode & 0o100))
    return files


def classes(repo_class: str, changes: list[dict], diff: bytes, contents: dict[str, bytes]) -> list[str]:
    found = [repo_class]
    modes = {c["old_mode"] for c in changes} | {c["new_mode"] for c in changes}
    if modes & UNSUPPORTED_MODES:
        return [*found, "symlink/gitlink (excluded)"]
    if b"GIT binary patch" in diff:
        found.append("binary")
    if any(c["status"] == "R" for c in changes):
        found.append("rename")
    if any(c["old_mode"] != c["new_mode"] and "000000" not in (c["old_mode"], c["new_mode"]) for c in changes):
        found.append("mode change")
    if re.search(rb'^(diff --git|rename (from|to)) .*"', diff, re.M):
        found.append("quoted name")
    if any(b"\r\n" in contents.get(c["old_blob"], b"") for c in changes):
        found.append("CRLF")
    if b"\n\\ No newline at end of file" in diff:
        found.append("no newline at end")
    gone = {c["old"] for c in changes if c["status"] in "DR"}
    added = {c["new"] for c in changes if c["status"] in "AR"}
    if any(new.startswith(old + "/") or old.startswith(new + "/") for old in gone for new in added):
        found.append("file<->directory")
    return found


def reason(exc: Exception) -> str:
    """A refusal's reason without the file names, so refusals group."""
    text = str(exc).split("\n")[0]
    text = re.sub(r"^Patch not applied[^:]*: ", "", text)
    text = re.sub(r"^[^:]*?(, hunk \d+ \([^)]*\))?: ", "", text)
    return re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", text)[:90]


def apply_ours(root: Path, diff: bytes) -> tuple[str, str]:
    try:
        apply_patch(Workspace(root), diff.decode("utf-8", "surrogateescape"))
    except ToolError as exc:
        return "refused", reason(exc)
    except Exception as exc:  # counted: the goal is none
        return "exception", f"{type(exc).__name__}: {exc}"[:120]
    return "applied", ""


def run_commit(repo: str, commit: str, parent: str, quote_path: bool, scratch: Path) -> dict:
    changes = raw_changes(repo, parent, commit)
    config = f"core.quotePath={'true' if quote_path else 'false'}"
    diff = git(repo, "-c", config, "diff", "--binary", "--full-index", "-M", parent, commit)
    ids = [c[f"{s}_blob"] for c in changes for s in ("old", "new") if c[f"{s}_mode"] not in ("000000", "160000")]
    contents = blobs(repo, ids)
    before, after = side(changes, contents, "old"), side(changes, contents, "new")
    ours, theirs = scratch / "ours", scratch / "git"
    for directory in (ours, theirs):
        subprocess.run(["rm", "-rf", str(directory)], check=True)
        directory.mkdir()
        write_tree(directory, before)
    outcome, detail = apply_ours(ours, diff)
    git_run = subprocess.run(
        ["git", "apply", "--binary", "-"], input=diff, cwd=theirs, env=GIT_ENV, capture_output=True
    )
    git_tree, our_tree = read_tree(theirs), read_tree(ours)
    git_ok = git_run.returncode == 0 and git_tree == after
    if outcome == "applied":
        outcome = "identical" if our_tree == after and (git_ok or git_run.returncode) else "different"
        if outcome == "different":
            wrong = sorted(p for p in set(our_tree) | set(after) if our_tree.get(p) != after.get(p))
            detail = ", ".join(wrong[:3])
    elif our_tree != before:
        outcome, detail = "different", "a refused patch changed files"
    return {
        "commit": commit,
        "parent": parent,
        "diff": diff,
        "before": before,
        "after": after,
        "changes": changes,
        "contents": contents,
        "git_ok": git_ok,
        "outcome": outcome,
        "detail": detail,
    }


# ----- model-style variants of one file's diff -------------------------------------------------------------------


def variants(section: bytes) -> dict[str, bytes]:
    head, _, body = section.partition(b"\n@@")
    body = b"@@" + body
    shifted = HUNK.sub(lambda m: _header(m, 17), body)
    zero = HUNK.sub(b"@@ -0,0 +0,0 @@", body)
    bare = HUNK.sub(b"@@", body)
    stripped = re.sub(rb"(?m)^ [ \t]+", b" ", body)
    out = {"shifted +17": shifted, "@@ -0,0 +0,0 @@": zero, "bare @@": bare, "context unindented": stripped}
    out["bare @@, context unindented"] = re.sub(rb"(?m)^ [ \t]+", b" ", bare)
    return {name: head + b"\n" + text for name, text in out.items()}


def _header(match: re.Match, shift: int) -> bytes:
    old, old_count, new, new_count = match.groups()
    old_count = b"," + old_count if old_count else b""
    new_count = b"," + new_count if new_count else b""
    return b"@@ -%d%s +%d%s @@" % (int(old) + shift, old_count, int(new) + shift, new_count)


def run_variants(repo: str, record: dict, scratch: Path, tally: collections.Counter, wrong: list[str]) -> None:
    for change in record["changes"]:
        if change["status"] != "M" or change["old_mode"] != change["new_mode"]:
            continue
        old = record["contents"][change["old_blob"]]
        if b"\0" in old[:8000]:
            continue
        tried = {}
        for context in ("-U3", "-U1"):  # short context repeats more often
            section = git(repo, "diff", context, record["parent"], record["commit"], "--", change["old"])
            if b"\n@@" in section:
                tried |= {f"{context} {name}": text for name, text in variants(section).items()}
        for name, text in tried.items():
            root = scratch / "variant"
            subprocess.run(["rm", "-rf", str(root)], check=True)
            root.mkdir()
            write_tree(root, {change["old"]: (old, False)})
            outcome, detail = apply_ours(root, text)
            result = (root / change["old"]).read_bytes()
            expected = record["contents"][change["new_blob"]]
            if outcome == "applied":
                outcome = "right" if result == expected else "WRONG"
            elif result != old:
                outcome = "WRONG"
            tally[(name, outcome)] += 1
            if outcome in ("WRONG", "exception"):
                wrong.append(f"{record['commit'][:10]} {change['old']} [{name}] {detail}")


# ----- selection, report, fixtures -------------------------------------------------------------------------------


def select(repo: str, count: int) -> list[tuple[str, str]]:
    """(commit, parent) pairs: those with rarer features first (up to half), then the most recent."""
    try:
        log = git(repo, "log", "--no-merges", "-M", "--raw", "--numstat", "--format=@%H %P", "HEAD")
    except RuntimeError:  # a partial mirror: trees missing; the most recent commits, plainly
        log = git(repo, "log", "--no-merges", "--format=@%H %P", f"-{count}", "HEAD")
    log = log.decode("utf-8", "replace")
    commits, interesting = [], []
    for block in log.split("\n@")[0:]:
        lines = block.lstrip("@").split("\n")
        ids = lines[0].split()
        if len(ids) != 2:
            continue
        commits.append((ids[0], ids[1]))
        body = "\n".join(lines[1:])
        if re.search(r"\tR\d+|^-\t-\t|^:100644 100755|^:100755 100644|\t\"", body.replace(" R", "\tR"), re.M):
            interesting.append((ids[0], ids[1]))
    chosen = interesting[: count // 2]
    chosen += [pair for pair in commits if pair not in set(chosen)][: count - len(chosen)]
    return chosen


MAX_CASE_BYTES = 60_000  # a saved case (diff, files before and after) stays small: the test data is kept in git


def save_fixtures(path: Path, repo_name: str, records: list[dict], per_class: int, licence: str) -> None:
    """The smallest identical cases of each class (`per_class` of each): parent files, diff, commit's files."""
    cases = [_case(r) for r in records if r["outcome"] == "identical" and r["git_ok"]]
    cases = sorted((c for c in cases if len(json.dumps(c)) <= MAX_CASE_BYTES), key=lambda c: len(json.dumps(c)))
    picked: dict[str, dict] = {}
    for name in sorted({n for c in cases for n in c["classes"] or ["plain"]}):
        for case in [c for c in cases if name in (c["classes"] or ["plain"])][:per_class]:
            picked.setdefault(case["commit"], case)
    body = {"source": f"https://github.com/{repo_name}", "licence": licence, "cases": list(picked.values())}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=0, ensure_ascii=False) + "\n")


def _case(record: dict) -> dict:
    return {
        "commit": record["commit"],
        "parent": record["parent"],
        "classes": record["classes"][1:],
        "diff": _encoded(record["diff"]),
        "before": _files(record["before"]),
        "after": _files(record["after"]),
    }


def _encoded(data: bytes) -> dict:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def _files(files: dict[str, tuple[bytes, bool]]) -> dict:
    return {path: {**_encoded(data), "executable": executable} for path, (data, executable) in sorted(files.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repos", nargs="+", help="bare git directories (fetch mirrors), NAME=PATH to set the class")
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--variants", action="store_true")
    parser.add_argument("--save", type=Path, help="directory for fixture JSON files (one per repository)")
    parser.add_argument("--save-count", type=int, default=2, help="cases saved per class")
    parser.add_argument("--licence", action="append", default=[], help="NAME=LICENCE for saved fixtures")
    args = parser.parse_args()
    licences = dict(item.split("=", 1) for item in args.licence)
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    reasons: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    odd: list[str] = []
    variant_tally: collections.Counter = collections.Counter()
    variant_wrong: list[str] = []
    started = time.time()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        os.environ["GIT_CEILING_DIRECTORIES"] = scratch_name
        for spec in args.repos:
            label, _, repo = spec.rpartition("=")
            name = "/".join(Path(repo).parent.name.split("+", 1))
            label = label or name
            records = []
            try:
                chosen = select(repo, args.commits)
            except RuntimeError as exc:
                odd.append(f"{label}: history unreadable ({str(exc)[:80]})")
                continue
            for number, (commit, parent) in enumerate(chosen):
                try:
                    record = run_commit(repo, commit, parent, quote_path=number % 2 == 0, scratch=scratch)
                except (RuntimeError, KeyError, ValueError) as exc:  # objects missing from a partial mirror
                    table[f"{label}: unreadable"]["commits"] += 1
                    odd.append(f"{label} {commit[:10]} unreadable: {str(exc)[:80]}")
                    continue
                record["classes"] = classes(label, record["changes"], record["diff"], record["contents"])
                for cls in [*record["classes"], "all"]:
                    if cls == "all" and "symlink/gitlink (excluded)" in record["classes"]:
                        continue
                    row = table[cls]
                    row["commits"] += 1
                    row["git applies"] += record["git_ok"]
                    row[record["outcome"]] += 1
                    row[f"{record['outcome']} (git applies)"] += record["git_ok"]
                    if record["outcome"] == "refused":
                        reasons[cls][record["detail"]] += 1
                if record["outcome"] in ("different", "exception"):
                    odd.append(f"{label} {commit[:10]} {record['outcome']}: {record['detail']}")
                if args.variants and "symlink/gitlink (excluded)" not in record["classes"]:
                    run_variants(repo, record, scratch, variant_tally, variant_wrong)
                records.append(record)
            if args.save:
                licence = licences.get(label, licences.get(name, "see the repository"))
                save_fixtures(args.save / f"{label.replace('/', '_')}.json", name, records, args.save_count, licence)
    report(table, reasons, odd, variant_tally, variant_wrong, time.time() - started)


def report(table, reasons, odd, variant_tally, variant_wrong, seconds: float) -> None:
    columns = ("commits", "git ok", "ident.", "refused", "diff.", "exc.")
    print(f"{'class':30} " + " ".join(f"{name:>7}" for name in columns) + "  ident./git ok")
    for cls in sorted(table, key=lambda c: (c == "all", c)):
        row = table[cls]
        applied = row["identical (git applies)"]
        share = f"{100 * applied / row['git applies']:.1f}%" if row["git applies"] else "-"
        print(
            f"{cls:30} {row['commits']:>7} {row['git applies']:>7} {row['identical']:>7} {row['refused']:>7} "
            f"{row['different']:>7} {row['exception']:>7}  {share}"
        )
    print("\nrefusals by reason:")
    for cls in sorted(reasons):
        for why, count in reasons[cls].most_common(6):
            print(f"  {cls:30} {count:>5}  {why}")
    if odd:
        print("\ndifferent / exceptions / unreadable:")
        print("\n".join(f"  {line}" for line in odd[:40]))
    if variant_tally:
        print("\nmodel-style variants (one file's diff rewritten):")
        names = sorted({name for name, _ in variant_tally})
        for name in names:
            counts = {o: variant_tally[(name, o)] for o in ("right", "refused", "WRONG", "exception")}
            print(f"  {name:30} " + "  ".join(f"{o} {n}" for o, n in counts.items()))
        print("\n".join(f"  {line}" for line in variant_wrong[:30]))
    print(f"\n{seconds:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
