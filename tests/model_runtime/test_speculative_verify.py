"""verify.py's acceptance: worked by hand for greedy drafts, and, for sampling, the distribution of the committed
tokens measured over many seeded draws of the engine's own sampler against the target distribution (after
temperature and top-p, by sampling.filter_logits, the readable definition), with a chi-square bound; the classic
wrong rule (on rejection, sampling from p without removing the drafted token's mass) fails the same bound."""

from __future__ import annotations

import torch

from warpcode.model_runtime.sampling import SamplingParams, SamplingTensors, filter_logits, sample_on_device
from warpcode.model_runtime.speculative import Verdict, verify_draft

DRAWS = 20_000
CHI2_999 = {
    3: 16.266,
    4: 18.467,
    5: 20.515,
    6: 22.458,
}  # the chi-square distribution's 0.999 quantile by degrees of freedom


def walk(draft: list[int], targets: list[int], stop_after: int | None = None) -> tuple[Verdict, list[int], list[str]]:
    committed, calls = [], []

    def choose(position: int) -> int:
        calls.append(f"choose {position}")
        return targets[position]

    def commit(token: int) -> bool:
        calls.append(f"commit {token}")
        committed.append(token)
        return stop_after is None or len(committed) < stop_after

    return verify_draft(draft, choose, commit), committed, calls


def test_greedy_keeps_the_longest_matching_prefix_and_the_token_after_it():
    assert walk([1, 2, 3], [1, 2, 9, 4])[:2] == (Verdict(3, 2), [1, 2, 9])
    assert walk([1, 2, 3], [7, 2, 3, 4])[:2] == (Verdict(1, 0), [7])
    assert walk([1, 2, 3], [1, 2, 3, 4])[:2] == (Verdict(4, 3), [1, 2, 3, 4])  # whole: the last position's too
    assert walk([], [5])[:2] == (Verdict(1, 0), [5])


def test_each_position_is_chosen_after_the_tokens_before_it_are_committed():
    # the grammar, penalties and step count a choice reads must include every token committed before it
    assert walk([1, 2], [1, 2, 3])[2] == ["choose 0", "commit 1", "choose 1", "commit 2", "choose 2", "commit 3"]


def test_a_request_that_ends_inside_the_draft_commits_nothing_after_its_end():
    assert walk([1, 2, 3], [1, 2, 3, 4], stop_after=2)[:2] == (Verdict(2, 2), [1, 2])
    assert walk([1, 2, 3], [1, 9, 3, 4], stop_after=2)[:2] == (Verdict(2, 1), [1, 9])


def target(logits: list[float], params: SamplingParams) -> torch.Tensor:
    return torch.softmax(filter_logits(torch.tensor([logits]) / params.temperature, params), dim=-1)[0].double()


def draws(logits: list[float], params: SamplingParams, step: int) -> list[int]:
    """DRAWS tokens from the engine's sampler, one per seed, at decode step `step`."""
    rows = SamplingTensors.allocate(DRAWS, "cpu")
    rows.set_rows([params] * DRAWS)
    seeds, steps = torch.arange(DRAWS), torch.full((DRAWS,), step)
    return sample_on_device(torch.tensor([logits] * DRAWS), rows, seeds, steps, filtered=True).tolist()


def fits(tokens: list[int], expected: torch.Tensor) -> bool:
    """Pearson's chi-square test at the 0.001 level: could `tokens` be draws from `expected`? A token outside its
    support fails at once."""
    counts = torch.bincount(torch.tensor(tokens, dtype=torch.long), minlength=expected.numel()).double()
    support = [t for t in range(expected.numel()) if expected[t] > 0]
    if counts.sum() != counts[support].sum():
        return False
    wanted = expected * len(tokens)
    statistic = float(sum((counts[t] - wanted[t]) ** 2 / wanted[t] for t in support))
    return statistic < CHI2_999[len(support) - 1]


def test_sampling_against_a_point_mass_draft_keeps_the_target_distribution():
    params = SamplingParams(temperature=0.8, top_p=0.95)
    first_logits, second_logits = [1.0, 0.2, -0.3, 0.8, -1.0, 0.5, -4.0], [0.1, 1.2, -0.5, 0.0, 0.3, -0.2, -4.0]
    p, q = target(first_logits, params), target(second_logits, params)
    assert (p == 0).any() and (q == 0).any()  # top-p dropped tokens: the filters are part of the target
    drafted = 3  # p(3) about 0.2: accepted and rejected both often
    first, second = draws(first_logits, params, step=0), draws(second_logits, params, step=1)

    committed = []
    for seed in range(DRAWS):
        tokens: list[int] = []
        choose = [first[seed], second[seed], 0].__getitem__  # position 2 is never reached: 4 is not drafted
        verify_draft([drafted, 4], choose, lambda token, out=tokens: out.append(token) or True)
        committed.append(tokens)
    heads = [tokens[0] for tokens in committed]
    assert fits(heads, p)
    accepted = [tokens for tokens in committed if tokens[0] == drafted]
    assert abs(len(accepted) / DRAWS - p[drafted]) < 4 * (p[drafted] * (1 - p[drafted]) / DRAWS) ** 0.5
    assert fits([tokens[1] for tokens in accepted], q)  # after an acceptance: the target's distribution there
    rest = p.clone()  # a rejection samples p with the drafted token's mass removed, renormalised
    rest[drafted] = 0
    assert fits([token for token in heads if token != drafted], rest / rest.sum())

    # The wrong rule, accepting with probability p(t) and otherwise sampling p as it is, fails the same bound.
    uniforms = torch.rand(DRAWS, generator=torch.Generator().manual_seed(0)).tolist()
    wrong = [drafted if u < p[drafted] else token for u, token in zip(uniforms, first, strict=True)]
    assert not fits(wrong, p)


def test_speculation_is_on_by_default_on_a_cpu_and_off_on_a_gpu():
    from warpcode.model_runtime.speculative import default_mode

    assert default_mode("cpu") == "suffix" and default_mode("cuda") == "off"
