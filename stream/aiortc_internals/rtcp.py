"""What an RTCRtpSender does with the NACKs it receives, and which NACKs and PLIs a receiver sends.

The sender's RTCP handler (`_handle_rtcp_packet`, private) resends every sequence number a NACK
names; wrapping it on one instance lets us shorten each NACK's list first. A receiver's RTCP send
(`_send_rtcp`, private) is wrapped to count its feedback: aiortc's getStats() counts no NACKs or
PLIs (the node's metrics, stream/webrtc_counts.py).
"""

from __future__ import annotations

from collections.abc import Callable

from aiortc import RTCRtpReceiver, RTCRtpSender
from aiortc.rtp import RTCP_PSFB_PLI, RTCP_RTPFB_NACK, RtcpPsfbPacket, RtcpRtpfbPacket


def filter_nacks(sender: RTCRtpSender, allowed: Callable[[list[int]], list[int]]) -> None:
    """Makes `sender` resend, of each NACK's lost sequence numbers, only those `allowed` returns."""
    handle = sender._handle_rtcp_packet

    async def handle_filtered(packet: object) -> None:
        if isinstance(packet, RtcpRtpfbPacket) and packet.fmt == RTCP_RTPFB_NACK:
            packet.lost = allowed(packet.lost)
        await handle(packet)  # type: ignore[arg-type]

    sender._handle_rtcp_packet = handle_filtered  # type: ignore[method-assign]


def count_feedback_sent(receiver: RTCRtpReceiver, on_sent: Callable[[str], None]) -> None:
    """Calls `on_sent("nack")` or `on_sent("pli")` for each NACK or PLI `receiver` sends (once sent)."""
    send = receiver._send_rtcp

    async def send_counted(packet: object) -> None:
        await send(packet)  # type: ignore[arg-type]
        if isinstance(packet, RtcpRtpfbPacket) and packet.fmt == RTCP_RTPFB_NACK:
            on_sent("nack")
        elif isinstance(packet, RtcpPsfbPacket) and packet.fmt == RTCP_PSFB_PLI:
            on_sent("pli")

    receiver._send_rtcp = send_counted  # type: ignore[method-assign]
