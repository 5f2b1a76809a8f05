"""code_outline against universal-ctags: of the definitions ctags finds in each file, how many our outline has.

A ctags tag (name, line) counts as found when the outline has a definition of that name spanning that line, whose
signature names it when the name is on one of its first three lines (a return type or template line of its own;
further down, as in `typedef struct {...} name;`, the signature is the first line).
ctags' generated names (AnonymousFunction..., __anon...) and Java package statements are left out.

python3 -m warpcode.bench.outline_vs_ctags PATH [PATH...] [--show 5]     # files or folders
python3 -m warpcode.bench.outline_vs_ctags --record tests/tools/fixtures/ctags   # ctags' tags, kept for the tests
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from warpcode.tools.languages import language_of
from warpcode.tools.tags import Definition, extract_tags

EXPECTED = "expected.json"
GENERATED_NAMES = ("AnonymousFunction", "__anon")
NOT_DEFINITIONS = {"package"}  # Java's `package a.b;` names where the file belongs, it defines nothing in it


def ctags_definitions(path: Path) -> list[tuple[str, int, str]]:
    done = subprocess.run(
        ["ctags", "--output-format=json", "--fields=+n", "-f", "-", path.name],
        cwd=path.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    tags = set()
    for record in done.stdout.splitlines():
        tag = json.loads(record)
        if tag["name"].startswith(GENERATED_NAMES) or tag["kind"] in NOT_DEFINITIONS:
            continue
        tags.add((tag["name"], tag["line"], tag["kind"]))
    return sorted(tags, key=lambda tag: (tag[1], tag[0]))


def is_found(name: str, line: int, outline: list[Definition]) -> bool:
    spelled = name.replace(" ", "")  # ctags writes `operator =` for `operator=`
    return any(
        d.name == name
        and d.start_line <= line <= d.end_line
        and (line - d.start_line > 2 or spelled in d.signature.replace(" ", ""))
        for d in outline
    )


def coverage(files: list[Path], tags_of: dict[Path, list[tuple[str, int, str]]], show: int) -> dict[str, list[int]]:
    """language -> [found, total], printing up to `show` misses per file."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path in files:
        source = path.read_bytes()
        language = language_of(path.name, source)
        outline = extract_tags(source, language).definitions  # type: ignore[arg-type]
        missed = [tag for tag in tags_of[path] if not is_found(tag[0], tag[1], outline)]
        totals[language][0] += len(tags_of[path]) - len(missed)  # type: ignore[index]
        totals[language][1] += len(tags_of[path])  # type: ignore[index]
        for name, line, kind in missed[:show]:
            print(f"  missed {path.name}:{line} {kind} {name}")
    return dict(totals)


def record(folder: Path) -> None:
    files = sorted(path for path in folder.iterdir() if language_of(path.name))
    tags = {path.name: [list(tag) for tag in ctags_definitions(path)] for path in files}
    version = subprocess.run(["ctags", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    rows = ",\n".join(f"{json.dumps(name)}: {json.dumps(found)}" for name, found in tags.items())
    (folder / EXPECTED).write_text(f'{{"ctags": {json.dumps(version)}, "tags": {{\n{rows}\n}}}}\n', encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--show", type=int, default=5, help="misses shown per file")
    parser.add_argument("--record", type=Path, help="write ctags' definitions of the files of this folder")
    args = parser.parse_args()
    if shutil.which("ctags") is None:
        print("universal-ctags (ctags) is not installed", file=sys.stderr)
        return 2
    if args.record:
        record(args.record)
        return 0
    files = sorted(
        file
        for path in args.paths
        for file in (path.rglob("*") if path.is_dir() else [path])
        if file.is_file() and language_of(file.name)
    )
    totals = coverage(files, {path: ctags_definitions(path) for path in files}, args.show)
    for language, (found, total) in sorted(totals.items()):
        print(f"{language}: {found} of {total} ctags definitions found ({100 * found / max(total, 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
