"""experiments/mx_linear_variant.py: its SPEC, the decode-batch tiles its variant file holds (exact against float64
under the CPU interpreter when mx_linear is given them), and one-line refusals of specs that would not make a
config."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from warpcode.kernels import tuning
from warpcode.kernels.mx import dequantize_mxfp8, quantize_mxfp8
from warpcode.kernels.mx_linear import default_mx_linear_config, mx_linear, mx_linear_settings

SCRIPT = Path(__file__).resolve().parents[1] / "mx_linear_variant.py"
_spec = importlib.util.spec_from_file_location("mx_linear_variant", SCRIPT)
variant_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(variant_script)
SHIPPED = mx_linear_settings(tuning.load_tables(tuning.CONFIG_FOLDER / "NVIDIA_H200.json"))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def variant(spec: str):
    """default_mx_linear_config under the variant of the shipped H200 tiles."""
    settings = variant_script.variant_settings(variant_script.parse_spec(spec), SHIPPED)
    return lambda m, n, k, sms: default_mx_linear_config(m, n, k, sms, settings)


def shipped(m, n, k, sms):
    return default_mx_linear_config(m, n, k, sms, SHIPPED)


def test_a_spec_replaces_the_tile_per_shape_and_splits_k_again():
    config = variant("qkv:block_n=32,num_warps=2|oproj:block_n=64,num_warps=4,programs=2")
    qkv, o_proj = config(8, 5120, 2048, 132), config(8, 2048, 4096, 132)
    assert (qkv.block_n, qkv.num_warps, qkv.split_k) == (32, 2, 4)  # 160 tiles: 4 shares bring 4.8 programs an SM
    assert (o_proj.block_n, o_proj.num_warps, o_proj.split_k) == (64, 4, 8)  # 32 tiles, about 2 programs an SM
    assert config(64, 2048, 4096, 132) == shipped(64, 2048, 4096, 132)  # past decode batches
    # without `programs` the shipped aim stays: 2 programs an SM at 32 rows
    assert config(32, 5120, 2048, 132) == shipped(32, 5120, 2048, 132)
    every = variant("block_k=256")
    assert every(8, 5120, 2048, 132).block_k == every(8, 2048, 4096, 132).block_k == 256
    empty = variant("")
    for m in (1, 2, 3, 8, 9, 16, 17, 32, 33, 64, 65, 1024):  # the rules spelt out choose as the shipped ones
        for n, k in ((5120, 2048), (2048, 4096), (2048, 2048)):
            assert empty(m, n, k, 132) == shipped(m, n, k, 132), (m, n, k)


def test_the_variant_file_is_what_mx_linear_launches(tmp_path):
    """Written by the script and read as the launchers read it, the variant's tile computes the product (exact to
    float64 in fp32)."""
    result = run(str(tmp_path), "oproj:block_n=32,block_k=64,num_warps=1,num_stages=1,programs=64")
    assert result.returncode == 0, result.stderr
    settings = mx_linear_settings(tuning.tables_for("NVIDIA H200", str(tmp_path)))
    chosen = default_mx_linear_config(3, 40, 200, 1, settings)  # the interpreter's one SM
    assert (chosen.block_n, chosen.block_k, chosen.split_k) == (32, 64, 2)  # 200 = 4 K tiles: 2 shares at most
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 200, generator=g)
    w = quantize_mxfp8(torch.randn(40, 200, generator=g))
    y = mx_linear(x, w, settings=settings)
    expected = x.double() @ dequantize_mxfp8(w, torch.float64).T
    assert torch.allclose(y.double(), expected, rtol=1e-5, atol=1e-5)
    shipped_file = json.loads((tuning.CONFIG_FOLDER / "NVIDIA_H200.json").read_text())
    written = json.loads((tmp_path / "NVIDIA_H200.json").read_text())
    assert {s: v for s, v in written.items() if s != "mx_linear"} == {
        s: v for s, v in shipped_file.items() if s != "mx_linear"
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("attn:block_n=64", "unknown shape 'attn'"),
        ("block_q=64", "unknown field 'block_q'"),
        ("block_n=sixty", "expected FIELD=INTEGER"),
        ("qkv:block_n=48", "qkv: MxLinearConfig"),  # not a power of two
        ("oproj:programs=0", "programs must be at least 1"),
    ],
)
def test_bad_specs_are_refused_in_one_line(tmp_path, spec, message):
    result = run(str(tmp_path), spec)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "NVIDIA_H200.json").exists()
