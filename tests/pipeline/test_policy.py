"""The batching policy, driven with hand-made times (no threads, no clock)."""

import pytest

from pipeline.policy import BatchPolicy


def make(max_batch=4, max_wait_ms=5.0, max_in_flight=1, sessions=("a", "b", "c")) -> BatchPolicy:
    policy = BatchPolicy(max_batch=max_batch, max_wait_s=max_wait_ms / 1000, max_in_flight=max_in_flight)
    for session_id in sessions:
        policy.add_session(session_id)
    return policy


def test_nothing_pending_means_wait_for_an_event():
    decision = make().decide(now=1.0)
    assert decision.batch == ()
    assert decision.wake_in is None


def test_a_lone_session_goes_at_once():
    policy = make(sessions=("a",))
    policy.frame_pending("a", now=1.0)
    assert policy.decide(now=1.0).batch == ("a",)


def give_rhythm(policy: BatchPolicy, session_id: str, last: float, interval: float = 1 / 30) -> None:
    """Two earlier frames (already served) so the policy knows when the next one is due."""
    for at in (last - interval, last):
        policy.frame_pending(session_id, at)
        assert session_id in policy.decide(at).batch
        policy.frame_done(session_id)


def test_waits_for_others_until_the_window_closes():
    policy = make()
    give_rhythm(policy, "b", last=1.003 - 1 / 30)  # b's next frame is due at 1.003
    give_rhythm(policy, "a", last=1.000 - 1 / 30)
    policy.frame_pending("a", now=1.000)
    decision = policy.decide(now=1.001)
    assert decision.batch == ()
    assert decision.wake_in == pytest.approx(0.004)
    policy.frame_pending("b", now=1.003)
    # c never sent anything: with b in, nobody else is expected, so the batch goes
    assert set(policy.decide(now=1.003).batch) == {"a", "b"}


def test_the_window_closes_even_if_the_expected_frame_is_late():
    policy = make(sessions=("a", "b"))
    give_rhythm(policy, "b", last=1.002 - 1 / 30)
    give_rhythm(policy, "a", last=1.000 - 1 / 30)
    policy.frame_pending("a", now=1.000)
    assert policy.decide(now=1.004).batch == ()
    assert policy.decide(now=1.005).batch == ("a",)


def test_does_not_wait_for_a_session_whose_next_frame_is_far_off():
    policy = make(sessions=("a", "b"))
    give_rhythm(policy, "b", last=0.990)  # next b frame near 1.023: beyond a's window
    give_rhythm(policy, "a", last=1.000 - 1 / 30)
    policy.frame_pending("a", now=1.000)
    assert policy.decide(now=1.000).batch == ("a",)


def test_does_not_wait_for_a_session_that_never_sent():
    policy = make(sessions=("a", "b"))
    policy.frame_pending("a", now=1.000)
    assert policy.decide(now=1.000).batch == ("a",)


def test_goes_as_soon_as_every_session_is_in():
    policy = make()
    for session_id in ("a", "b", "c"):
        policy.frame_pending(session_id, now=1.0)
    assert set(policy.decide(now=1.0).batch) == {"a", "b", "c"}


def test_full_batch_goes_at_once_and_the_rest_follows():
    policy = make(max_batch=2)
    for session_id in ("a", "b", "c"):
        policy.frame_pending(session_id, now=1.0)
    first = policy.decide(now=1.0)
    assert len(first.batch) == 2
    assert first.wake_in == 0.0
    for session_id in first.batch:
        policy.frame_done(session_id)
    second = policy.decide(now=1.001)
    assert second.batch == tuple({"a", "b", "c"} - set(first.batch))


def test_higher_priority_first_when_saturated():
    policy = make(max_batch=1)
    policy.set_priority("c", 2)
    policy.set_priority("b", 1)
    for session_id in ("a", "b", "c"):
        policy.frame_pending(session_id, now=1.0)
    assert policy.decide(now=1.0).batch == ("c",)
    policy.frame_done("c")
    assert policy.decide(now=1.0).batch == ("b",)


def test_same_priority_oldest_first():
    policy = make(max_batch=1)
    policy.frame_pending("b", now=1.000)
    policy.frame_pending("a", now=1.002)
    policy.frame_pending("c", now=1.001)
    assert policy.decide(now=1.002).batch == ("b",)


def test_at_most_one_frame_per_session_in_flight():
    policy = make(sessions=("a",))
    policy.frame_pending("a", now=1.0)
    assert policy.decide(now=1.0).batch == ("a",)
    policy.frame_pending("a", now=1.01)
    assert policy.decide(now=1.02).batch == ()
    policy.frame_done("a")
    assert policy.decide(now=1.02).batch == ("a",)


def test_in_flight_limit_is_configurable():
    policy = make(max_in_flight=2, sessions=("a",))
    policy.frame_pending("a", now=1.0)
    assert policy.decide(now=1.0).batch == ("a",)
    policy.frame_pending("a", now=1.01)
    assert policy.decide(now=1.01).batch == ("a",)
    policy.frame_pending("a", now=1.02)
    assert policy.decide(now=1.02).batch == ()


def deliver_at(policy: BatchPolicy, session_id: str, source_fps: float, seconds: float) -> int:
    """Frames processed when a source sends at source_fps and each frame is done at once."""
    processed = 0
    for index in range(int(source_fps * seconds)):
        now = 10.0 + index / source_fps
        policy.frame_pending(session_id, now)
        decision = policy.decide(now)
        if session_id in decision.batch:
            processed += 1
            policy.frame_done(session_id)
    return processed


@pytest.mark.parametrize("cap", [15, 5, 29])
def test_fps_cap_limits_the_rate(cap):
    policy = make(sessions=("a",))
    policy.set_fps_cap("a", cap)
    processed = deliver_at(policy, "a", source_fps=30, seconds=10)
    assert processed == pytest.approx(cap * 10, abs=2)


def test_fps_cap_with_jittery_arrivals_still_reaches_the_cap():
    policy = make(sessions=("a",))
    policy.set_fps_cap("a", 15)
    processed = 0
    for index in range(300):
        now = 10.0 + index / 30 + (0.003 if index % 2 else -0.003)
        policy.frame_pending("a", now)
        if policy.decide(now).batch:
            processed += 1
            policy.frame_done("a")
    assert 145 <= processed <= 152, f"{processed} frames in 10 s at a cap of 15 fps"


def test_fps_cap_tells_when_to_wake():
    policy = make(sessions=("a",))
    policy.set_fps_cap("a", 10)
    policy.frame_pending("a", now=1.0)
    assert policy.decide(now=1.0).batch == ("a",)
    policy.frame_done("a")
    policy.frame_pending("a", now=1.03)
    decision = policy.decide(now=1.03)
    assert decision.batch == ()
    assert 0.04 < decision.wake_in <= 0.07


def test_zero_cap_stops_processing_until_raised():
    policy = make(sessions=("a",))
    policy.set_fps_cap("a", 0)
    policy.frame_pending("a", now=1.0)
    assert policy.decide(now=5.0).batch == ()
    policy.set_fps_cap("a", None)
    assert policy.decide(now=5.0).batch == ("a",)


def test_no_burst_after_an_idle_spell():
    policy = make(sessions=("a",))
    policy.set_fps_cap("a", 10)
    policy.frame_pending("a", now=1.0)
    policy.decide(now=1.0)
    policy.frame_done("a")
    # idle for 5 s, then frames at 30 fps: the cap still holds from the first one
    assert deliver_at(policy, "a", source_fps=30, seconds=2) <= 21


def test_a_capped_session_does_not_hold_a_batch_open():
    policy = make(sessions=("a", "b"))
    policy.set_fps_cap("b", 0)
    policy.frame_pending("a", now=1.0)
    assert policy.decide(now=1.0).batch == ("a",)


def test_removed_session_is_not_scheduled():
    policy = make(sessions=("a", "b"))
    policy.frame_pending("a", now=1.0)
    policy.remove_session("a")
    policy.frame_done("a")  # a late completion is harmless
    assert policy.decide(now=2.0).batch == ()


def test_negative_cap_is_refused():
    with pytest.raises(ValueError):
        make().set_fps_cap("a", -1)


def test_no_decision_ahead_that_would_split_a_finishing_session_off():
    """Deciding while a's batch still computes: b alone goes ahead only if a cannot join by waiting."""
    policy = make(sessions=("a", "b"))
    policy.frame_pending("a", now=1.000)
    assert policy.decide(now=1.000).batch == ("a",)  # a's batch computes now
    policy.frame_pending("b", now=1.010)
    policy.frame_pending("a", now=1.012)  # a's next frame waits for a's batch to end
    ahead = policy.decide(now=1.015, finishing=frozenset({"a"}))
    assert ahead.batch == () and ahead.wake_in is None
    policy.frame_done("a")
    assert set(policy.decide(now=1.020).batch) == {"a", "b"}


def test_a_decision_ahead_goes_when_no_finishing_session_can_join():
    policy = make(sessions=("a", "b"))
    policy.frame_pending("a", now=1.000)
    assert policy.decide(now=1.000).batch == ("a",)
    policy.frame_pending("b", now=1.010)  # a has no frame waiting and no known rhythm
    assert policy.decide(now=1.015, finishing=frozenset({"a"})).batch == ("b",)
