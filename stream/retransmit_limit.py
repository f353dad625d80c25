"""A limit on the packets a sender resends for a peer's NACKs.

aiortc's sender resends every sequence number a NACK names, duplicates included, one SRTP
protect and send each, on the event loop. One NACK can name 5,000 packets in 1.2 KB: 25 of them a
second from one peer took a 30 fps session beside it down to 6-10 fps and 1.7 s of latency
(bench/results/2026-12-01-what-peers-send.md). Limited, a sender resends each packet at most once per RESEND_GAP_S and at
most RESENDS_PER_S packets a second (with a burst of as many), far above what real loss asks
for: a 2 Mbps stream of 1,200-byte packets sends about 210 a second.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from aiortc import RTCRtpSender

from stream.aiortc_internals import filter_nacks

RESENDS_PER_S = 300.0
RESEND_GAP_S = 0.05
REMEMBERED = 1024  # recently resent sequence numbers kept for the gap


class RetransmitLimit:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tokens, self._tokens_at = RESENDS_PER_S, clock()
        self._resent: OrderedDict[int, float] = OrderedDict()  # sequence number -> when

    def allowed(self, lost: list[int]) -> list[int]:
        """The NACKed sequence numbers to resend now, in order, without duplicates."""
        now = self._clock()
        self._tokens = min(RESENDS_PER_S, self._tokens + (now - self._tokens_at) * RESENDS_PER_S)
        self._tokens_at = now
        resend = []
        for seq in dict.fromkeys(lost):
            if self._tokens < 1:
                break
            last = self._resent.get(seq)
            if last is not None and now - last < RESEND_GAP_S:
                continue
            self._resent[seq] = now
            self._resent.move_to_end(seq)
            self._tokens -= 1
            resend.append(seq)
        while len(self._resent) > REMEMBERED:
            self._resent.popitem(last=False)
        return resend


def limit_retransmissions(sender: RTCRtpSender, limit: RetransmitLimit | None = None) -> RetransmitLimit:
    """Makes `sender` resend only what `limit` allows of each NACK (its RTCP handler, wrapped)."""
    limit = limit if limit is not None else RetransmitLimit()
    filter_nacks(sender, limit.allowed)
    return limit
