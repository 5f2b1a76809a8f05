"""Runs a warpcode command with mx_linear's tile at decode batches (up to 32 rows) replaced, to decide the tile in
the model: alone a tile can win and lose inside the step, where PDL starts it beside its neighbours
(`gpu_session.py mx-linear-variants` times MX decode under each variant, one process each).

    python3 experiments/mx_linear_variant.py "block_n=64,num_warps=4" bench decode --preset qwen3-30b-a3b ...
    python3 experiments/mx_linear_variant.py "qkv:block_n=32,num_warps=2|oproj:programs=2" bench decode ...

SPEC is parts joined by "|", each [SHAPE:]FIELD=VALUE,... with SHAPE `qkv` (projections with more outputs than
inputs), `oproj` (no more: kernels/mx_linear.py narrowing) or none (every projection). FIELDs are MxLinearConfig's
(block_m, block_n, block_k, num_warps, num_stages) and `programs`, the programs an SM that the K split aims at
(decode_programs_per_sm); each replaces the package default's value. An empty SPEC runs the package default.
"""

from __future__ import annotations

import sys
from dataclasses import fields, replace

import warpcode.kernels.mx_linear as mx_linear_module
from warpcode.kernels.mx_linear import (
    DECODE_MAX_ROWS,
    MxLinearConfig,
    decode_programs_per_sm,
    narrowing,
    with_decode_split,
)

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
            replace(mx_linear_module.default_mx_linear_config(8), **tile)
        except ValueError as error:
            raise ValueError(f"{shape}: {error}") from None
        if values.get("programs") == 0:
            raise ValueError(f"{shape}: programs must be at least 1")
    return specs


def variant_config(specs: dict[str, dict[str, int]], default):
    """A default_mx_linear_config replacement: the spec of the call's shape over `default`'s tile up to
    DECODE_MAX_ROWS rows, the K split chosen again for the changed tile."""

    def config(m: int, n: int = 4096, k: int = 4096, sms: int = 132) -> MxLinearConfig:
        values = specs.get("oproj" if narrowing(n, k) else "qkv", specs.get("all"))
        if m > DECODE_MAX_ROWS or not values:
            return default(m, n, k, sms)
        tile = {name: value for name, value in values.items() if name != "programs"}
        programs = values.get("programs", decode_programs_per_sm(m))
        return with_decode_split(replace(default(m, n, k, sms), **tile), m, n, k, sms, programs)

    return config


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    try:
        specs = parse_spec(argv[0])
    except ValueError as error:
        print(f"mx_linear_variant: {error}", file=sys.stderr)
        return 2
    mx_linear_module.default_mx_linear_config = variant_config(specs, mx_linear_module.default_mx_linear_config)
    from warpcode.agent.cli import main as warpcode_main

    return warpcode_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
