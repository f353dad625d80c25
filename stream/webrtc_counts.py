"""One peer connection's WebRTC counts for the node's metrics: packets received and lost, NACKs and
PLIs sent, bytes in and out.

aiortc's getStats() gives the packets and bytes; it counts no NACKs or PLIs, so the receivers'
feedback is counted as it leaves (aiortc_internals.count_feedback_sent). getStats() is read when
the metrics are scraped and once more as the peer closes, not per packet. Each figure only rises
(a stream's packets lost falls when a late packet arrives), so the node's counters never go back.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from aiortc import RTCPeerConnection

from stream.aiortc_internals import count_feedback_sent

logger = logging.getLogger(__name__)


@dataclass
class PeerCounts:
    packets_received: int = 0
    packets_lost: int = 0
    nacks_sent: int = 0
    plis_sent: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0

    def add(self, other: PeerCounts) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


class WebrtcCounts:
    """The counts of one peer connection (a session's or a viewer's)."""

    def __init__(self) -> None:
        self.counts = PeerCounts()

    def count_feedback(self, pc: RTCPeerConnection) -> None:
        """Counts the NACKs and PLIs the connection's receivers send; after the offer is applied."""
        for transceiver in pc.getTransceivers():
            count_feedback_sent(transceiver.receiver, self._feedback_sent)

    def _feedback_sent(self, kind: str) -> None:
        if kind == "nack":
            self.counts.nacks_sent += 1
        else:
            self.counts.plis_sent += 1

    async def refresh(self, pc: RTCPeerConnection) -> None:
        """Reads the connection's packets and bytes (getStats: no network, a few microseconds)."""
        try:
            report = await pc.getStats()
        except Exception as exc:  # a connection torn down meanwhile: keep what was read before
            logger.debug("getStats failed: %s", exc)
            return
        received = lost = bytes_in = bytes_out = 0
        for stats in report.values():
            if stats.type == "inbound-rtp":
                received += stats.packetsReceived
                lost += max(stats.packetsLost, 0)
            elif stats.type == "transport":  # one per transport: BUNDLE has one for every track
                bytes_in += stats.bytesReceived
                bytes_out += stats.bytesSent
        counts = self.counts
        counts.packets_received = max(counts.packets_received, received)
        counts.packets_lost = max(counts.packets_lost, lost)
        counts.bytes_received = max(counts.bytes_received, bytes_in)
        counts.bytes_sent = max(counts.bytes_sent, bytes_out)
