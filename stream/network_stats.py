"""One peer connection's network figures from aiortc's getStats(): bitrate in and out, the share of
the peer's packets lost on the way in, and the round-trip time, over the last seconds.

aiortc's reports count totals; the rates are differences between samples taken about once a second
(the session's stats loop takes them). Where aiortc reports nothing (no RTCP receiver report back
yet, a connection that only receives) the figure is None.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

# As the session's fps window (stats.py): long enough to smooth a keyframe's burst, short enough to
# show a drop within seconds.
WINDOW_S = 3.0


@dataclass(frozen=True)
class _Totals:
    at: float  # monotonic seconds
    bytes_in: int
    bytes_out: int
    packets_received: int
    packets_lost: int


class NetworkStats:
    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_s = window_s
        self._samples: deque[_Totals] = deque()
        self._rtt_ms: float | None = None

    def add(self, report: Mapping[str, object], now: float) -> None:
        """Takes one getStats() report (an RTCStatsReport: stats objects by id)."""
        bytes_in = bytes_out = received = lost = 0
        rtts: list[float] = []
        for stats in report.values():
            kind = getattr(stats, "type", None)
            if kind == "transport":  # every byte on the wire: RTP, RTCP, DTLS (one transport when bundled)
                bytes_in += stats.bytesReceived or 0
                bytes_out += stats.bytesSent or 0
            elif kind == "inbound-rtp":
                received += stats.packetsReceived or 0
                lost += max(0, stats.packetsLost or 0)  # RTP's cumulative loss may go negative on duplicates
            elif kind == "remote-inbound-rtp" and stats.roundTripTime is not None:
                rtts.append(stats.roundTripTime)  # from the peer's receiver reports on what we send
        self._samples.append(_Totals(now, bytes_in, bytes_out, received, lost))
        while len(self._samples) > 2 and now - self._samples[1].at >= self._window_s:
            self._samples.popleft()
        self._rtt_ms = max(rtts) * 1000 if rtts else None

    def as_dict(self) -> dict[str, float | None]:
        """{"bitrate_in_bps", "bitrate_out_bps", "packets_lost_ratio" (0-1), "rtt_ms"}; None where not
        known yet (a rate needs two samples, a loss ratio packets in between)."""
        figures: dict[str, float | None] = {
            "bitrate_in_bps": None,
            "bitrate_out_bps": None,
            "packets_lost_ratio": None,
            "rtt_ms": None if self._rtt_ms is None else round(self._rtt_ms, 1),
        }
        if len(self._samples) < 2:
            return figures
        first, last = self._samples[0], self._samples[-1]
        span = last.at - first.at
        if span > 0:
            figures["bitrate_in_bps"] = round(max(0, last.bytes_in - first.bytes_in) * 8 / span)
            figures["bitrate_out_bps"] = round(max(0, last.bytes_out - first.bytes_out) * 8 / span)
        lost = max(0, last.packets_lost - first.packets_lost)
        expected = max(0, last.packets_received - first.packets_received) + lost
        if expected:
            figures["packets_lost_ratio"] = round(lost / expected, 4)
        return figures
