"""A warpcode source tree made importable on the device machine: this checkout, or a base tree unpacked from a
tarball for an A/B in one call (`git archive REF -o ab_base.tar` here: an untracked file in the repository root
travels with the working tree).

The device machine starts bare and reaches no network, so everything installs offline: carried wheels with
`--no-index` into a folder put on PYTHONPATH, and the tree itself with `pip install --no-deps -e` (its own
pyproject says which folder is which `warpcode.*` package, so a base tree from before a move installs as it was).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import TextIO

SITE = Path("/tmp/site")  # where carried wheels go (pip --target)
# The folders of the `warpcode` namespace, linked by hand when the editable install does not import.
NAMESPACE_FOLDERS = ("agent", "tools", "kernels", "model_runtime", "bench")
IMPORT_CHECK = "import warpcode.kernels, warpcode.agent.cli"


def unpack(tarball: Path, dest: Path) -> Path:
    """DEST, emptied, holding the tarball's tree."""
    if not tarball.is_file():
        raise FileNotFoundError(
            f"no base tree {tarball}: make one in the repository root with `git archive REF -o {tarball.name}` "
            "(an untracked file there travels with the call), or name one with --base-tarball"
        )
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        archive.extractall(dest, filter="data")
    return dest


def install_wheels(folder: Path, log: TextIO, env: dict[str, str]) -> dict[str, str]:
    """Installs the wheels carried in FOLDER into SITE; returns the environment change (SITE first on PYTHONPATH),
    none when the folder holds no wheels."""
    wheels = sorted(str(wheel) for wheel in folder.glob("*.whl"))
    if not wheels:
        return {}
    pip = ["python3", "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir"]
    subprocess.run([*pip, "--upgrade", "--target", str(SITE), *wheels], stdout=log, stderr=subprocess.STDOUT, env=env)
    return {"PYTHONPATH": _prepend(SITE, env)}


def install(tree: Path, log: TextIO, env: dict[str, str]) -> dict[str, str]:
    """`pip install -e TREE` (offline); returns the environment change that makes TREE the imported warpcode: none,
    or, where the editable install does not import (seen once on the device image), a folder of links
    warpcode/NAME -> TREE/NAME first on PYTHONPATH."""
    pip = ["python3", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", "."]
    log.flush()
    subprocess.run(pip, cwd=tree, stdout=log, stderr=subprocess.STDOUT, env=env)
    # From /tmp, so that the folders of the current directory do not stand in for the install.
    check = subprocess.run(["python3", "-c", IMPORT_CHECK], cwd="/tmp", stdout=log, stderr=subprocess.STDOUT, env=env)
    if check.returncode == 0:
        return {}
    linked = Path(f"/tmp/warpcode-src-{tree.resolve().name}")
    (linked / "warpcode").mkdir(parents=True, exist_ok=True)
    for folder in NAMESPACE_FOLDERS:
        link = linked / "warpcode" / folder
        if link.is_symlink():
            link.unlink()
        if (tree / folder).is_dir():
            link.symlink_to((tree / folder).resolve())
    log.write(f"the editable install of {tree} does not import: importing it from {linked} instead\n")
    return {"PYTHONPATH": _prepend(linked, env)}


def _prepend(folder: Path, env: dict[str, str]) -> str:
    return os.pathsep.join(part for part in (str(folder), env.get("PYTHONPATH", "")) if part)
