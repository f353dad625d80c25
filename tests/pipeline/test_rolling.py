"""Rates over a rolling window, from a session's first second on."""

import pytest

from pipeline.rolling import RollingWindow


def frames(window: RollingWindow, fps: float, start: float, seconds: float) -> float:
    at = start
    for _ in range(round(fps * seconds)):
        at += 1 / fps
        window.add(now=at)
    return at


@pytest.mark.parametrize("seconds", [1.0, 2.0, 3.0, 6.0])
def test_a_steady_rate_reads_right_from_the_first_second(seconds):
    """A 3 s window read 10 fps after the first second of 30 fps, and 20 after two."""
    window = RollingWindow(3.0)
    end = frames(window, 30, start=100.0, seconds=seconds)
    assert window.rate(now=end) == pytest.approx(30, rel=0.05)


def test_one_early_event_is_not_a_burst_and_silence_reads_zero():
    window = RollingWindow(3.0)
    window.add(now=10.0)
    assert window.rate(now=10.01) == 1.0
    assert window.rate(now=20.0) == 0.0
