"""Audio jitter buffer that hands each packet on the moment it arrives.

aiortc 1.16's audio JitterBuffer (prefetch=4) holds a packet until four newer ones have arrived:
80 ms of Opus at a server that only relays the audio, on top of the viewer's own jitter buffer.
The relay keeps each frame's RTP timing (its pts), so the viewer's buffer still absorbs the
network's jitter; the server need not hold anything. One RTP packet is one audio frame for every
audio codec aiortc speaks (Opus, PCMU, PCMA, G.722), so a packet is complete on arrival.

A packet newer than the last one handed on goes on at once, and any gap before it is given up
(aiortc does not ask again for lost audio); one older than that arrived too late and is dropped by
the parent's `add()`, which also keeps handling sequence wrap-around and capacity overflow. The
subclass overrides the private `_remove_frame` and reads the parent's `_origin` and `_packets`
and the `_data` RTCRtpReceiver sets on packets.
"""

from __future__ import annotations

from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.utils import uint16_add

# aiortc's own audio buffer size.
AUDIO_JITTER_CAPACITY = 16


class ArrivalJitterBuffer(JitterBuffer):
    def __init__(self) -> None:
        super().__init__(capacity=AUDIO_JITTER_CAPACITY)

    def _remove_frame(self, sequence_number: int) -> JitterFrame | None:
        packet = self._packets[sequence_number % self.capacity]
        if packet is None or self._origin is None:
            return None
        # everything up to this packet leaves the buffer: the gap before it is lost audio
        self.remove(uint16_add(sequence_number, -self._origin) + 1)
        return JitterFrame(data=packet._data, timestamp=packet.timestamp)  # type: ignore[attr-defined]
