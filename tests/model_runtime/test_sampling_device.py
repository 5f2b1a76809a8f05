"""sample_on_device: per-row parameters in device tensors, fixed shapes, the exponential race instead of multinomial."""

from __future__ import annotations

import pytest
import torch

from warpcode.model_runtime.sampling import (
    SamplingParams,
    SamplingTensors,
    exponential_noise,
    filter_logits,
    sample_on_device,
)

# Twelve well-separated logits in shuffled order (so a sort really reorders them). The parameters below keep every
# filter boundary well clear of these values, so the kept set does not hinge on rounding.
LOGITS = torch.tensor([-0.3, 1.2, -1.5, 2.0, 0.3, -2.0, 0.9, -0.6, 1.5, 0.0, -1.0, 0.6])
VOCAB = LOGITS.numel()
DRAWS = 20_000

CASES = {
    "temperature": SamplingParams(temperature=1.0),
    "hot": SamplingParams(temperature=1.7),
    "top_k": SamplingParams(temperature=1.3, top_k=5),
    "top_p": SamplingParams(temperature=1.0, top_p=0.7),  # cumulative 0.637 | 0.740: keeps 4
    "min_p": SamplingParams(temperature=1.0, min_p=0.15),  # p / p_max >= 0.15 keeps logits >= 0.10: 6 tokens
    # top-k 8, then min-p leaves 6 (logits >= 0.16), then top-p on those 6 (cumulative 0.777 | 0.880) leaves 4
    "combined": SamplingParams(temperature=0.8, top_k=8, min_p=0.1, top_p=0.85),
}
UNSORTED = ("temperature", "hot", "min_p")  # the cases that filtered=False may run


def expected_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """The reference: softmax of filter_logits on the tempered logits. [V] -> [V]."""
    return torch.softmax(filter_logits(logits[None].float() / params.temperature, params), dim=-1)[0]


def tensors_for(rows: list[SamplingParams]) -> SamplingTensors:
    tensors = SamplingTensors.allocate(len(rows), "cpu")
    tensors.set_rows(rows)
    return tensors


def frequencies(draws: torch.Tensor) -> torch.Tensor:
    return torch.bincount(draws, minlength=VOCAB).double() / draws.numel()


def draw(params: SamplingParams, filtered: bool, seed: int = 0, logits: torch.Tensor = LOGITS) -> torch.Tensor:
    """DRAWS samples of one row, taken in one call as a batch of DRAWS copies of it (each with its own seed)."""
    seeds, steps = counters(DRAWS, seed)
    return sample_on_device(logits.expand(DRAWS, -1), tensors_for([params] * DRAWS), seeds, steps, filtered)


def counters(batch: int, seed: int = 0, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row seeds (distinct) and steps for sample_on_device."""
    seeds = torch.arange(batch, dtype=torch.int64, device=device) + seed * batch
    return seeds, torch.zeros(batch, dtype=torch.int64, device=device)


@pytest.mark.parametrize(
    ("case", "filtered"), [(c, True) for c in CASES] + [(c, False) for c in UNSORTED], ids=lambda v: str(v)
)
def test_support_and_frequencies_match_filter_logits(case: str, filtered: bool):
    params = CASES[case]
    expected = expected_probs(LOGITS, params)
    observed = frequencies(draw(params, filtered))
    kept = expected > 0
    assert 1 <= int(kept.sum()) <= VOCAB
    assert torch.equal(observed > 0, kept), (observed, expected)  # no excluded token ever, every kept token seen
    assert (observed - expected.double()).abs().max() < 0.015, (observed, expected)


def test_cases_exercise_each_filter():
    """Guards the test data: each filter must actually remove tokens in its case, and differently from the others."""
    sizes = {case: int((expected_probs(LOGITS, params) > 0).sum()) for case, params in CASES.items()}
    assert sizes == {"temperature": 12, "hot": 12, "top_k": 5, "top_p": 4, "min_p": 6, "combined": 4}


def test_greedy_rows_are_exactly_argmax_including_ties():
    generator = torch.Generator().manual_seed(0)
    integers = torch.randint(0, 4, (256, 50), generator=generator)  # many ties per row
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        logits = integers.to(dtype)
        for filtered in (True, False):
            tokens = sample_on_device(logits, SamplingTensors.allocate(256, "cpu"), *counters(256), filtered)
            assert tokens.dtype == torch.int64
            assert torch.equal(tokens, logits.argmax(dim=-1))
    tied = torch.tensor([[1.0, 3.0, 3.0, 0.0], [5.0, 5.0, 5.0, 5.0]])
    assert sample_on_device(tied, SamplingTensors.allocate(2, "cpu"), *counters(2), True).tolist() == [1, 0]


def test_mixed_batch_each_row_follows_its_own_params():
    """Interleaved rows with different parameters and different logits, in one call."""
    configs = [
        (SamplingParams(), LOGITS),
        (CASES["top_k"], LOGITS.roll(3)),
        (CASES["top_p"], LOGITS.flip(0)),
        (SamplingParams(temperature=0.0, top_k=3, top_p=0.5), LOGITS.roll(5)),  # greedy wins over the filters
        (CASES["min_p"], LOGITS.roll(-2)),
        (CASES["combined"], LOGITS),
    ]
    rows = [configs[i % len(configs)] for i in range(len(configs) * DRAWS)]
    logits = torch.stack([row_logits for _, row_logits in rows]).to(torch.bfloat16)
    tensors = tensors_for([params for params, _ in rows])
    tokens = sample_on_device(logits, tensors, *counters(len(rows), 1), filtered=True)
    for index, (params, row_logits) in enumerate(configs):
        mine = tokens[index :: len(configs)]
        row_logits = row_logits.to(torch.bfloat16)
        if params.greedy:
            assert torch.equal(mine, row_logits.argmax().expand(DRAWS))
            continue
        expected = expected_probs(row_logits, params).double()
        observed = frequencies(mine)
        assert torch.equal(observed > 0, expected > 0), index
        assert (observed - expected).abs().max() < 0.015, index


@pytest.mark.parametrize(
    "params", [SamplingParams(temperature=1.0, top_k=1), SamplingParams(temperature=2.0, top_p=1e-6)]
)
def test_top_k_one_and_tiny_top_p_are_argmax(params: SamplingParams):
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(512, 1000, generator=generator)
    tokens = sample_on_device(logits, tensors_for([params] * 512), *counters(512), filtered=True)
    assert torch.equal(tokens, logits.argmax(dim=-1))


def test_seeds_and_steps_make_draws_reproducible_and_fresh():
    params = CASES["combined"]
    assert torch.equal(draw(params, True, seed=7), draw(params, True, seed=7))
    assert not torch.equal(draw(params, True, seed=7), draw(params, True, seed=8))
    assert torch.equal(draw(CASES["min_p"], False, seed=3), draw(CASES["min_p"], False, seed=3))
    seeds = torch.zeros(DRAWS, dtype=torch.int64)  # one seed, successive steps: the steps alone must decorrelate
    steps = torch.arange(DRAWS, dtype=torch.int64)
    observed = frequencies(
        sample_on_device(LOGITS.expand(DRAWS, -1), tensors_for([params] * DRAWS), seeds, steps, True)
    )
    expected = expected_probs(LOGITS, params).double()
    assert (observed - expected).abs().max() < 0.015


def test_exponential_noise_is_exp1_and_uncorrelated():
    seeds, steps = torch.tensor([0, 1, 2**40 + 5]), torch.tensor([0, 0, 3])
    noise = exponential_noise(seeds, steps, 200_000).double()
    assert noise.min() > 0 and torch.isfinite(noise).all()
    for row in noise:
        assert abs(row.mean() - 1) < 0.01 and abs(row.var() - 1) < 0.03  # Exp(1): mean 1, variance 1
    correlation = torch.corrcoef(torch.stack([noise[0], noise[1], noise[0].roll(1)]))
    assert correlation[0, 1].abs() < 0.01 and correlation[0, 2].abs() < 0.01


def test_set_rows_copies_in_place_and_pads_with_greedy():
    tensors = SamplingTensors.allocate(4, "cpu")
    assert tensors.batch == 4
    pointers = [t.data_ptr() for t in (tensors.temperature, tensors.top_k, tensors.top_p, tensors.min_p)]
    tensors.set_rows([SamplingParams(temperature=0.5, top_k=7, top_p=0.9, min_p=0.05)] * 4)
    tensors.set_rows([SamplingParams(temperature=0.7, top_k=3, top_p=0.8, min_p=0.2)])
    assert [t.data_ptr() for t in (tensors.temperature, tensors.top_k, tensors.top_p, tensors.min_p)] == pointers
    torch.testing.assert_close(tensors.temperature, torch.tensor([0.7, 0.0, 0.0, 0.0]))
    assert tensors.top_k.tolist() == [3, 0, 0, 0]
    torch.testing.assert_close(tensors.top_p, torch.tensor([0.8, 1.0, 1.0, 1.0]))
    torch.testing.assert_close(tensors.min_p, torch.tensor([0.2, 0.0, 0.0, 0.0]))
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(4))
    assert torch.equal(sample_on_device(logits, tensors, *counters(4), True)[1:], logits[1:].argmax(dim=-1))
    with pytest.raises(ValueError, match="batch of 4"):
        tensors.set_rows([SamplingParams()] * 5)


def test_rows_are_views_that_see_later_updates():
    tensors = SamplingTensors.allocate(6, "cpu")
    first_two = tensors.rows(2)
    assert first_two.batch == 2 and first_two.top_p.data_ptr() == tensors.top_p.data_ptr()
    tensors.set_rows([SamplingParams(temperature=0.9, top_k=4)] * 6)
    assert first_two.temperature.tolist() == pytest.approx([0.9, 0.9]) and first_two.top_k.tolist() == [4, 4]
    with pytest.raises(ValueError, match="batch must be"):
        tensors.rows(7)


def test_int32_top_k_and_shape_checks():
    tensors = SamplingTensors.allocate(DRAWS, "cpu")
    tensors.top_k = tensors.top_k.to(torch.int32)
    tensors.set_rows([CASES["top_k"]] * DRAWS)
    assert tensors.top_k.dtype == torch.int32
    observed = frequencies(sample_on_device(LOGITS.expand(DRAWS, -1), tensors, *counters(DRAWS, 5), True))
    expected = expected_probs(LOGITS, CASES["top_k"]).double()
    assert torch.equal(observed > 0, expected > 0)
    assert (observed - expected).abs().max() < 0.015
    with pytest.raises(ValueError, match="logits must be"):
        sample_on_device(torch.zeros(3, VOCAB), SamplingTensors.allocate(4, "cpu"), *counters(4), True)
    with pytest.raises(ValueError, match="must all be"):
        SamplingTensors(torch.zeros(2), torch.zeros(3, dtype=torch.int64), torch.ones(2), torch.zeros(2))


@pytest.mark.parametrize("filtered", [True, False])
def test_no_data_dependent_shapes_or_host_reads(filtered: bool):
    """On the meta device any .item(), .tolist(), nonzero() or boolean-mask index would raise: no data exists."""
    tensors = SamplingTensors.allocate(8, "meta")
    tensors.set_rows([CASES["combined"]] * 3)
    logits = torch.empty(8, 1000, dtype=torch.bfloat16, device="meta")
    tokens = sample_on_device(logits, tensors, *counters(8, device="meta"), filtered)
    assert tokens.shape == (8,) and tokens.dtype == torch.int64


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay_with_updated_rows():
    """Captured once, replayed with new parameters and step counters written in place."""
    batch, vocab = 64, 5000
    logits = torch.randn(batch, vocab, device="cuda")
    tensors = SamplingTensors.allocate(batch, "cuda")
    tensors.set_rows([SamplingParams(temperature=1.0, top_k=2, top_p=0.99, min_p=0.01)] * (batch // 2))
    seeds, steps = counters(batch, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        sample_on_device(logits, tensors, seeds, steps, True)  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tokens = sample_on_device(logits, tensors, seeds, steps, True)
        steps += 1
    top2 = logits.topk(2, dim=-1).indices
    replays = []
    for _ in range(4):
        graph.replay()
        half = batch // 2
        assert (tokens[:half, None] == top2[:half]).any(dim=-1).all()
        assert torch.equal(tokens[half:], logits[half:].argmax(dim=-1))
        replays.append(tokens.clone())
    assert any(not torch.equal(replays[0], other) for other in replays[1:])  # steps advance per replay
    eager = sample_on_device(logits, tensors, seeds, steps - 1, True)
    assert torch.equal(eager, replays[-1])  # the graph draws exactly what an eager call draws
    tensors.set_rows([])  # every row greedy now, with no recapture
    graph.replay()
    assert torch.equal(tokens, logits.argmax(dim=-1))
