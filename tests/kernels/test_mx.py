"""MXFP8 quantisation (kernels/mx.py, kernels/mx_quantize.py) bit for bit against an independent float64 definition:
the exponent by search over powers of two, the elements by nearest-even rounding over the enumerated E4M3 values."""

import math

import pytest
import torch

from warpcode.kernels import MXTensor, dequantize_mxfp8, quantize_mxfp8
from warpcode.kernels.mx import quantize_mxfp8_torch, quantize_mxfp8_triton

QUANTISERS = {"torch": quantize_mxfp8_torch, "triton": quantize_mxfp8_triton}


def e4m3_values() -> list[tuple[float, int]]:
    """Every finite non-negative E4M3 (fn) value with its code: 1 sign, 4 exponent (bias 7), 3 mantissa bits;
    exponent field 0 is subnormal, code 0x7F is NaN."""
    values = []
    for code in range(0x7F):
        exponent, mantissa = code >> 3, code & 7
        value = mantissa / 8 * 2.0**-6 if exponent == 0 else (1 + mantissa / 8) * 2.0 ** (exponent - 7)
        values.append((value, code))
    return values


E4M3 = e4m3_values()


def round_e4m3(v: float) -> int:
    """The E4M3 code of float64 v rounded to nearest, ties to the even code (|v| <= 448 here)."""
    magnitude = abs(v)
    best = min(E4M3, key=lambda vc: (abs(vc[0] - magnitude), vc[1] & 1))
    return best[1] | (0x80 if math.copysign(1.0, v) < 0 else 0)


def reference_exponent(block: list[float]) -> int:
    amax = max(abs(v) for v in block)
    if amax == 0:
        return -127
    e = -140
    while amax > 448.0 * 2.0**e:  # exact in float64: the smallest e with amax <= 448 * 2**e
        e += 1
    return max(-127, min(127, e))


def reference_quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(E4M3 codes uint8 [R, K], scale bits uint8 [R, ceil(K/32)]) of a 2-D tensor, in float64 Python arithmetic."""
    rows = w.double().tolist()
    codes, scales = [], []
    for row in rows:
        row_codes, row_scales = [], []
        for start in range(0, len(row), 32):
            block = row[start : start + 32]
            e = reference_exponent(block)
            row_scales.append(e + 127)
            row_codes.extend(round_e4m3(v / 2.0**e) for v in block)
        codes.append(row_codes)
        scales.append(row_scales)
    return torch.tensor(codes, dtype=torch.uint8), torch.tensor(scales, dtype=torch.uint8)


def assert_bit_exact(mx: MXTensor, w: torch.Tensor) -> None:
    codes, scales = reference_quantize(w.reshape(-1, w.shape[-1]))
    assert torch.equal(mx.scales.reshape(scales.shape).cpu(), scales)
    data = mx.data.reshape(codes.shape).cpu().view(torch.uint8)
    # +0 and -0 are the same weight; every other code must match
    same = (data == codes) | (((data & 0x7F) == 0) & ((codes & 0x7F) == 0))
    assert bool(same.all()), f"{int((~same).sum())} codes differ, first at {(~same).nonzero()[0].tolist()}"


def edge_case_rows() -> torch.Tensor:
    """fp32 rows of 64 (two blocks each): all-zero blocks, maxima exactly on and just past a power-of-two boundary
    of 448 * 2**e, plain powers of two, subnormal-range elements next to a large one, fp32 subnormal blocks,
    E4M3 rounding ties."""
    rows = torch.zeros(10, 64)
    rows[1, :32] = torch.linspace(-1, 1, 32) * 448.0  # max exactly 448 * 2**0
    rows[1, 32:] = torch.linspace(-1, 1, 32) * 448.0 * 2.0**-20
    rows[2, :32] = torch.linspace(-1, 1, 32) * torch.nextafter(torch.tensor(448.0), torch.tensor(1e9))  # just past
    rows[2, 32:] = torch.linspace(-1, 1, 32) * 2.0**5  # a power of two
    rows[3, 0] = 448.0
    rows[3, 1:32] = 2.0 ** torch.arange(-20, -9).repeat(3)[:31].float()  # E4M3 subnormals and below after scaling
    rows[3, 29:32] = torch.tensor([1.5, 2.5, 3.5]) * 2.0**-9  # ties between E4M3 subnormals
    rows[3, 32:] = torch.full((32,), 1e-40)  # fp32 subnormal block: e = -127
    rows[4, :32] = torch.tensor([1.0625, 1.1875, 17.0, 19.0, 0.0078125 * 1.5, 448.0] * 5 + [1.0, -1.0])  # ties
    rows[4, 32:] = -rows[4, :32]
    rows[5, :] = torch.randn(64) * 1e-3
    rows[6, :] = torch.randn(64) * 1e3
    rows[7, :32] = 3.0e38  # e = 120 (largest fp32 maxima)
    rows[8, :] = torch.tensor([float(2.0**k) for k in range(-64, 0)])  # one power of two per element
    rows[9, :32] = 448.0 * 2.0**-127  # the smallest scale exactly
    return rows


@pytest.mark.parametrize("name", QUANTISERS)
def test_edge_cases_bit_exact(name):
    w = edge_case_rows()
    assert_bit_exact(QUANTISERS[name](w), w)


@pytest.mark.parametrize("name", QUANTISERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(5, 64), (3, 7, 100), (2, 33)])  # K a multiple of 32 and not
def test_random_bit_exact(name, dtype, shape):
    w = (torch.randn(shape) * torch.logspace(-3, 3, shape[-1])).to(dtype)
    mx = QUANTISERS[name](w)
    assert mx.data.shape == w.shape and mx.scales.shape == (*w.shape[:-1], math.ceil(w.shape[-1] / 32))
    assert_bit_exact(mx, w.float())


def test_dequantize_is_data_times_scale():
    w = torch.randn(4, 70) * 3
    mx = quantize_mxfp8(w)
    expected = [
        [float(mx.data[r, k].float()) * 2.0 ** (int(mx.scales[r, k // 32]) - 127) for k in range(70)] for r in range(4)
    ]
    assert torch.equal(dequantize_mxfp8(mx, torch.float64), torch.tensor(expected, dtype=torch.float64))


def test_gaussian_sqnr_at_least_30_db():
    w = torch.randn(256, 2048)
    error = (dequantize_mxfp8(quantize_mxfp8(w)) - w).pow(2).sum() / w.pow(2).sum()
    assert -10 * math.log10(error.item()) >= 30


def test_mxtensor_checks_and_indexing():
    mx = quantize_mxfp8(torch.randn(3, 8, 64))
    assert mx[1].shape == (8, 64) and torch.equal(mx[1].scales, mx.scales[1])
    assert mx.nbytes == 3 * 8 * 64 + 3 * 8 * 2
    with pytest.raises(ValueError, match="one scale per 32"):
        MXTensor(mx.data, mx.scales[..., :1])
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        MXTensor(mx.data.view(torch.uint8), mx.scales)
    with pytest.raises(ValueError, match="float tensor"):
        quantize_mxfp8(torch.ones(2, 32, dtype=torch.int32))
    with pytest.raises(IndexError, match="leading dimensions only"):
        mx[..., :8]
    with pytest.raises(IndexError, match="leading dimensions only"):
        mx[0, 1, :8]


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_non_finite_weights_are_refused(bad):
    w = torch.randn(2, 64)
    w[1, 40] = bad
    with pytest.raises(ValueError, match="inf or NaN"):
        quantize_mxfp8(w)


@pytest.mark.gpu
def test_gpu_quantiser_matches_the_definition_at_an_expert_shape():
    w = torch.randn(4, 1536, 2048, device="cuda", dtype=torch.bfloat16) * 0.02
    on_gpu, on_cpu = quantize_mxfp8(w), quantize_mxfp8_torch(w.cpu())
    assert torch.equal(on_gpu.scales.cpu(), on_cpu.scales)
    assert torch.equal(on_gpu.data.cpu().view(torch.uint8), on_cpu.data.view(torch.uint8))
    edge = edge_case_rows().cuda()
    assert_bit_exact(quantize_mxfp8(edge), edge.cpu())
