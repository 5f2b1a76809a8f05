"""Small site-packages folders for the training tests: distributions with dist-info metadata (licence fields as real
packages write them) and a RECORD listing their files, holding copies of standard-library modules as code."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def add_distribution(site: Path, name: str, files: dict[str, str | Path], metadata: str) -> None:
    """`files`: path in site-packages -> its text, or a standard-library module to copy there."""
    listed = []
    for relative, source in files.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copy(STDLIB / source, target)
        else:
            target.write_text(source)
        listed.append(relative)
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.4\nName: {name}\nVersion: 1.0\n{metadata}\n")
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in [*listed, f"{info.name}/METADATA"]))


def code_site(site: Path) -> Path:
    """Two permissive packages, one that is held out by its name (`six`), and one under the GPL that is left out."""
    modules = ["argparse.py", "textwrap.py", "shlex.py", "difflib.py", "csv.py", "dataclasses.py", "json/decoder.py"]
    add_distribution(site, "alpha", {f"alpha/{m}": Path(m) for m in modules}, "License-Expression: MIT")
    add_distribution(site, "six", {f"six/{m}": Path(m) for m in ("string.py", "fnmatch.py", "glob.py")},
                     "License: MIT")  # fmt: skip
    add_distribution(site, "gamma", {"gamma/heapq.py": Path("heapq.py")}, "License-Expression: GPL-3.0-only")
    return site
