"""Writes a variant of a device's tuned-config file with mx_linear's tiles at decode batches (up to 32 rows) replaced,
to decide the tile in the model: alone a tile can win and lose inside the step, where PDL starts it beside its
neighbours. Each variant runs in a process of its own under WARPCODE_TUNED_CONFIG_FOLDER=FOLDER.

    python3 experiments/mx_linear_variant.py FOLDER "block_n=64,num_warps=4"
    python3 experiments/mx_linear_variant.py FOLDER "qkv:block_n=32,num_warps=2|oproj:programs=2"
    WARPCODE_TUNED_CONFIG_FOLDER=FOLDER python3 -m warpcode.agent bench decode --preset qwen3-30b-a3b ...

SPEC is parts joined by "|", each [SHAPE:]FIELD=VALUE,... with SHAPE `qkv` (projections with more outputs than
inputs), `oproj` (no more: MxLinearTile.narrowing) or none (every projection). FIELDs are MxLinearConfig's
(block_m, block_n, block_k, num_warps, num_stages) and `programs`, the programs an SM that the K split aims at
(MxLinearTile.split_programs_per_sm); each replaces the shipped tile's value. An empty SPEC writes the shipped tiles.
The variant starts from the shipped file of --device (the H200's by default).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, fields, replace
from pathlib import Path

from warpcode.bench.config_file import config_entry, write_config_file
from warpcode.kernels.mx_linear import MxLinearConfig, MxLinearSettings, MxLinearTile
from warpcode.kernels.tuning import CONFIG_FOLDER, device_file_name

DECODE_MAX_ROWS = 32  # the rows a SPEC changes the tiles of
SHAPES = ("qkv", "oproj")
TILE_FIELDS = {field.name for field in fields(MxLinearConfig)} - {"split_k", "group_m"}


def parse_spec(text: str) -> dict[str, dict[str, int]]:
    """SPEC -> {"qkv" | "oproj" | "all": {field: value}}; ValueError naming what is wrong."""
    specs: dict[str, dict[str, int]] = {}
    for part in filter(None, text.split("|")):
        shape, _, assignments = part.rpartition(":")
        shape = shape or "all"
        if shape not in (*SHAPES, "all"):
            raise ValueError(f"unknown shape {shape!r} in {part!r}: qkv, oproj or none")
        values = {}
        for assignment in filter(None, assignments.split(",")):
            name, equals, value = assignment.partition("=")
            if not equals or not value.isdigit():
                raise ValueError(f"expected FIELD=INTEGER, got {assignment!r} in {part!r}")
            if name not in (*TILE_FIELDS, "programs"):
                raise ValueError(f"unknown field {name!r}: one of {', '.join(sorted(TILE_FIELDS))} or programs")
            values[name] = int(value)
        specs[shape] = values
    for shape, values in specs.items():  # an invalid tile is refused here, not at the first launch
        tile = {name: value for name, value in values.items() if name != "programs"}
        try:
            replace(MxLinearConfig(16, 32, 128), **tile)
        except ValueError as error:
            raise ValueError(f"{shape}: {error}") from None
        if values.get("programs") == 0:
            raise ValueError(f"{shape}: programs must be at least 1")
    return specs


def rule_for(settings: MxLinearSettings, m: int, narrowing: bool) -> MxLinearTile:
    """The rule that settings apply to m rows of a narrowing (n = k) or widening (n = k + 1) projection."""
    return next(tile for tile in settings.tiles if tile.matches(m, 4096 if narrowing else 4097, 4096))


def variant_settings(specs: dict[str, dict[str, int]], base: MxLinearSettings) -> MxLinearSettings:
    """base with the SPEC applied up to DECODE_MAX_ROWS rows: the decode rows' rules spelt out per row limit and
    shape (narrowing first, as the first matching rule wins), each with the spec of its shape over the base's tile."""
    limits = sorted({tile.max_rows for tile in base.tiles if tile.max_rows and tile.max_rows <= DECODE_MAX_ROWS})
    decode = []
    for limit in limits:
        for narrowing in (True, False):
            rule = rule_for(base, limit, narrowing)
            values = specs.get("oproj" if narrowing else "qkv", specs.get("all", {}))
            tile = {name: value for name, value in values.items() if name != "programs"}
            programs = values.get("programs", rule.split_programs_per_sm)
            decode.append(MxLinearTile(replace(rule.config, **tile), limit, narrowing, programs))
    rest = [tile for tile in base.tiles if tile.max_rows is None or tile.max_rows > DECODE_MAX_ROWS]
    return replace(base, tiles=(*decode, *rest))


def settings_entry(settings: MxLinearSettings) -> dict:
    """The settings as the data file holds them (options left off left out)."""
    tiles = [{**config_entry(tile), "config": config_entry(tile.config)} for tile in settings.tiles]
    return {**{name: value for name, value in asdict(settings).items() if name != "tiles"}, "tiles": tiles}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the variant's folder (WARPCODE_TUNED_CONFIG_FOLDER)")
    parser.add_argument("spec", help='"[SHAPE:]FIELD=VALUE,...|..."')
    parser.add_argument("--device", default="NVIDIA H200", help="the device (torch.cuda.get_device_name())")
    args = parser.parse_args(argv)
    name = device_file_name(args.device)
    base = CONFIG_FOLDER / name
    data = json.loads(base.read_text()) if base.exists() else {}
    try:
        settings = variant_settings(parse_spec(args.spec), MxLinearSettings(**data.get("mx_linear", {})))
    except ValueError as error:
        print(f"mx_linear_variant: {error}", file=sys.stderr)
        return 2
    write_config_file(args.folder / name, {**data, "mx_linear": settings_entry(settings)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
