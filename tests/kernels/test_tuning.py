"""The MoE launch-parameter tables: the config file's sections, the heuristics where it has no entry, and the
expert-centric tuner's file merge (bench/config_file.py; the GPU timing itself runs on the device)."""

import argparse
import json

import pytest

from warpcode.bench import tune_expert_centric
from warpcode.bench.config_file import config_entry, update_config_file
from warpcode.bench.moe import MoeShape, register_cap_list
from warpcode.kernels import tuning
from warpcode.kernels.tuning import GroupedGemmConfig, grouped_gemm_config, warp_decode_config

QWEN3 = (2048, 768, 128, 8)


@pytest.fixture
def config_file(tmp_path):
    """A device's config file in a temporary folder (the lookups are given its tables explicitly)."""
    return tmp_path / "NVIDIA_H200.json"


def test_expert_centric_entries_by_bucket_and_the_heuristic_elsewhere(config_file):
    tuned = {"block_m": 16, "block_n": 256, "block_k": 64, "num_warps": 8, "num_stages": 2}
    config_file.write_text(json.dumps({"expert_centric": {"2048,768,128,8": {"32": tuned}}}))
    tables = tuning.load_tables(config_file)
    assert grouped_gemm_config(*QWEN3, 32, tables=tables) == GroupedGemmConfig(**tuned)
    assert grouped_gemm_config(*QWEN3, 17, tables=tables) == GroupedGemmConfig(**tuned)  # bucket 32
    heuristic = GroupedGemmConfig(block_m=16, block_n=64, block_k=128, num_warps=4, num_stages=4)
    assert grouped_gemm_config(*QWEN3, 64, tables=tables) == heuristic  # no entry for bucket 64
    assert grouped_gemm_config(2048, 1024, 64, 8, 32, tables=tables) == heuristic  # nor for this shape
    # prefill-sized calls: past the largest bucket, the heuristic by slots per expert
    assert grouped_gemm_config(*QWEN3, 2000, tables=tables).block_m == 64
    assert warp_decode_config(*QWEN3, 1, tables=tables) == tuning.WarpDecodeConfig()  # no warp-decode entry


def test_unknown_fields_and_bad_configs_raise(config_file):
    config_file.write_text(json.dumps({"expert_centric": {"2048,768,128,8": {"32": {"block_mm": 16}}}}))
    with pytest.raises(ValueError, match="expert_centric"):
        grouped_gemm_config(*QWEN3, 32, tables=tuning.load_tables(config_file))
    for fields in ({"block_m": 24}, {"block_n": 8}, {"num_warps": 3}, {"num_stages": 0}):
        with pytest.raises(ValueError):
            GroupedGemmConfig(**{"block_m": 16, "block_n": 64, "block_k": 64, **fields})


def test_tuner_candidates_and_the_file_merge(config_file, monkeypatch):
    shape = MoeShape(*QWEN3)
    found = tune_expert_centric.candidates(shape, 32)
    assert found and all(c.block_m == 16 for c in found)  # 2 slots per expert: no taller blocks
    assert {c.block_m for c in tune_expert_centric.candidates(MoeShape(4096, 14336, 8, 2), 128)} == {16, 32}
    # the file keeps its other sections and other buckets; new buckets are merged in
    config_file.write_text(json.dumps({"warp_decode": {"x": {}}, "warp_decode_crossover": {"x": 4},
                                       "expert_centric": {"2048,768,128,8": {"128": {"block_m": 16}}}}))  # fmt: skip
    best = GroupedGemmConfig(block_m=16, block_n=128, block_k=128, num_warps=4, num_stages=3)
    monkeypatch.setattr(tune_expert_centric, "tune", lambda shape, batch, mx=False, caps=(): (best, 1e-4, 2e-4))
    tune_expert_centric.main(["--shape", "2048,768,128,8", "--batch", "32", "--write", str(config_file)])
    data = json.loads(config_file.read_text())
    assert data["warp_decode"] == {"x": {}} and data["warp_decode_crossover"] == {"x": 4}
    assert data["expert_centric"]["2048,768,128,8"] == {
        "128": {"block_m": 16},
        "32": {"block_m": 16, "block_n": 128, "block_k": 128, "num_warps": 4, "num_stages": 3},
    }


def test_register_caps_are_validated_tried_and_written_only_when_set(config_file, monkeypatch):
    for bad in (0, 16, 256):
        with pytest.raises(ValueError, match="registers a thread"):
            GroupedGemmConfig(block_m=16, block_n=64, block_k=64, max_registers=bad)
        with pytest.raises(ValueError, match="down_max_registers"):
            tuning.WarpDecodeConfig(down_max_registers=bad)
    assert register_cap_list("168, 128") == (168, 128) and register_cap_list("") == ()
    for bad in ("12", "x", "300"):
        with pytest.raises(argparse.ArgumentTypeError, match=repr(bad)):
            register_cap_list(bad)
    capped = GroupedGemmConfig(block_m=16, block_n=128, block_k=128, num_warps=4, num_stages=3, max_registers=128)
    seen = []
    monkeypatch.setattr(
        tune_expert_centric, "tune", lambda shape, batch, mx=False, caps=(): seen.append(caps) or (capped, 1, 2)
    )
    tune_expert_centric.main(["--shape", "2048,768,128,8", "--batch", "16,32", "--register-caps", "168,128",
                              "--write", str(config_file)])  # fmt: skip
    tune_expert_centric.main(["--shape", "2048,768,128,8", "--batch", "64", "--write", str(config_file)])
    assert seen == [(168, 128), (168, 128), ()]
    written = json.loads(config_file.read_text())["expert_centric"]["2048,768,128,8"]
    tables = tuning.load_tables(config_file)
    assert written["16"]["max_registers"] == 128 and grouped_gemm_config(*QWEN3, 16, tables=tables) == capped
    uncapped = config_entry(tuning.WarpDecodeConfig())
    assert uncapped.keys().isdisjoint({"down_max_registers", "down_on_mma", "down_first_tile_early"})
    assert tuning.WarpDecodeConfig(**uncapped) == tuning.WarpDecodeConfig()
    on_mma = tuning.WarpDecodeConfig(down_rows=32, down_on_mma=True, down_first_tile_early=True)
    assert tuning.WarpDecodeConfig(**config_entry(on_mma)) == on_mma


def test_update_config_file_replaces_or_merges_one_key(tmp_path):
    path = tmp_path / "new" / "configs.json"  # created with its folder
    update_config_file(path, "warp_decode", "a", {"1": {"x": 1}}, replace=True)
    update_config_file(path, "warp_decode", "a", {"2": {"x": 2}}, replace=True)
    update_config_file(path, "warp_decode_crossover", "a", 16, replace=True)
    update_config_file(path, "expert_centric", "a", {"32": {"y": 1}}, replace=False)
    update_config_file(path, "expert_centric", "a", {"64": {"y": 2}}, replace=False)
    assert json.loads(path.read_text()) == {
        "warp_decode": {"a": {"2": {"x": 2}}},
        "warp_decode_crossover": {"a": 16},
        "expert_centric": {"a": {"32": {"y": 1}, "64": {"y": 2}}},
    }
