"""pipeline/chain_cost.py: the line a batch's cost follows, from measured batches."""

import pytest

from pipeline.chain_cost import ChainCost


def test_a_fixed_cost_chains_line_is_found_from_two_sizes():
    cost = ChainCost()
    for _ in range(3):
        cost.add(1, 0.004 + 0.012)
        cost.add(4, 0.004 + 0.048)
    line = cost.line()
    assert line.per_batch_s == pytest.approx(0.004) and line.per_frame_s == pytest.approx(0.012)


def test_one_size_alone_is_read_as_cost_per_frame():
    cost = ChainCost()
    cost.add(2, 0.030)
    line = cost.line()
    assert (line.per_batch_s, line.per_frame_s) == (0.0, pytest.approx(0.015))
    assert ChainCost().line() is None


def test_noise_that_makes_larger_batches_cheaper_charges_the_dearest_frame():
    cost = ChainCost()
    cost.add(1, 0.020)
    cost.add(2, 0.018)
    assert cost.line().per_batch_s == 0.0 and cost.line().per_frame_s == pytest.approx(0.020)


def test_a_slower_device_moves_the_sizes_that_no_longer_run_too():
    """A spike measured at batch 1 alone must also raise batch 4's cost, and its end lower it:
    else a size whose sessions were shed keeps the spike's cost and nobody is ever let back in."""
    cost = ChainCost()
    cost.add(1, 0.016)
    cost.add(4, 0.052)
    for _ in range(40):
        cost.add(1, 0.032)
    assert cost.by_size()[4] > 0.052 * 1.3  # part of the way: its own batches set the rest
    for _ in range(40):
        cost.add(1, 0.016)
    assert cost.by_size()[4] == pytest.approx(0.052, rel=0.1)
    assert cost.by_size()[1] == pytest.approx(0.016, rel=0.02)


def test_each_size_still_converges_to_its_own_cost():
    cost = ChainCost()
    cost.add(1, 0.050)  # a wrong first reading (a cold start)
    cost.add(4, 0.052)
    for _ in range(100):
        cost.add(1, 0.016)
        cost.add(4, 0.052)
    assert cost.by_size()[1] == pytest.approx(0.016, rel=0.05) and cost.by_size()[4] == pytest.approx(0.052, rel=0.05)
