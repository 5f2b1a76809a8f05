"""The MoE kernels at real model shapes on the GPU (run on the device: pytest -m gpu tests/kernels)."""

import pytest
import torch

from warpcode.bench.moe import MoeShape, float64_reference, make_layers
from warpcode.kernels import moe, moe_expert_centric, moe_warp_decode, route, route_reference

pytestmark = pytest.mark.gpu

SHAPES = {
    "qwen3-30b-a3b": MoeShape(2048, 768, 128, 8),
    "olmoe-1b-7b": MoeShape(2048, 1024, 64, 8),
    "mixtral-8x7b": MoeShape(4096, 14336, 8, 2),
}


def relative_error(out, reference):
    return ((out.double() - reference).norm() / reference.norm()).item()


@pytest.mark.parametrize("tokens", [1, 3, 8, 33])
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_paths_match_float64_at_model_shapes(shape, tokens):
    [layer] = make_layers(shape, tokens, torch.bfloat16, torch.device("cuda"), count=1)
    reference = float64_reference(*layer)
    errors = {}
    for name, call in (("warp", moe_warp_decode), ("centric", moe_expert_centric), ("dispatch", moe)):
        out = call(*layer, out=torch.full_like(layer[0], float("nan"))) if name != "dispatch" else call(*layer)
        assert not out.isnan().any(), f"{name}: unwritten outputs"
        errors[name] = relative_error(out, reference)
        assert errors[name] < 1e-2, errors
    assert errors["warp"] < 0.7 * errors["centric"], errors


def test_route_kernel_matches_reference_on_gpu():
    logits = torch.randn(37, 128, device="cuda")
    weights, ids = route(logits, 8)
    expected_weights, expected_ids = route_reference(logits, 8)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(weights, expected_weights)
    # bf16 logits tie often: tied experts may come in either order, but the weights may not differ, nor the
    # chosen set where the 8th and 9th probabilities differ.
    logits = logits.to(torch.bfloat16)
    weights, ids = route(logits, 8)
    expected_weights, expected_ids = route_reference(logits, 8)
    torch.testing.assert_close(weights, expected_weights)
    ninth = torch.topk(torch.softmax(logits.float(), -1), 9).values
    separated = ninth[:, 7] > ninth[:, 8]
    assert torch.equal(ids.sort(1).values[separated], expected_ids.sort(1).values[separated])


@pytest.mark.parametrize("tokens", [1, 64])
def test_dispatcher_is_capturable_in_a_cuda_graph(tokens):
    """No host synchronisation on either path: the decode step of the runtime is one CUDA graph."""
    [layer] = make_layers(SHAPES["qwen3-30b-a3b"], tokens, torch.bfloat16, torch.device("cuda"), count=1)
    logits = torch.randn(tokens, 128, device="cuda")
    eager = moe(layer[0], *route(logits, 8), *layer[3:])
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        moe(layer[0], *route(logits, 8), *layer[3:])
        with torch.cuda.graph(graph, stream=stream):
            captured = moe(layer[0], *route(logits, 8), *layer[3:])
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)
