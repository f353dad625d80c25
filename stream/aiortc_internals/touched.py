"""Every aiortc/aioice name this package relies on that is not part of their documented API.

tests/stream/test_aiortc_internals.py checks each entry against the installed packages, and that
the package's source touches no private name this list lacks.

kind:
- "module": a name in a module (an undocumented function, class or constant);
- "class": an attribute or method of the class (a private hook we call, wrap or override);
- "instance": an attribute an instance has once constructed (set in the class's __init__);
- "assigned": an attribute the class's own code sets on other objects (RTP packets' `_data`).
"""

from __future__ import annotations

from typing import NamedTuple


class Touched(NamedTuple):
    where: str  # a module, or a class as module.Class
    name: str
    kind: str


_RECEIVER = "aiortc.rtcrtpreceiver.RTCRtpReceiver"
_ICE = "aioice.ice.Connection"

TOUCHED: tuple[Touched, ...] = (
    # receive path (receiver.py, jitter_buffer.py, audio_jitter_buffer.py)
    Touched(_RECEIVER, "_RTCRtpReceiver__jitter_buffer", "instance"),
    Touched(_RECEIVER, "_RTCRtpReceiver__decoder_queue", "instance"),
    Touched(_RECEIVER, "_RTCRtpReceiver__decoder_error", "instance"),
    Touched(_RECEIVER, "_RTCRtpReceiver__decoder_thread", "instance"),
    Touched(_RECEIVER, "_RTCRtpReceiver__started", "instance"),
    Touched(_RECEIVER, "_RTCRtpReceiver__kind", "instance"),
    Touched(_RECEIVER, "_data", "assigned"),
    Touched("aiortc.rtcrtpreceiver.RemoteStreamTrack", "_queue", "instance"),
    Touched("aiortc.jitterbuffer", "JitterBuffer", "module"),
    Touched("aiortc.jitterbuffer", "JitterFrame", "module"),
    Touched("aiortc.jitterbuffer.JitterBuffer", "_remove_frame", "class"),
    Touched("aiortc.jitterbuffer.JitterBuffer", "remove", "class"),
    Touched("aiortc.jitterbuffer.JitterBuffer", "_origin", "instance"),
    Touched("aiortc.jitterbuffer.JitterBuffer", "_packets", "instance"),
    Touched("aiortc.jitterbuffer.JitterBuffer", "_prefetch", "instance"),
    Touched("aiortc.utils", "uint16_add", "module"),
    # send path (encoder.py, vp8_encoder.py, rtcp.py)
    Touched("aiortc.rtcrtptransceiver.RTCRtpTransceiver", "_codecs", "instance"),
    Touched("aiortc.rtcrtpsender.RTCRtpSender", "_RTCRtpSender__encoder", "instance"),
    Touched("aiortc.rtcrtpsender.RTCRtpSender", "_handle_rtcp_packet", "class"),
    Touched("aiortc.codecs.h264", "H264Encoder", "module"),
    Touched("aiortc.codecs.h264.H264Encoder", "_encode_frame", "class"),
    Touched("aiortc.codecs.h264.H264Encoder", "_split_bitstream", "class"),
    Touched("aiortc.codecs.h264.H264Encoder", "codec", "instance"),
    Touched("aiortc.codecs.h264.H264Encoder", "buffer_data", "instance"),
    Touched("aiortc.codecs.h264.H264Encoder", "buffer_pts", "instance"),
    Touched("aiortc.codecs.vpx", "Vp8Encoder", "module"),
    Touched("aiortc.codecs.vpx.Vp8Encoder", "_packetize", "class"),
    Touched("aiortc.codecs.vpx.Vp8Encoder", "codec", "instance"),
    Touched("aiortc.codecs.vpx.Vp8Encoder", "picture_id", "instance"),
    Touched("aiortc.mediastreams", "VIDEO_TIME_BASE", "module"),
    Touched("aiortc.mediastreams", "convert_timebase", "module"),
    Touched("aiortc.rtp", "RTCP_RTPFB_NACK", "module"),
    Touched("aiortc.rtp", "RtcpRtpfbPacket", "module"),
    # feedback counted for the metrics (rtcp.py)
    Touched(_RECEIVER, "_send_rtcp", "class"),
    Touched("aiortc.rtp", "RTCP_PSFB_PLI", "module"),
    Touched("aiortc.rtp", "RtcpPsfbPacket", "module"),
    # DTLS (dtls.py)
    Touched("aiortc.rtcpeerconnection.RTCPeerConnection", "_RTCPeerConnection__certificates", "instance"),
    Touched("aiortc.rtcdtlstransport.RTCCertificate", "_create_ssl_context", "class"),
    # ICE (ice.py)
    Touched("aiortc.rtcicetransport", "parse_stun_turn_uri", "module"),
    Touched("aiortc.rtcicetransport.RTCIceGatherer", "_connection", "instance"),
    Touched("aioice.ice", "get_host_addresses", "module"),
    Touched(_ICE, "request_received", "class"),
    Touched(_ICE, "get_component_candidates", "class"),
    Touched(_ICE, "_local_candidates", "instance"),
    Touched(_ICE, "_local_candidates_start", "instance"),
    Touched(_ICE, "_local_candidates_end", "instance"),
    Touched(_ICE, "_transport_policy", "instance"),
    Touched(_ICE, "_use_ipv4", "instance"),
    Touched(_ICE, "_use_ipv6", "instance"),
    Touched(_ICE, "_components", "instance"),
    Touched("aioice.candidate.Candidate", "_network_host", "instance"),
    # ICE consent freshness by media (consent.py)
    Touched("aioice.ice", "CONSENT_FAILURES", "module"),
    Touched("aioice.ice", "CONSENT_INTERVAL", "module"),
    Touched("aioice.ice", "CandidatePair", "module"),
    Touched("aioice.ice", "StunProtocol", "module"),
    Touched(_ICE, "query_consent", "class"),
    Touched(_ICE, "build_request", "class"),
    Touched(_ICE, "_nominated", "instance"),
    Touched(_ICE, "_query_consent_task", "instance"),
    Touched("aioice.ice.StunProtocol", "request", "class"),
    Touched("aioice.ice.CandidatePair", "remote_addr", "class"),
    Touched("aioice.stun", "TransactionError", "module"),
    # offer checks (sdp.py)
    Touched("aiortc.sdp", "SessionDescription", "module"),
    Touched("aiortc.sdp", "MediaDescription", "module"),
    Touched("aiortc.codecs", "CODECS", "module"),
    Touched("aiortc.rtcpeerconnection", "find_common_codecs", "module"),
    Touched("aiortc.rtcdtlstransport", "X509_DIGEST_ALGORITHMS", "module"),
)
