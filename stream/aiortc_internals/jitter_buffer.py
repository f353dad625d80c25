"""Video jitter buffer that releases a frame as soon as it is complete.

aiortc 1.16's JitterBuffer only knows a frame is complete when the first
packet of the *next* frame arrives, which costs one frame interval (33 ms at
30 fps) per receive hop. The RTP marker bit already says "last packet of this
frame", so we release on it. The subclass overrides the private `_remove_frame` and reads the
parent's `_origin`, `_packets` and `_prefetch`, and the `_data` RTCRtpReceiver sets on packets.
"""

from __future__ import annotations

import logging

from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

logger = logging.getLogger(__name__)


class MarkerJitterBuffer(JitterBuffer):
    """JitterBuffer releasing video frames on the RTP marker bit.

    Only `_remove_frame` is overridden: the parent's `add()` keeps handling
    misordered packets, capacity overflow and the PLI flag.

    A frame is released when its packets are contiguous from the buffer origin
    and either the last one carries the marker bit, or a packet with another
    timestamp follows (the sender did not set the marker, or it was lost).

    Frames whose joined payload is empty are dropped, never released: Chrome
    sends padding-only packets reusing the previous frame's timestamp, and an
    empty packet handed to PyAV's decoder means "flush", after which every
    decode raises EOFError and the stream dies silently.

    Limitation inherited from the parent's `add()` signature: at most one frame
    is released per added packet. When a retransmission completes several
    frames at once, the backlog drains with the following packets (multi-packet
    frames or padding), not instantly.
    """

    def _remove_frame(self, sequence_number: int) -> JitterFrame | None:
        # prefetch is an audio feature (hold N frames); keep the parent's
        # semantics there rather than silently ignoring it.
        if self._prefetch:
            return super()._remove_frame(sequence_number)

        # Drop empty groups one by one until a real frame is found or the
        # contiguous run ends; each pass starts again at the (moved) origin.
        while True:
            complete = self._first_complete_group()
            if complete is None:
                return None
            count, frame = complete
            self.remove(count)
            if frame.data:
                return frame
            logger.debug(
                "dropped %d padding-only packet(s) with timestamp %d",
                count,
                frame.timestamp,
            )

    def _first_complete_group(self) -> tuple[int, JitterFrame] | None:
        """Return (packet count, frame) for the group at the origin, if complete."""
        if self._origin is None:
            return None

        packets: list[RtpPacket] = []
        for offset in range(self.capacity):
            packet = self._packets[(self._origin + offset) % self.capacity]
            if packet is None:
                # gap: wait for the missing packet (NACK / retransmission)
                return None
            if packets and packet.timestamp != packets[0].timestamp:
                # a new timestamp ends the group even without a marker
                return len(packets), self._join(packets)
            packets.append(packet)
            if packet.marker:
                return len(packets), self._join(packets)
        return None

    @staticmethod
    def _join(packets: list[RtpPacket]) -> JitterFrame:
        # `_data` is the depayloaded codec data set by RTCRtpReceiver.
        data = b"".join(getattr(p, "_data", b"") for p in packets)
        return JitterFrame(data=data, timestamp=packets[0].timestamp)
