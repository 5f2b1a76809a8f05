"""experiments/sweep_decode_variants.py's variants: config folders written from config_variant.py's changes (each
measured in a process of its own; the measuring needs the GPU), the shipped file first and last."""

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

from warpcode.kernels import tuning
from warpcode.kernels.attention_splits import attention_settings
from warpcode.kernels.route import route_settings

EXPERIMENTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def sweep(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))  # the script imports config_variant beside it
    spec = importlib.util.spec_from_file_location("sweep_decode_variants", EXPERIMENTS / "sweep_decode_variants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_variant_is_a_folder_of_the_shipped_file_with_its_changes(sweep, tmp_path):
    args = argparse.Namespace(
        variant=["decode_attention: num_warps=4; route: prefetch_rows=32"], folder=[Path("/prepared")],
        no_merge_variants=False,
    )  # fmt: skip
    found = sweep.variants(args, tmp_path, "NVIDIA H200")
    labels = [label for label, _ in found]
    assert labels[0] == "baseline" and labels[-1] == "baseline again" and found[0][1] is found[-1][1] is None
    assert labels[1:-1] == ["folder /prepared", args.variant[0], *sweep.MERGE_VARIANTS]
    tables = tuning.tables_for("NVIDIA H200", str(found[2][1]))
    assert attention_settings(tables).num_warps == 4 and route_settings(tables).prefetch_rows == 32
    shipped = json.loads((tuning.CONFIG_FOLDER / "NVIDIA_H200.json").read_text())
    written = json.loads((found[2][1] / "NVIDIA_H200.json").read_text())
    assert {s: v for s, v in written.items() if s not in ("decode_attention", "route")} == {
        s: v for s, v in shipped.items() if s not in ("decode_attention", "route")
    }
    merged = [attention_settings(tuning.tables_for("NVIDIA H200", str(folder))) for _, folder in found[3:5]]
    assert [m.merge_kernel_min_splits for m in merged] == [10**9, 2]
    with pytest.raises(ValueError, match="unknown section"):
        sweep.variants(
            argparse.Namespace(variant=["attention: x=1"], folder=[], no_merge_variants=True), tmp_path, "NVIDIA H200"
        )
