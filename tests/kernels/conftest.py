"""Checks shared by the CPU and GPU tests of the fused norm kernel and of the paged KV cache, as fixtures."""

import pytest

from .paged_cache import make_block_table, scatter_blocks
from .ulps import assert_reference_but_rare_one_ulp_flips


@pytest.fixture
def rmsnorm_within_one_ulp_flips():
    """assert_reference_but_rare_one_ulp_flips(normed, x, weight, residual, eps, max_fraction)."""
    return assert_reference_but_rare_one_ulp_flips


@pytest.fixture
def block_table():
    """make_block_table(lengths, block_size, max_blocks, seed=0, spare_blocks=2, device="cpu")."""
    return make_block_table


@pytest.fixture
def paged_pool():
    """scatter_blocks(cache, table, lengths, block_size, num_blocks, fill)."""
    return scatter_blocks
