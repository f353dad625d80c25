"""stream/capacity.py, load_shedding.py and waiting_line.py: the node's capacity, by hand-made numbers."""

import dataclasses

import pytest

from pipeline.chain_cost import CostLine
from stream.capacity import DEVICE_PLAN, SIZES, Demand, Node, device_busy, fits_more, floor_holds, rate_share
from stream.load_shedding import LINE, RATE, RESOLUTION, Processed, restore, shed
from stream.waiting_line import WaitingLine

# The issue's node: --chain fixed-cost:4:12, a device of about 75 frames a second.
NODE = Node(
    line=CostLine(0.004, 0.012),
    max_batch=8,
    target_fps=30,
    floor_fps=24,
    codec_s_per_pixel=18e-9,
    cores=2,
    chain_threads=0,
    max_sessions=None,
)
CAMERA = Demand(30, 640, 480)


def test_the_issues_node_processes_two_sessions_at_full_rate_not_five_at_fifteen():
    assert fits_more(NODE, [], 640, 480) == 2
    assert rate_share(NODE, [CAMERA] * 2, DEVICE_PLAN) == 1.0
    assert rate_share(NODE, [CAMERA] * 3, DEVICE_PLAN) * 30 < 24  # a third is not admitted: planned, below the floor
    assert floor_holds(NODE, [CAMERA] * 3)  # but three do not shed: with all of its time each gets 25
    assert not floor_holds(NODE, [CAMERA] * 4)
    assert device_busy(NODE, [CAMERA] * 5) == pytest.approx(30 * (0.004 + 5 * 0.012))


def test_batches_beyond_the_largest_cost_their_fixed_part_again():
    node = dataclasses.replace(NODE, line=CostLine(0.010, 0.001), max_batch=2)
    assert device_busy(node, [CAMERA] * 4) == pytest.approx(30 * (2 * 0.010 + 4 * 0.001))


def test_larger_frames_fit_fewer_when_the_cores_are_what_runs_out():
    node = dataclasses.replace(NODE, line=CostLine(0.0, 0.0001))  # a fast device: the codecs decide
    counts = {name: fits_more(node, [], *size) for name, size in SIZES.items()}
    assert counts["360p"] > counts["480p"] > counts["720p"] > counts["1080p"] >= 1
    # 0.8 of 2 cores over 18 ns a pixel, 30 frames a second of 1280x720
    assert counts["720p"] == int(2 * 0.8 / (18e-9 * 1280 * 720 * 30))


def test_a_cpu_device_counts_the_chains_cores_against_the_codecs():
    on_cpu = dataclasses.replace(NODE, chain_threads=2)
    assert fits_more(on_cpu, [], 640, 480) < fits_more(NODE, [], 640, 480)


def test_max_sessions_bounds_the_model_and_counts_waiting_sessions():
    bounded = dataclasses.replace(NODE, line=CostLine(0.0, 0.0001), max_sessions=3)
    assert fits_more(bounded, [], 640, 480) == 3
    assert fits_more(bounded, [CAMERA, Demand(0, 640, 480)], 640, 480) == 1


def test_before_any_batch_the_device_is_taken_as_free():
    assert floor_holds(dataclasses.replace(NODE, line=None), [CAMERA] * 5)


def session(name, priority, since, step=0):
    return Processed(name, priority, since, step, 640, 480)


SLOW = dataclasses.replace(NODE, line=CostLine(0.004, 0.024))  # the device's cost doubled


def test_a_spike_sheds_free_sessions_step_by_step_before_any_paid_one():
    processed = [session("free-old", 0, 1.0), session("free-new", 0, 2.0), session("paid", 1, 0.5)]
    steps = shed(SLOW, processed, [])
    assert steps == {"free-new": RATE, "free-old": RATE}  # newest first; paid untouched this tick
    processed = [dataclasses.replace(s, step=steps.get(s.session_id, s.step)) for s in processed]
    steps = shed(SLOW, processed, [])
    assert steps == {"free-new": RESOLUTION, "free-old": RESOLUTION}
    processed = [dataclasses.replace(s, step=steps.get(s.session_id, s.step)) for s in processed]
    steps = shed(SLOW, processed, [])
    assert steps == {"free-new": LINE}  # the paid one and the older free one at half rate: 25 fps
    processed = [dataclasses.replace(s, step=steps.get(s.session_id, s.step)) for s in processed]
    assert shed(SLOW, processed, []) == {}


def test_the_earliest_session_of_the_highest_tier_is_never_shed():
    """A device too slow for one session alone gives it all it has: shedding it helps nobody."""
    crawling = dataclasses.replace(NODE, line=CostLine(0.0, 0.100))
    alone = [session("free", 0, 1.0)]
    assert shed(crawling, alone, []) == {}
    pair = [session("free-old", 0, 1.0), session("free-new", 0, 2.0)]
    assert shed(crawling, pair, []) == {"free-new": RATE}


def test_paid_is_shed_only_once_every_free_session_waits_in_line():
    processed = [session("paid-a", 1, 1.0), session("paid-b", 1, 2.0), session("vip", 2, 0.0), session("vip-2", 2, 0.1)]
    very_slow = dataclasses.replace(NODE, line=CostLine(0.004, 0.040))
    assert set(shed(very_slow, processed, [])) == {"paid-a", "paid-b"}


def test_shed_steps_are_undone_only_when_full_rate_holds_highest_tier_first():
    processed = [session("free", 0, 1.0, RATE), session("paid", 1, 2.0, RATE)]
    assert restore(NODE, processed, []) == {"paid": 0, "free": 0}
    assert restore(SLOW, processed, []) == {}  # between floor and full rate nothing moves
    # room for one to come back: the paid one, although it asked later
    tight = dataclasses.replace(NODE, line=CostLine(0.004, 0.017))
    assert restore(tight, processed, []) == {"paid": 0}


def test_the_line_puts_higher_tiers_first_then_the_earliest():
    line = WaitingLine(started_at=0.0)
    line.join("free-early", 0, 1.0)
    line.join("free-late", 0, 2.0)
    line.join("vip-late", 2, 3.0)
    assert [p.session_id for p in line.in_order()] == ["vip-late", "free-early", "free-late"]
    assert line.position("free-late") == 3 and line.position("nobody") is None
    line.leave("vip-late")
    assert line.position("free-late") == 2


def test_the_estimated_wait_follows_how_often_places_free_up():
    line = WaitingLine(started_at=0.0)
    assert line.estimated_wait_s(1, now=5.0) is None  # nobody left yet: nobody knows
    for at in (10.0, 20.0, 30.0, 40.0):
        line.place_freed(at)
    assert line.estimated_wait_s(1, now=40.0) == pytest.approx(10.0)
    assert line.estimated_wait_s(3, now=40.0) == pytest.approx(30.0)
    assert line.estimated_wait_s(1, now=40.0 + 700) is None  # those departures are too old to say
