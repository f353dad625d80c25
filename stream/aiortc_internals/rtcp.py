"""What an RTCRtpSender does with the NACKs it receives.

The sender's RTCP handler (`_handle_rtcp_packet`, private) resends every sequence number a NACK
names; wrapping it on one instance lets us shorten each NACK's list first.
"""

from __future__ import annotations

from collections.abc import Callable

from aiortc import RTCRtpSender
from aiortc.rtp import RTCP_RTPFB_NACK, RtcpRtpfbPacket


def filter_nacks(sender: RTCRtpSender, allowed: Callable[[list[int]], list[int]]) -> None:
    """Makes `sender` resend, of each NACK's lost sequence numbers, only those `allowed` returns."""
    handle = sender._handle_rtcp_packet

    async def handle_filtered(packet: object) -> None:
        if isinstance(packet, RtcpRtpfbPacket) and packet.fmt == RTCP_RTPFB_NACK:
            packet.lost = allowed(packet.lost)
        await handle(packet)  # type: ignore[arg-type]

    sender._handle_rtcp_packet = handle_filtered  # type: ignore[method-assign]
