"""What the sessions and viewers that have ended counted, kept for the node's metrics.

The metrics add these to the live sessions' own counts at each scrape: a counter must never go
back, and a session's counts leave with it. The manager adds a session in the same step that
forgets it, so no scrape sees it twice or not at all.
"""

from __future__ import annotations

from collections import Counter

from stream.stats import SessionStats
from stream.webrtc_counts import PeerCounts, WebrtcCounts

FRAME_RESULTS = ("processed", "dropped", "failed", "passed_through", "throttled", "waiting")


def frames_by_result(stats: SessionStats) -> dict[str, int]:
    """The session's frames by what became of them (docs/metrics.md says what each means)."""
    return {
        "processed": stats.frames_processed,
        "dropped": stats.frames_dropped,
        "failed": stats.frames_failed,
        "passed_through": stats.frames_passed_through,
        "throttled": stats.frames_throttled,
        "waiting": stats.frames_waiting,
    }


def tokens_spent(meter_event: dict[str, object] | None) -> tuple[str, float] | None:
    """(tier, tokens spent) from a meter's event; None without a meter."""
    if meter_event is None:
        return None
    return str(meter_event["tier"]), float(meter_event["spent"])  # type: ignore[arg-type]


class EndedTotals:
    def __init__(self) -> None:
        self.sessions = 0
        self.frames = Counter[str]()
        self.frames_received = 0
        self.frames_sent = 0
        self.tokens_by_tier = Counter[str]()
        self.webrtc = PeerCounts()

    def add_session(self, stats: SessionStats, webrtc: WebrtcCounts, meter_event: dict[str, object] | None) -> None:
        self.sessions += 1
        self.frames.update(frames_by_result(stats))
        self.frames_received += stats.frames_in
        self.frames_sent += stats.frames_out
        if (spent := tokens_spent(meter_event)) is not None:
            self.tokens_by_tier[spent[0]] += spent[1]
        self.webrtc.add(webrtc.counts)

    def add_viewer(self, webrtc: WebrtcCounts) -> None:
        self.webrtc.add(webrtc.counts)
