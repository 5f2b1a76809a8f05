"""Our search against ripgrep on the same files: for each regex, the set of (file, line) each reports.

The files are the ones our search reads (its walk, less binary and oversized files); ripgrep is handed them by
name, so its own ignore and hidden-file rules play no part and only the matching is compared.

python3 -m warpcode.bench.search_vs_ripgrep ROOT [ROOT...] [--show 3]
python3 -m warpcode.bench.search_vs_ripgrep --record tests/tools/fixtures/ripgrep  # ripgrep's answers, for the tests
python3 -m warpcode.bench.search_vs_ripgrep --record-globs TREE tests/tools/fixtures/ripgrep_globs.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from warpcode.tools import Workspace, search
from warpcode.tools.text_search import BINARY_SUFFIXES, MAX_FILE_BYTES
from warpcode.tools.textcodec import looks_binary

# (regex, ignore_case): whitespace at line ends, anchors, alternations, classes, Unicode, case folding.
PATTERNS = [
    (r"\s+$", False),
    (r"^\s*$", False),
    (r"^$", False),
    (r"[ \t]+$", False),
    (r"^\s+return\b", False),
    (r"^#\s*(if|ifdef|ifndef|else|endif)\b", False),
    (r"^(def|class|function|static|public|export)\b", False),
    (r"TODO|FIXME|XXX", False),
    (r"todo|fixme", True),
    (r"(?i)^import", False),
    (r"\w+\(\)$", False),
    (r";\s*$", False),
    (r"[^\x00-\x7F]", False),
    (r"\p{Lu}\p{Ll}+", False),
    (r"é|ü|ö|→|—|…", False),
    (r"^\w+$", False),
    (r"\d+\.\d+", False),
    (r'"[^"]*"', False),
    (r"\t", False),
    (r"\S\s{2,}\S", False),
    (r".{100,}", False),
    (r"\Aimport", False),
    (r"\}\z", False),
    (r"[^\s]+\s+$", False),
    (r"\W$", False),
    (r"^[[:upper:]]", False),
    (r"error|warning|fail", True),
    (r"STRASSE|straße", True),
    (r"^", False),
    (r"$", False),
    (r"x*", False),
    (r"\S+", False),
    (r"(?s)a.b", False),
    (r"[^\n]{80}", False),
    (r"[\w-]+\.(js|py|h)\b", False),
    (r"[^\w\s]{3,}", False),
    (r"\w+é|é\w+", False),
    (r"\p{Greek}|\p{Han}|\p{Cyrillic}", False),
    (r"[À-ÿ]", True),
    (r"TODO\(|XXX:", False),
    (r"^\s*[#/]", False),
    (r"\.$", False),
    (r"^.{0,3}$", False),
    (r"\r$", False),
    (r"\bif\b.*\belse\b", False),
    (r"\x{A0}|\x{2003}", False),
]


EXPECTED = "expected.json"


def searched_files(ws: Workspace) -> list[str]:
    files = []
    for entry in ws.walk():
        suffix = entry.rel[entry.rel.rfind(".") :].lower() if "." in entry.rel else ""
        if suffix in BINARY_SUFFIXES or entry.size > MAX_FILE_BYTES:
            continue
        with open(entry.path, "rb") as handle:
            if not looks_binary(handle.read()):
                files.append(entry.rel)
    return files


def ripgrep_lines(root: Path, files: list[str], pattern: str, ignore_case: bool) -> set[tuple[str, int]] | str:
    found: set[tuple[str, int]] = set()
    case = ["-i"] if ignore_case else []
    command = ["rg", "--no-config", "-n", "-H", "--no-heading", "--null", *case, "-e", pattern]
    for start in range(0, len(files), 400):
        done = subprocess.run(
            [*command, "--", *files[start : start + 400]],
            cwd=root,
            capture_output=True,
        )
        if done.returncode == 2:
            return done.stderr.decode(errors="replace").strip().splitlines()[0]
        for record in done.stdout.splitlines():
            name, _, rest = record.partition(b"\0")
            found.add((name.decode(), int(rest.split(b":", 1)[0])))
    return found


def our_lines(ws: Workspace, pattern: str, ignore_case: bool) -> set[tuple[str, int]] | str:
    try:
        result = search(ws, pattern, ignore_case=ignore_case, max_matches=10**9)
    except Exception as exc:  # a refusal is a result to compare, not a crash of the script
        return f"{type(exc).__name__}: {exc}"
    return {(match.path, match.line) for match in result.matches}


def record(folder: Path) -> None:
    """ripgrep's line numbers for every pattern and fixture file, into folder/expected.json."""
    files = sorted(path.name for path in folder.iterdir() if path.name not in (EXPECTED, "SOURCES.md"))
    version = subprocess.run(["rg", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    answers = []
    for pattern, ignore_case in PATTERNS:
        found = ripgrep_lines(folder, files, pattern, ignore_case)
        assert not isinstance(found, str), found
        by_file = {name: sorted(line for rel, line in found if rel == name) for name in files}
        lines = {name: found_lines for name, found_lines in by_file.items() if found_lines}
        answers.append({"pattern": pattern, "ignore_case": ignore_case, "lines": lines})
    # One regex a line: a diff of the recording stays legible.
    rows = ",\n".join(json.dumps(answer, ensure_ascii=False) for answer in answers)
    header = json.dumps({"ripgrep": version, "files": files})[:-1]
    (folder / EXPECTED).write_text(f'{header}, "answers": [\n{rows}\n]}}\n', encoding="utf-8")


# Globs on which ripgrep and .gitignore agree. Where they do not, search follows .gitignore (globs.py): a bare
# directory name (`lib`) selects nothing in ripgrep, and `test/*` leaves out test/'s subfolders.
GLOBS = ["*.{js,md}", "!test/**", "!test", "!*.js", "lib/*.js", "/lib/*.js", "**/acceptance/*.js", "examples/**/*.js",
         "{lib,examples}/**", "test/**/*.js", "!examples/", "*.JS", "*.{json,yml}", "[A-Z]*"]  # fmt: skip


def record_globs(tree: Path, out: Path) -> None:
    """The tree's paths and the files ripgrep selects with each of GLOBS."""
    paths = sorted(entry.rel for entry in Workspace(tree).walk())
    selected = {}
    for glob in GLOBS:
        listed = subprocess.run(
            ["rg", "--no-config", "--hidden", "--files", "--null", "-g", glob, "-g", "!.git"],
            cwd=tree, capture_output=True, stdin=subprocess.DEVNULL,
        ).stdout  # fmt: skip
        selected[glob] = sorted(name for name in listed.decode().split("\0") if name)
    out.write_text(json.dumps({"paths": paths, "globs": selected}, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", type=Path)
    parser.add_argument("--show", type=int, default=3, help="differing lines shown per regex")
    parser.add_argument("--record", type=Path, help="write ripgrep's answers on the files of this folder")
    parser.add_argument("--record-globs", nargs=2, type=Path, metavar=("TREE", "OUT"), help="write ripgrep's globs")
    args = parser.parse_args()
    if shutil.which("rg") is None:
        print("ripgrep (rg) is not installed", file=sys.stderr)
        return 2
    if args.record:
        record(args.record)
        return 0
    if args.record_globs:
        record_globs(*args.record_globs)
        return 0
    equal = total = 0
    for root in args.roots:
        ws = Workspace(root)
        files = searched_files(ws)
        print(f"{root}: {len(files)} files")
        for pattern, ignore_case in PATTERNS:
            started = time.monotonic()
            ours = our_lines(ws, pattern, ignore_case)
            seconds = time.monotonic() - started
            theirs = ripgrep_lines(root, files, pattern, ignore_case)
            total += 1
            shown = f"/{pattern}/{'i' if ignore_case else ''}"
            if isinstance(ours, str) or isinstance(theirs, str):
                print(f"  ERROR  {shown}: ours={ours if isinstance(ours, str) else len(ours)} "
                      f"rg={theirs if isinstance(theirs, str) else len(theirs)}")  # fmt: skip
                continue
            if ours == theirs:
                equal += 1
                print(f"  equal  {shown}: {len(theirs)} lines ({seconds:.2f} s)")
                continue
            extra, missing = sorted(ours - theirs), sorted(theirs - ours)
            print(f"  DIFF   {shown}: ours {len(ours)}, rg {len(theirs)}; +{len(extra)} -{len(missing)}")
            for rel, line in extra[: args.show] + missing[: args.show]:
                sign = "+" if (rel, line) in ours else "-"
                text = (root / rel).read_bytes().split(b"\n")[line - 1][:100]
                print(f"      {sign} {rel}:{line}: {text!r}")
    print(f"{equal} of {total} (regex, tree) pairs give ripgrep's line set")
    return 0 if equal == total else 1


if __name__ == "__main__":
    sys.exit(main())
