"""Writes a variant of a device's tuned-config file with some entries changed, into a folder of its own, to time it
in the model: each variant runs in a process of its own under WARPCODE_TUNED_CONFIG_FOLDER=FOLDER (read once per
process; kernels/tuning.py; `gpu_session.py mx-configs --config-variant FOLDER` times MX decode under each).

    python3 experiments/config_variant.py FOLDER "warp_decode/2048,768,128,8,mx/2,4,8: down_first_tile_early=true"
    python3 experiments/config_variant.py FOLDER "warp_decode/2048,768,128,8,mx/1: down_on_mma=true, down_rows=64, \\
        down_cols=128, down_warps=2, down_stages=3"
    python3 experiments/config_variant.py FOLDER "decode_attention: one_tile_warps=4" "route: prefetch_rows=0"
    WARPCODE_TUNED_CONFIG_FOLDER=FOLDER python3 -m warpcode.agent bench decode ...

A change is SECTION/KEY/BUCKETS: FIELD=VALUE, ... for the tables of shapes and buckets (warp_decode, expert_centric,
gemv, gemv_mx: an entry that does not exist yet starts empty, the class's defaults) or SECTION: FIELD=VALUE, ... for a
kernel's settings (decode_attention, prefill_attention, route, o_proj_router; mx_linear's max_rows: its tiles are
experiments/mx_linear_variant.py's); values are JSON (`null` removes the field). The changed entries must still make
valid launch configs. The variant starts from the shipped file of --device (the H200's by default); the file it writes
is named for that device, as the launchers look it up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from warpcode.bench.config_file import write_config_file
from warpcode.kernels.attention_splits import DecodeAttentionSettings
from warpcode.kernels.gemv import GemvConfig
from warpcode.kernels.mx_linear import MxLinearSettings
from warpcode.kernels.o_proj_router import OProjRouterSettings
from warpcode.kernels.prefill_attention import PrefillAttentionSettings
from warpcode.kernels.route import RouteSettings
from warpcode.kernels.tuning import CONFIG_FOLDER, GroupedGemmConfig, WarpDecodeConfig, device_file_name

# Sections of entries by shape key and bucket, and the class of their entries.
BUCKET_SECTIONS = {
    "warp_decode": WarpDecodeConfig,
    "expert_centric": GroupedGemmConfig,
    "gemv": GemvConfig,
    "gemv_mx": GemvConfig,
}
# Sections of one kernel's settings.
SETTINGS_SECTIONS = {
    "decode_attention": DecodeAttentionSettings,
    "prefill_attention": PrefillAttentionSettings,
    "route": RouteSettings,
    "o_proj_router": OProjRouterSettings,
    "mx_linear": MxLinearSettings,
}


def parse_change(text: str) -> tuple[str, str | None, list[str], dict]:
    """ "SECTION/KEY/BUCKETS: FIELD=VALUE, ..." or "SECTION: FIELD=VALUE, ..." -> (section, key or None, buckets,
    {field: value or None})."""
    where, _, assignments = text.partition(":")
    parts = where.strip().split("/")
    if not assignments.strip() or len(parts) not in (1, 3):
        raise ValueError(f"expected SECTION/KEY/BUCKETS: FIELD=VALUE, ... or SECTION: FIELD=VALUE, ..., got {text!r}")
    section = parts[0]
    if section not in (*BUCKET_SECTIONS, *SETTINGS_SECTIONS):
        raise ValueError(f"unknown section {section!r}: one of {', '.join([*BUCKET_SECTIONS, *SETTINGS_SECTIONS])}")
    if (len(parts) == 3) != (section in BUCKET_SECTIONS):
        form = "SECTION/KEY/BUCKETS" if section in BUCKET_SECTIONS else "SECTION"
        raise ValueError(f"{section} takes {form}: FIELD=VALUE, ..., got {text!r}")
    fields = {}
    for assignment in assignments.split(","):
        name, equals, value = assignment.partition("=")
        if not equals:
            raise ValueError(f"expected FIELD=VALUE, got {assignment.strip()!r} in {text!r}")
        try:
            fields[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{name.strip()}'s value {value.strip()!r} is not JSON (true, 128, null)") from None
    if section == "mx_linear" and "tiles" in fields:
        raise ValueError("mx_linear's tiles are changed by experiments/mx_linear_variant.py")
    return section, (parts[1] if len(parts) == 3 else None), (parts[2].split(",") if len(parts) == 3 else []), fields


def changed(entry: dict, fields: dict, config_class: type, where: str) -> dict:
    """entry with fields set (None: removed), checked to make a config of config_class."""
    entry = {name: value for name, value in {**entry, **fields}.items() if value is not None}
    try:
        config_class(**entry)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where} would not be a valid config: {error}") from None
    return dict(sorted(entry.items()))


def apply_change(data: dict, section: str, key: str | None, buckets: list[str], fields: dict) -> None:
    if key is None:
        data[section] = changed(data.get(section, {}), fields, SETTINGS_SECTIONS[section], section)
        return
    entries = data.setdefault(section, {}).setdefault(key, {})
    for bucket in buckets:
        if not bucket.isdigit():
            raise ValueError(f"{section}/{key}: bucket {bucket!r} is not a token count")
        where = f"{section}/{key}/{bucket}"
        entries[bucket] = changed(entries.get(bucket, {}), fields, BUCKET_SECTIONS[section], where)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the variant's folder (WARPCODE_TUNED_CONFIG_FOLDER)")
    parser.add_argument("changes", nargs="+", help='"SECTION/KEY/BUCKETS: FIELD=VALUE, ..." or "SECTION: ..."')
    parser.add_argument("--device", default="NVIDIA H200", help="the device (torch.cuda.get_device_name())")
    args = parser.parse_args(argv)
    name = device_file_name(args.device)
    base = CONFIG_FOLDER / name
    data = json.loads(base.read_text()) if base.exists() else {}
    try:
        for change in args.changes:
            apply_change(data, *parse_change(change))
    except ValueError as error:
        print(f"config_variant: {error}", file=sys.stderr)
        return 2
    write_config_file(args.folder / name, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
