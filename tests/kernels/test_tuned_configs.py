"""The device data files (kernels/configs/): the H200's reproduces, value for value, every launch parameter the
kernels chose on the H200 before the tables became data (tests/fixtures/h200_launch_parameters.json, computed from
the code of commit 6a0f258 at 132 SMs); a device without a file gets the heuristics and says so."""

import json
import logging
from dataclasses import asdict, fields
from pathlib import Path

import pytest
import torch

from warpcode.kernels import tuning
from warpcode.kernels.attention_splits import attention_settings, launch_config
from warpcode.kernels.gemv import GemvConfig, default_gemv_config, has_tuned_mx_config
from warpcode.kernels.mx_linear import default_mx_linear_config, mx_linear_settings
from warpcode.kernels.o_proj_router import o_proj_router_settings
from warpcode.kernels.prefill_attention import default_config, prefill_attention_settings
from warpcode.kernels.route import route_settings

H200 = tuning.load_tables(tuning.CONFIG_FOLDER / "NVIDIA_H200.json")
BEFORE = json.loads((Path(__file__).parents[1] / "fixtures" / "h200_launch_parameters.json").read_text())
SMS = 132


def each(table: dict):
    """(key, n) and the value recorded for n, over the fixture's runs [first n, last n, value] of each key."""
    for key, runs in table.items():
        for first, last, value in runs:
            for n in range(first, last + 1):
                yield key, n, value


def shape_of(key: str) -> tuple[tuple[int, ...], bool]:
    *numbers, last = key.split(",")
    return (tuple(map(int, numbers)), True) if last == "mx" else ((*map(int, numbers), int(last)), False)


def test_moe_tables_match_the_h200_before():
    for key, tokens, value in each(BEFORE["warp_decode"]):
        shape, mx = shape_of(key)
        assert asdict(tuning.warp_decode_config(*shape, tokens, mx, tables=H200)) == value, (key, tokens)
    for key, value in BEFORE["warp_decode_max_tokens"].items():
        shape, mx = shape_of(key)
        assert tuning.warp_decode_max_tokens(*shape, mx, tables=H200) == value, key
    for key, tokens, value in each(BEFORE["expert_centric"]):
        shape, mx = shape_of(key)
        assert asdict(tuning.grouped_gemm_config(*shape, tokens, mx, tables=H200)) == value, (key, tokens)


def test_dense_tables_match_the_h200_before():
    for key, batch, value in each(BEFORE["gemv"]):
        (n, h), mx = shape_of(key)
        assert asdict(default_gemv_config(n, h, batch, mx, tables=H200)) == value, (key, batch)
    for key, batch, value in each(BEFORE["gemv_has_tuned_mx"]):
        assert has_tuned_mx_config(*map(int, key.split(",")), batch, tables=H200) == value, (key, batch)
    settings = mx_linear_settings(H200)
    assert settings.max_rows == BEFORE["mx_linear_max_rows"]
    for key, m, value in each(BEFORE["mx_linear"]):
        n, k = map(int, key.split(","))
        assert asdict(default_mx_linear_config(m, n, k, SMS, settings)) == value, (key, m)


def test_attention_and_small_kernel_settings_match_the_h200_before():
    settings = attention_settings(H200)
    for key, value in BEFORE["decode_attention"].items():
        assert list(launch_config(*map(int, key.split(",")), SMS, None, settings)) == value, key
    for key, value in BEFORE["decode_attention_fixed_splits"].items():
        batch, heads, slots, splits = map(int, key.split(","))
        assert list(launch_config(batch, heads, slots, SMS, splits, settings)) == value, key
    merge = {name: getattr(settings, name) for name in ("merge_kernel_min_splits", "merge_elements", "merge_warps")}
    assert merge == BEFORE["decode_attention_merge"]
    prefill = prefill_attention_settings(H200)
    for key, value in BEFORE["prefill_attention"].items():
        assert list(default_config(*map(int, key.split(",")), SMS, prefill)) == value, key
    assert prefill.merge_warps == BEFORE["prefill_attention_merge_warps"]
    assert asdict(route_settings(H200)) == BEFORE["route"]
    assert asdict(o_proj_router_settings(H200)) == BEFORE["o_proj_router"]


def test_every_section_of_the_shipped_files_is_read_by_a_kernel():
    """A misspelt section would be ignored: the heuristics, silently, on the device the file was measured on."""
    read = {"warp_decode", "warp_decode_crossover", "expert_centric", "gemv", "gemv_mx", "mx_linear",
            "decode_attention", "prefill_attention", "route", "o_proj_router"}  # fmt: skip
    for path in tuning.CONFIG_FOLDER.glob("*.json"):
        assert set(tuning.load_tables(path).sections) <= read, path


def test_device_names_map_to_files_and_an_unknown_device_warns_once(tmp_path, caplog):
    assert tuning.device_file_name("NVIDIA H200") == "NVIDIA_H200.json"
    assert tuning.tables_for("NVIDIA H200").path == tuning.CONFIG_FOLDER / "NVIDIA_H200.json"
    with caplog.at_level(logging.WARNING, logger="warpcode.kernels.tuning"):
        assert tuning.tables_for("NVIDIA A100-SXM4-80GB") is tuning.NO_TABLES
    assert (
        len(caplog.records) == 1 and "NVIDIA_A100-SXM4-80GB.json" in caplog.text and "tune_warp_decode" in caplog.text
    )
    # no tables: each kernel's heuristic
    assert tuning.warp_decode_config(2048, 768, 128, 8, 1, tables=tuning.NO_TABLES) == tuning.WarpDecodeConfig(
        gate_up_rows=8, gate_up_cols=512, down_rows=4, down_cols=128
    )
    assert default_gemv_config(5120, 2048, 1, tables=tuning.NO_TABLES) != default_gemv_config(
        5120, 2048, 1, tables=H200
    )
    # a folder named explicitly (a variant) must hold the device's file
    with pytest.raises(FileNotFoundError, match=r"NVIDIA_H200\.json"):
        tuning.tables_for("NVIDIA H200", str(tmp_path))


def test_bad_entries_name_the_file_section_and_key(tmp_path):
    path = tmp_path / "NVIDIA_H200.json"
    path.write_text(json.dumps({"gemv": {"5120,2048": {"1": {"block_n": 3, "block_k": 1024}}}, "route": {"warps": 1}}))
    tables = tuning.load_tables(path)
    with pytest.raises(ValueError, match=r"NVIDIA_H200.json: gemv / 5120,2048 / 1: GemvConfig.block_n"):
        default_gemv_config(5120, 2048, 1, tables=tables)
    with pytest.raises(ValueError, match=r"route: .*warps"):
        route_settings(tables)
    assert {field.name for field in fields(GemvConfig)} >= set(H200.section("gemv")["5120,2048"]["1"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="off the GPU only")
def test_off_the_gpu_the_heuristics_silently(caplog):
    """The interpreter and the CPU have nothing to tune: no tables, no warning."""
    with caplog.at_level(logging.WARNING, logger="warpcode.kernels.tuning"):
        assert tuning.device_tables() is tuning.NO_TABLES
    assert not caplog.records
