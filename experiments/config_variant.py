"""Writes a copy of the kernel config file with some entries changed, to time config variants in the model, each in
a process of its own (`WARPCODE_WARP_DECODE_CONFIGS=FILE`; `gpu_session.py mx-configs` runs decode under each).

    python3 experiments/config_variant.py OUT.json "configs/2048,768,128,8,mx/2,4,8: down_first_tile_early=true"
    python3 experiments/config_variant.py OUT.json "configs/2048,768,128,8,mx/1: down_on_mma=true, down_rows=64, \\
        down_cols=128, down_warps=2, down_stages=3"

A change is SECTION/KEY/BUCKETS: FIELD=VALUE, ... (values as JSON; `null` removes the field). The changed entries
must still make valid launch configs (WarpDecodeConfig for "configs", GroupedGemmConfig for "expert_centric").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from warpcode.kernels.tuning import CONFIG_FILE, CONFIG_SECTIONS, write_config_file


def parse_change(text: str) -> tuple[str, str, list[str], dict]:
    """ "SECTION/KEY/BUCKETS: FIELD=VALUE, ..." -> (section, key, buckets, {field: value or None})."""
    where, _, assignments = text.partition(":")
    parts = where.strip().split("/")
    if len(parts) != 3 or not assignments.strip():
        raise ValueError(f"expected SECTION/KEY/BUCKETS: FIELD=VALUE, ..., got {text!r}")
    section, key, buckets = parts
    if section not in CONFIG_SECTIONS:
        raise ValueError(f"unknown section {section!r}: one of {', '.join(CONFIG_SECTIONS)}")
    fields = {}
    for assignment in assignments.split(","):
        name, equals, value = assignment.partition("=")
        if not equals:
            raise ValueError(f"expected FIELD=VALUE, got {assignment.strip()!r} in {text!r}")
        try:
            fields[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{name.strip()}'s value {value.strip()!r} is not JSON (true, 128, null)") from None
    return section, key, buckets.split(","), fields


def apply_change(data: dict, section: str, key: str, buckets: list[str], fields: dict) -> None:
    entries = data.get(section, {}).get(key)
    if entries is None:
        raise ValueError(f"the config file has no {section}/{key}")
    for bucket in buckets:
        if bucket not in entries:
            raise ValueError(f"{section}/{key} has no bucket {bucket} (it has {', '.join(sorted(entries, key=int))})")
        entry = {**entries[bucket], **fields}
        entry = {name: value for name, value in entry.items() if value is not None}
        try:
            CONFIG_SECTIONS[section](**entry)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{section}/{key}/{bucket} would not be a valid config: {error}") from None
        entries[bucket] = dict(sorted(entry.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where the variant goes")
    parser.add_argument("changes", nargs="+", help='"SECTION/KEY/BUCKETS: FIELD=VALUE, ..."')
    parser.add_argument("--base", type=Path, default=CONFIG_FILE, help="the file to start from (the package's)")
    args = parser.parse_args(argv)
    data = json.loads(args.base.read_text())
    try:
        for change in args.changes:
            apply_change(data, *parse_change(change))
    except ValueError as error:
        print(f"config_variant: {error}", file=sys.stderr)
        return 2
    write_config_file(args.out, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
