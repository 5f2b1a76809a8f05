"""mx_linear, dequantize_weight and linear_mx on the GPU at Qwen3-30B-A3B shapes for prefill-sized M, against float64
on the dequantised weights (run on the device: pytest -m gpu)."""

import pytest
import torch

from warpcode.kernels.mx import MXTensor, dequantize_mxfp8, quantize_mxfp8_torch
from warpcode.kernels.mx_linear import (
    default_mx_linear_config,
    dequantize_weight,
    linear_mx,
    mx_linear,
    mx_linear_settings,
)
from warpcode.kernels.mx_tile import MAX_BF16_TILE_SCALE

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")
SHAPES = [(5120, 2048), (2048, 4096), (1536, 2048), (2048, 768)]  # (N, K)


@pytest.mark.parametrize("m", [1, 5, 17, 128, 1024, 1500])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{k}" for n, k in SHAPES])
def test_mx_linear_at_model_shapes(shape, m):
    n, k = shape
    g = torch.Generator(device=CUDA).manual_seed(n + k + m)
    w = quantize_mxfp8_torch(torch.randn(n, k, generator=g, device=CUDA) / k**0.5)
    x = torch.randn(m, k, generator=g, device=CUDA).bfloat16()
    bias = torch.randn(n, generator=g, device=CUDA).bfloat16()
    expected = x.double() @ dequantize_mxfp8(w, torch.float64).T + bias.double()
    for y in (mx_linear(x, w, bias), linear_mx(x, w, bias)):
        assert y.shape == (m, n) and y.dtype == torch.bfloat16
        torch.testing.assert_close(y.double(), expected, rtol=2**-7, atol=2e-2)


def test_dequantize_weight_on_the_gpu_is_exact():
    g = torch.Generator(device=CUDA).manual_seed(0)
    w = quantize_mxfp8_torch(torch.randn(2048, 4100, generator=g, device=CUDA))
    assert torch.equal(dequantize_weight(w, torch.float32), dequantize_mxfp8(w))
    assert mx_linear_settings().max_rows >= 16


def test_bf16_dequantisation_is_exact_for_every_code_and_scale():
    """The bit placement of mx_tile.dot_operand_tile (which the GEMMs and dequantize_weight use for bf16): every
    finite e4m3 code, subnormals and both zeros included, under every scale it takes (0..MAX_BF16_TILE_SCALE)."""
    codes = torch.arange(256, dtype=torch.int32)
    codes = codes[(codes & 0x7F) != 0x7F]  # e4m3's two NaNs
    codes = torch.cat([codes, torch.zeros(256 - codes.numel(), dtype=torch.int32)]).to(torch.uint8)
    scales = torch.arange(MAX_BF16_TILE_SCALE + 1, dtype=torch.uint8)
    data = codes.repeat(scales.numel(), 1).view(torch.float8_e4m3fn)  # [135, 256]
    w = MXTensor(data.to(CUDA), scales[:, None].repeat(1, 256 // 32).to(CUDA))
    expected = dequantize_mxfp8(w, torch.float64).to(torch.bfloat16)
    assert torch.equal(dequantize_weight(w, torch.bfloat16), expected)
    x = torch.eye(256, device=CUDA, dtype=torch.bfloat16)[:32]  # mx_linear's tiles dequantised the same way
    assert torch.equal(mx_linear(x, w), expected[:, :32].T.contiguous())


@pytest.mark.parametrize("m", [8, 32])
def test_decode_batches_split_k_and_replay_in_a_cuda_graph(m):
    """Decode batch sizes split K (the last program of each tile sums the shares and resets its counter): replays
    of a captured call stay exact to float64 as the input changes."""
    n, k = 2048, 4096
    assert default_mx_linear_config(m, n, k, torch.cuda.get_device_properties(CUDA).multi_processor_count).split_k > 1
    g = torch.Generator(device=CUDA).manual_seed(m)
    w = quantize_mxfp8_torch(torch.randn(n, k, generator=g, device=CUDA) / k**0.5)
    x = torch.randn(m, k, generator=g, device=CUDA).bfloat16()
    mx_linear(x, w)  # warm-up: compiles and allocates the arrival counters
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = mx_linear(x, w)
    for _ in range(3):
        x.copy_(torch.randn(m, k, generator=g, device=CUDA))
        graph.replay()
        expected = x.double() @ dequantize_mxfp8(w, torch.float64).T
        torch.testing.assert_close(y.double(), expected, rtol=2**-7, atol=2e-2)
