"""experiments/mx_linear_variant.py: its SPEC, the decode-batch configs it puts in mx_linear's place (exact against
float64 under the CPU interpreter), and one-line refusals of specs that would not make a config."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from warpcode.kernels import mx_linear as mx_linear_module
from warpcode.kernels.mx import dequantize_mxfp8, quantize_mxfp8
from warpcode.kernels.mx_linear import default_mx_linear_config, mx_linear

SCRIPT = Path(__file__).resolve().parents[1] / "mx_linear_variant.py"
_spec = importlib.util.spec_from_file_location("mx_linear_variant", SCRIPT)
variant_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(variant_script)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_a_spec_replaces_the_tile_per_shape_and_splits_k_again():
    specs = variant_script.parse_spec("qkv:block_n=32,num_warps=2|oproj:block_n=64,num_warps=4,programs=2")
    config = variant_script.variant_config(specs, default_mx_linear_config)
    qkv, o_proj = config(8, 5120, 2048, 132), config(8, 2048, 4096, 132)
    assert (qkv.block_n, qkv.num_warps, qkv.split_k) == (32, 2, 4)  # 160 tiles: 4 shares bring 4.8 programs an SM
    assert (o_proj.block_n, o_proj.num_warps, o_proj.split_k) == (64, 4, 8)  # 32 tiles, about 2 programs an SM
    assert config(64, 2048, 4096, 132) == default_mx_linear_config(64, 2048, 4096, 132)  # past decode batches
    # without `programs` the default's aim stays: 2 programs an SM at 32 rows
    assert config(32, 5120, 2048, 132) == default_mx_linear_config(32, 5120, 2048, 132)
    every = variant_script.variant_config(variant_script.parse_spec("block_k=256"), default_mx_linear_config)
    assert every(8, 5120, 2048, 132).block_k == every(8, 2048, 4096, 132).block_k == 256
    empty = variant_script.variant_config(variant_script.parse_spec(""), default_mx_linear_config)
    assert empty(8, 5120, 2048, 132) == default_mx_linear_config(8, 5120, 2048, 132)


def test_the_replaced_default_is_what_mx_linear_launches(monkeypatch):
    """Installed as the script installs it, the variant's tile computes the product (exact to float64 in fp32)."""
    chosen = []
    config = variant_script.variant_config(
        variant_script.parse_spec("oproj:block_n=32,block_k=64,num_warps=1,num_stages=1,programs=64"),
        default_mx_linear_config,
    )

    def recorded(*args):
        chosen.append(config(*args))
        return chosen[-1]

    monkeypatch.setattr(mx_linear_module, "default_mx_linear_config", recorded)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 200, generator=g)
    w = quantize_mxfp8(torch.randn(40, 200, generator=g))
    y = mx_linear(x, w)
    assert [(c.block_n, c.block_k, c.split_k) for c in chosen] == [(32, 64, 2)]  # 200 = 4 K tiles: 2 shares at most
    expected = x.double() @ dequantize_mxfp8(w, torch.float64).T
    assert torch.allclose(y.double(), expected, rtol=1e-5, atol=1e-5)


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
def test_bad_specs_are_refused_in_one_line(spec, message):
    result = run(spec, "--version")
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_command_after_the_spec_is_warpcode_s():
    result = run("block_n=64,num_warps=4", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("warpcode ")
