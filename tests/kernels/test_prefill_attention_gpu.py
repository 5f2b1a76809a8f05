"""Paged prefill attention on the device at the qwen3-30b-a3b attention shape (32 query heads, 4 KV heads, D 128,
blocks of 256 slots): an agent turn's chunk after a long prefix and a 1,024-token chunk of a long prompt, against
the float64 reference (run on the GPU machine: pytest -m gpu)."""

import pytest
import torch

from warpcode.kernels.prefill_attention import paged_prefill_attention, paged_prefill_attention_reference

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("tokens", "start"), [(1, 0), (300, 16_000), (1024, 7_000), (77, 255)])
def test_the_real_shape_matches_the_float64_reference(tokens, start):
    generator = torch.Generator(device="cuda").manual_seed(0)
    block, heads, kv_heads, dim = 256, 32, 4, 128
    used = -(-(start + tokens) // block)
    k_pool = torch.randn(used + 2, kv_heads, block, dim, device="cuda", generator=generator, dtype=torch.bfloat16)
    v_pool = torch.randn_like(k_pool)
    table = torch.randperm(used + 2, device="cuda", generator=generator)[:used].to(torch.int32)
    q = torch.randn(tokens, heads, dim, device="cuda", generator=generator, dtype=torch.bfloat16)
    start_tensor = torch.tensor([start], dtype=torch.int32, device="cuda")
    out = paged_prefill_attention(q, k_pool, v_pool, table, start_tensor)
    expected = paged_prefill_attention_reference(q.cpu(), k_pool.cpu(), v_pool.cpu(), table.cpu(), start)
    torch.testing.assert_close(out.cpu().double(), expected, atol=2e-2, rtol=2e-2)
