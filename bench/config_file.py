"""The tuners' writes into a device's tuned-config file (kernels/configs/<device>.json, read by kernels/tuning.py).

The tuners name the file: the shipped one of the GPU they ran on (`--write kernels/configs/NVIDIA_H200.json`), or
one in a folder of variants to measure (WARPCODE_TUNED_CONFIG_FOLDER, experiments/config_variant.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path


def config_entry(config: object) -> dict:
    """The config's fields as the config file holds them: options left off (None, as no register cap, or False, as
    kernel 2 on CUDA cores) left out."""
    return {name: value for name, value in asdict(config).items() if value is not None and value is not False}


def update_config_file(path: Path, section: str, key: str, entries: object, replace: bool) -> None:
    """Writes `entries` under data[section][key] of the JSON config file at `path` (created if missing), replacing
    what the key held or merging into it; the file's other sections and keys stay as they were."""
    data = json.loads(path.read_text()) if path.exists() else {}
    held = data.setdefault(section, {})
    if replace:
        held[key] = entries
    else:
        held.setdefault(key, {}).update(entries)
    write_config_file(path, data)


def write_config_file(path: Path, data: dict) -> None:
    """The config file's text: sorted keys, one space of indent (diffs stay small), created with its folder; written
    to a temporary file first and renamed, so that a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    temporary.replace(path)
