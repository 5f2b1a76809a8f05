"""gemv on the GPU at Qwen3-30B-A3B shapes (qkv, o_proj, router, lm_head) against float64, its fused RMSNorm
prologue and residual epilogue, and replayed from CUDA graphs after x changes in place (run on the device:
pytest -m gpu tests/kernels)."""

import pytest
import torch

from warpcode.bench.timing import capture_graph
from warpcode.kernels.gemv import GemvConfig, gemv, gemv_reference
from warpcode.kernels.norm import add_rmsnorm_triton
from warpcode.kernels.warp_decode import moe_warp_decode

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
    returned = []
    graph = capture_graph(lambda: returned.append(gemv(x, w, bias, out=out)))
    (y,) = returned
    for seed in (3, 4):
        x.copy_(inputs(batch, hidden, n, seed=seed)[0])
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_matches(y, gemv_reference(x.double(), w.double(), bias.double()), gemv_reference(x, w, bias))
        assert y is out and not y.isnan().any()


# ------------------------------------------------------------------------- fused RMSNorm prologue, residual epilogue

EPS = 1e-6
QKV, O_PROJ, ROUTER = (5120, 2048), (2048, 4096), (128, 2048)


def norm_weight(hidden, seed=5):
    g = torch.Generator(device=CUDA).manual_seed(seed)
    return (0.5 + torch.rand(hidden, generator=g, device=CUDA)).bfloat16()


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("shape", [QKV, ROUTER], ids=["qkv", "router"])
def test_norm_prologue_at_model_shapes(weights, shape, batch, config_name, rmsnorm_within_one_ulp_flips):
    n, hidden = shape
    w = weights[shape]
    x, _ = inputs(batch, hidden, n, seed=5)
    gamma = norm_weight(hidden)
    normed = torch.full_like(x, float("nan"))
    y = gemv(x, w, None, CONFIGS[config_name], norm_weight=gamma, eps=EPS, normed_out=normed)
    rmsnorm_within_one_ulp_flips(normed, x, gamma, None, EPS, max_fraction=1e-3)
    # the norm kernel's normed input: the same rounding steps, its sum of squares in another order
    assert (normed != add_rmsnorm_triton(x, gamma, EPS)[0]).float().mean().item() <= 2e-3
    # y: the normalised input before its roundings times w, summed in fp32 and rounded once (the tensor-core path
    # rounds x * gamma to bf16 first: up to half an ulp more, so more values round the other way)
    x64 = x.double()
    expected = gemv_reference(x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * gamma.double(), w.double())
    torch.testing.assert_close(y.double(), expected, **TOLERANCE)
    config = CONFIGS[config_name]
    max_flips = 0.5 if config is not None and config.use_dot else 0.02
    assert (y != expected.bfloat16()).float().mean().item() <= max_flips
    assert torch.equal(gemv(x, w, None, CONFIGS[config_name], norm_weight=gamma, eps=EPS), y)


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("batch", [1, 4])
def test_residual_epilogue_at_o_proj_shape(weights, batch, config_name):
    n, hidden = O_PROJ
    w, config = weights[O_PROJ], CONFIGS[config_name]
    x, bias = inputs(batch, hidden, n, seed=6)
    residual = (
        torch.randn(batch, n, generator=torch.Generator(device=CUDA).manual_seed(6), device=CUDA) * 4
    ).bfloat16()
    expected = (residual.float() + gemv(x, w, bias, config).float()).bfloat16()  # round(h + round(x @ w.T + b))
    assert torch.equal(gemv(x, w, bias, config, residual=residual), expected)
    h = residual.clone()
    assert gemv(x, w, bias, config, residual=h, out=h) is h
    assert torch.equal(h, expected)


def test_fused_decode_layer_chain_replays_from_a_cuda_graph():
    """The batch-1 decode step's chain under PDL: o_proj adds into h in place, the router GEMV normalises h and stores
    the normed input, warp decode adds the experts' output into h in place, the next q/k/v GEMV normalises h. Replayed
    from a graph, against the unfused kernels (add_rmsnorm) run one by one; each reads h after its writer finished."""
    g = torch.Generator(device=CUDA).manual_seed(7)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device=CUDA) * scale).bfloat16()

    hidden, attn_size, intermediate, experts = 2048, 4096, 768, 8
    wo, wr, wqkv = rand(hidden, attn_size, scale=attn_size**-0.5), rand(experts, hidden), rand(5120, hidden)
    w13 = rand(experts, 2 * intermediate, hidden, scale=hidden**-0.5)
    w2 = rand(experts, hidden, intermediate, scale=intermediate**-0.5)
    gamma_post, gamma_in = norm_weight(hidden, seed=1), norm_weight(hidden, seed=2)
    # fixed routing: a one-ulp flip of the normed input must not pick other experts in one of the two chains
    topk_weights = torch.tensor([[0.6, 0.4]], device=CUDA)
    topk_ids = torch.tensor([[3, 5]], device=CUDA)
    attn, h = rand(1, attn_size), rand(1, hidden)
    normed, logits = torch.empty_like(h), torch.empty(1, experts, device=CUDA, dtype=torch.bfloat16)
    qkv = torch.empty(1, 5120, device=CUDA, dtype=torch.bfloat16)

    def fused():
        gemv(attn, wo, residual=h, out=h)
        gemv(h, wr, norm_weight=gamma_post, eps=EPS, normed_out=normed, out=logits)
        moe_warp_decode(normed, topk_weights, topk_ids, w13, w2, out=h, residual=h)
        gemv(h, wqkv, norm_weight=gamma_in, eps=EPS, out=qkv)

    def unfused(h0):
        normed1, h1 = add_rmsnorm_triton(gemv(attn, wo), gamma_post, EPS, h0)
        experts_out = moe_warp_decode(normed1, topk_weights, topk_ids, w13, w2)
        _, h2 = add_rmsnorm_triton(experts_out, gamma_in, EPS, h1)
        return normed1, h1, h2

    def exact_rmsnorm(x, gamma):
        x64 = x.double()
        return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * gamma.double()

    fused()  # compile outside the capture
    torch.cuda.synchronize()
    graph = capture_graph(fused)
    for _ in range(2):
        h0 = rand(1, hidden, scale=4.0)
        attn.copy_(rand(1, attn_size))
        h.copy_(h0)
        graph.replay()
        torch.cuda.synchronize()
        expected_normed, h1, expected_h = unfused(h0)
        assert (normed != expected_normed).float().mean().item() <= 2e-3
        # h: the same roundings both ways. The fused GEMVs multiply the normed input before its rounding to bf16:
        # their outputs are the float64 product of the exact RMSNorm of the h they read, rounded once.
        torch.testing.assert_close(h, expected_h, **TOLERANCE)
        torch.testing.assert_close(
            logits.double(), gemv_reference(exact_rmsnorm(h1, gamma_post), wr.double()), **TOLERANCE
        )
        torch.testing.assert_close(qkv.double(), gemv_reference(exact_rmsnorm(h, gamma_in), wqkv.double()), **TOLERANCE)
