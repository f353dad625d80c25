"""How the node's device is shared, over the last few seconds, for the operator's view: each
session's share of the frames the batches ran (`batch_share`), and the share of the time the
device spent computing batches (`busy_share`).

Both come from counters that only grow (the runner's batches and frames, each session's frames
back from the runner), sampled when a dashboard asks: the share over a window is the difference
between the newest sample and the oldest one still in it. Nothing is added to the frame path.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web

from pipeline.runner import BatchRunner
from stream.session import Session

# The shares are over about this long: long enough that a few batches make a share, short enough
# that a session that stopped sending falls to 0 within a few of the page's seconds.
WINDOW_S = 5.0
# Samples closer than this add nothing (several dashboards ask each second).
MIN_SAMPLE_GAP_S = 0.5


@dataclass(frozen=True)
class _Sample:
    at: float  # time.monotonic()
    batches: int
    frames: int  # every frame the batches ran
    chain_ms_p50: float | None  # a batch's compute, the median of the runner's last 10 s
    by_session: dict[str, int]  # each session's frames back from the runner


def _frames_from_runner(session: Session) -> int:
    """The session's frames the runner returned (processed, failed, or left as they were); a
    throttled session's frames bypass the runner and are not counted."""
    stats = session.stats
    return stats.frames_processed + stats.frames_failed + stats.frames_passed_through


class SchedulerShares:
    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_s = window_s
        self._samples: deque[_Sample] = deque()

    def sample(self, runner: BatchRunner, sessions: Iterable[Session], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self._samples and now - self._samples[-1].at < MIN_SAMPLE_GAP_S:
            return
        stats = runner.stats()
        self._samples.append(
            _Sample(
                at=now,
                batches=int(stats["batches"]),  # type: ignore[call-overload]
                frames=int(stats["frames"]),  # type: ignore[call-overload]
                chain_ms_p50=stats["chain_ms"]["p50"],  # type: ignore[index]
                by_session={session.id: _frames_from_runner(session) for session in sessions},
            )
        )
        # the oldest sample kept is the last one at least a window old: the window stays covered
        while len(self._samples) > 2 and now - self._samples[1].at >= self._window_s:
            self._samples.popleft()

    def _span(self) -> tuple[_Sample, _Sample] | None:
        if len(self._samples) < 2:
            return None
        return self._samples[0], self._samples[-1]

    def busy_share(self) -> float | None:
        """0-1: the batches run in the window times their median compute time, over the window.
        An estimate (the runner keeps each batch's time only as percentiles); null until two samples."""
        span = self._span()
        if span is None:
            return None
        first, last = span
        batches = last.batches - first.batches
        if batches == 0:
            return 0.0
        if last.chain_ms_p50 is None:
            return None
        return round(min(1.0, batches * last.chain_ms_p50 / 1000 / (last.at - first.at)), 4)

    def batch_share(self, session_id: str) -> float | None:
        """0-1: the session's share of the frames the batches ran in the window; null until the
        session is in two samples."""
        span = self._span()
        if span is None:
            return None
        first, last = span
        if session_id not in last.by_session:
            return None
        before = first.by_session.get(session_id, 0)  # a session that started in the window had none
        frames = last.frames - first.frames
        if frames <= 0:
            return 0.0
        return round(min(1.0, max(0, last.by_session[session_id] - before) / frames), 3)


SCHEDULER_SHARES = web.AppKey("scheduler_shares", SchedulerShares)
