"""gemv on the GPU at Qwen3-30B-A3B shapes (qkv, o_proj, router, lm_head) against float64, and replayed from CUDA
graphs after x changes in place (run on the device: pytest -m gpu tests/kernels)."""

import pytest
import torch

from warpcode.kernels.gemv import GemvConfig, gemv, gemv_reference

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")
SHAPES = [(5120, 2048), (2048, 4096), (128, 2048), (151936, 2048)]  # (N, H)
BATCHES = [1, 4, 8, 16]
# None: the default chooser; plus one explicit config of each product path, and a whole-row tile
CONFIGS = {
    "default": None,
    "broadcast": GemvConfig(block_n=8, block_k=256, num_warps=2),
    "dot": GemvConfig(block_n=16, block_k=256, num_warps=1, use_dot=True),
    "whole_row": GemvConfig(block_n=1, block_k=2048, num_warps=8),  # one tile when H = 2048, two when H = 4096
}
TOLERANCE = {"rtol": 2**-8, "atol": 1e-2}  # y rounded once to bf16 (half an ulp) from an fp32 sum


@pytest.fixture(scope="module")
def weights():
    g = torch.Generator(device=CUDA).manual_seed(0)
    return {
        (n, hidden): (torch.randn(n, hidden, generator=g, device=CUDA) / hidden**0.5).bfloat16() for n, hidden in SHAPES
    }


def inputs(batch, hidden, n, seed=0):
    g = torch.Generator(device=CUDA).manual_seed(seed + batch)
    x = (torch.randn(batch, hidden, generator=g, device=CUDA) * 3).bfloat16()
    bias = torch.randn(n, generator=g, device=CUDA).bfloat16()
    return x, bias


def assert_matches(y, expected64, y_fp32_rounded):
    torch.testing.assert_close(y.double(), expected64, **TOLERANCE)
    # rounded once from fp32: only the order of the fp32 sum differs from the reference's
    assert (y != y_fp32_rounded).float().mean().item() <= 0.02


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{h}" for n, h in SHAPES])
def test_gemv_at_model_shapes(weights, shape, batch, config_name):
    n, hidden = shape
    w = weights[shape]
    x, bias = inputs(batch, hidden, n)
    bias = bias if batch == 4 else None
    y = gemv(x, w, bias, CONFIGS[config_name])
    bias64 = None if bias is None else bias.double()
    assert_matches(y, gemv_reference(x.double(), w.double(), bias64), gemv_reference(x, w, bias))


@pytest.mark.parametrize("batch", [1, 16])
def test_cuda_graph_replay_after_inputs_change_in_place(weights, batch):
    n, hidden = 5120, 2048
    w = weights[(n, hidden)]
    x, bias = inputs(batch, hidden, n, seed=2)
    out = torch.full((batch, n), float("nan"), device=CUDA, dtype=torch.bfloat16)
    gemv(x, w, bias, out=out)  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        y = gemv(x, w, bias, out=out)
    torch.cuda.current_stream().wait_stream(stream)
    for seed in (3, 4):
        x.copy_(inputs(batch, hidden, n, seed=seed)[0])
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_matches(y, gemv_reference(x.double(), w.double(), bias.double()), gemv_reference(x, w, bias))
        assert y is out and not y.isnan().any()
