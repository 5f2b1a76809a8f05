"""Time edit_file's "not found" error, nearest candidates included, on a large file.

A 10,000-line file and an old_text of N lines copied from its middle, every third line stale (as a model's
outdated copy): no tolerance level matches, so the error searches for the closest region. Prints seconds per
size and whether the region it shows starts where the copy came from.

    python -m warpcode.bench.time_edit_not_found            # 200 and 800 lines in 10,000
    python -m warpcode.bench.time_edit_not_found --sizes 800 --lines 10000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from warpcode.tools import EditNotFound, Workspace, edit_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=10_000, help="lines in the file")
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 800], help="lines of old_text")
    args = parser.parse_args()
    lines = [f"    value_{n} = compute({n}, {n * 7 % 13})\n" for n in range(args.lines)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        (root / "big.py").write_text("".join(lines))
        ws = Workspace(root, state_dir=Path(tmp) / "state")
        begin = args.lines // 2
        for size in args.sizes:
            copy = lines[begin : begin + size]
            stale = [line.replace("compute", "calc") if n % 3 == 0 else line for n, line in enumerate(copy)]
            started = time.perf_counter()
            try:
                edit_file(ws, "big.py", "".join(stale), "x = 1\n")
            except EditNotFound as error:
                seconds = time.perf_counter() - started
                found = f"{begin + 1:>6}\t{lines[begin].rstrip()}" in str(error)
                print(f"old_text {size} lines in {args.lines}: {seconds:.3f} s, candidate at line {begin + 1}: {found}")
            else:
                raise SystemExit("the stale old_text was applied: the timing would measure nothing")


if __name__ == "__main__":
    main()
