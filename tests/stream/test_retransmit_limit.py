"""The limit on packets resent for a peer's NACKs: no duplicates, a gap per packet, a rate."""

import asyncio

from aiortc.rtp import RTCP_RTPFB_NACK, RtcpRtpfbPacket

from stream.retransmit_limit import RESEND_GAP_S, RESENDS_PER_S, RetransmitLimit
from support.server import one_live_session


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_a_nack_is_resent_without_duplicates_and_each_packet_once_per_gap():
    clock = Clock()
    limit = RetransmitLimit(clock)
    assert limit.allowed([5, 6, 5, 7, 6]) == [5, 6, 7]
    assert limit.allowed([5, 8]) == [8], "5 was just resent"
    clock.now += RESEND_GAP_S * 1.01
    assert limit.allowed([5]) == [5], "real loss of a resent packet is asked again later"


def test_resends_are_capped_at_the_rate():
    clock = Clock()
    limit = RetransmitLimit(clock)
    first = limit.allowed(list(range(1000)))
    assert len(first) == RESENDS_PER_S  # the burst
    clock.now += 0.1
    assert len(limit.allowed(list(range(1000, 2000)))) == RESENDS_PER_S * 0.1
    clock.now += 10
    assert len(limit.allowed(list(range(2000, 2100)))) == 100, "real loss, well under the rate, all resent"


async def test_a_sessions_sender_resends_within_the_limit_whatever_the_nacks_name():
    """One peer's NACK naming 5,100 packets (300 copies of 17) made the server resend all of them,
    on the event loop every session shares."""
    async with one_live_session(frames=10) as live:
        server_pc = live.server_session._pc
        [sender] = [t.sender for t in server_pc.getTransceivers() if t.kind == "video"]
        resent = []
        resend = sender._retransmit

        async def counting(seq):
            resent.append(seq)
            await resend(seq)

        sender._retransmit = counting
        recent = list(range(17))
        for _ in range(5):
            nack = RtcpRtpfbPacket(fmt=RTCP_RTPFB_NACK, ssrc=1, media_ssrc=sender._ssrc, lost=recent * 300)
            await sender._handle_rtcp_packet(nack)
            await asyncio.sleep(0)
        assert len(resent) == 17, f"{len(resent)} resends for 5 NACKs of the same 17 packets"
        await live.session.close()
