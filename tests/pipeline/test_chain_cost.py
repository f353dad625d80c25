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


def test_larger_batches_measured_no_dearer_read_as_a_fixed_cost_a_batch():
    """A chain whose cost is its batch's (fixed-cost:20:0): batching is free, and a second session fits."""
    cost = ChainCost()
    cost.add(1, 0.020)
    cost.add(4, 0.019)
    assert (cost.line().per_batch_s, cost.line().per_frame_s) == (0.020, 0.0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_where_one_size_runs_the_last_lines_shape_is_scaled_to_it():
    """A spike measured at batch 1 alone must also raise batch 2's cost, and its end lower it:
    else a size whose sessions were shed keeps the spike's cost and nobody is ever let back in."""
    clock = Clock()
    cost = ChainCost(clock)
    for _ in range(30):  # both sizes run: the line is theirs
        cost.add(1, 0.016)
        cost.add(2, 0.028)
    assert cost.line().batch_s(2) == pytest.approx(0.028, rel=0.02)
    clock.now = 10.0  # batch 2 stops running (its sessions were shed), and the device slows 3x
    for _ in range(40):
        cost.add(1, 0.048)
    assert cost.line().batch_s(1) == pytest.approx(0.048, rel=0.02)
    assert cost.line().batch_s(2) == pytest.approx(0.084, rel=0.05)
    for _ in range(40):  # the spike ends
        cost.add(1, 0.016)
    assert cost.line().batch_s(2) == pytest.approx(0.028, rel=0.05)


def test_a_first_line_with_one_size_running_takes_its_shape_from_every_size_measured():
    clock = Clock()
    cost = ChainCost(clock)
    cost.add(1, 0.010)  # the start's blank frames: cheaper than faces
    cost.add(4, 0.028)
    clock.now = 10.0
    for _ in range(40):
        cost.add(1, 0.020)  # a live session with a face
    assert cost.line().batch_s(1) == pytest.approx(0.020, rel=0.02)
    assert cost.line().batch_s(4) == pytest.approx(0.056, rel=0.05)
