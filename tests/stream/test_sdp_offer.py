"""Offer validation, remote candidate filtering and bitrate hints."""

from __future__ import annotations

import ipaddress

import pytest
from aiortc import RTCPeerConnection
from aiortc import sdp as aiortc_sdp

from stream.ice import IceSettings, restrict_gathering, rtc_configuration
from stream.sdp import (
    InvalidSdp,
    add_bitrate_hints,
    filter_remote_candidates,
    parse_offer,
)

# Trimmed-down Chromium offer: audio + video (VP8, rtx, H264, VP9), candidates
# of every kind we care about.
CHROME_OFFER = "\r\n".join(
    [
        "v=0",
        "o=- 4611731400430051336 2 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0 1",
        "a=msid-semantic: WMS stream",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        "a=candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host generation 0",
        "a=ice-ufrag:abcd",
        "a=ice-pwd:abcdefghijklmnopqrstuvwx",
        "a=fingerprint:sha-256 " + ":".join(["AB"] * 32),
        "a=setup:actpass",
        "a=mid:0",
        "a=sendrecv",
        "a=rtcp-mux",
        "a=rtpmap:111 opus/48000/2",
        "a=fmtp:111 minptime=10;useinbandfec=1",
        "m=video 9 UDP/TLS/RTP/SAVPF 96 97 102 103 98",
        "c=IN IP4 0.0.0.0",
        "a=rtcp:9 IN IP4 0.0.0.0",
        "a=candidate:1 1 udp 2122260223 127.0.0.1 50001 typ host generation 0",
        "a=candidate:2 1 udp 2122194687 192.168.1.5 50002 typ host generation 0",
        "a=candidate:3 1 udp 2122129151 6a1b2c3d-aaaa-bbbb-cccc-123456789abc.local 50003 typ host generation 0",
        "a=candidate:4 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active",
        "a=candidate:5 1 udp 1686052607 203.0.113.9 50004 typ srflx raddr 192.168.1.5 rport 50002",
        "a=candidate:6 1 udp 2122260223 ::1 50005 typ host generation 0",
        "a=ice-ufrag:abcd",
        "a=ice-pwd:abcdefghijklmnopqrstuvwx",
        "a=fingerprint:sha-256 " + ":".join(["AB"] * 32),
        "a=setup:actpass",
        "a=mid:1",
        "a=sendrecv",
        "a=rtcp-mux",
        "a=rtcp-rsize",
        "a=rtpmap:96 VP8/90000",
        "a=rtcp-fb:96 nack",
        "a=rtcp-fb:96 nack pli",
        "a=rtpmap:97 rtx/90000",
        "a=fmtp:97 apt=96",
        "a=rtpmap:102 H264/90000",
        "a=rtcp-fb:102 nack",
        "a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
        "a=rtpmap:103 rtx/90000",
        "a=fmtp:103 apt=102",
        "a=rtpmap:98 VP9/90000",
        "a=fmtp:98 profile-id=0",
        "",
    ]
)


def data_channel_section(mid: str) -> str:
    """An m=application section as Chrome offers one for its data channel."""
    return "\r\n".join([
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
        "c=IN IP4 0.0.0.0",
        "a=ice-ufrag:abcd",
        "a=ice-pwd:abcdefghijklmnopqrstuvwx",
        "a=fingerprint:sha-256 " + ":".join(["AB"] * 32),
        "a=setup:actpass",
        f"a=mid:{mid}",
        "a=sctp-port:5000",
        "",
    ])  # fmt: skip


LOOPBACK = [ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")]


def replace(sdp: str, old: str, new: str) -> str:
    assert old in sdp
    return sdp.replace(old, new)


def drop_lines(sdp: str, prefix: str) -> str:
    lines = sdp.split("\r\n")
    kept = [line for line in lines if not line.startswith(prefix)]
    assert len(kept) < len(lines)
    return "\r\n".join(kept)


# --- parse_offer ---------------------------------------------------------------


def test_chrome_offer_accepted() -> None:
    parse_offer(CHROME_OFFER)


async def test_aiortc_offer_accepted() -> None:
    settings = IceSettings(hosts=("127.0.0.1",))
    pc = RTCPeerConnection(rtc_configuration(settings))
    try:
        pc.addTransceiver("video", direction="sendrecv")
        await restrict_gathering(pc, settings)
        await pc.setLocalDescription(await pc.createOffer())
        parse_offer(pc.localDescription.sdp)
    finally:
        await pc.close()


def test_invalid_sdp_is_a_value_error() -> None:
    assert issubclass(InvalidSdp, ValueError)


@pytest.mark.parametrize(
    "offer,message",
    [
        (None, "must be a string"),
        (CHROME_OFFER.encode(), "must be a string"),
        ("", "empty"),
        ("  \r\n ", "empty"),
        ("hello", "v=0"),
        ("v=1\r\n", "v=0"),
        ("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n", "no media"),
        ("v=0\r\n" + "a=x\r\n" * 30000, "too long"),
        (CHROME_OFFER.replace("setup:actpass", "setup:bogus"), "could not be parsed"),
        (CHROME_OFFER.replace("m=video 9 UDP", "m=video x UDP"), "could not be parsed"),
        (CHROME_OFFER.replace("a=fmtp:98", "a=fmtp:99"), "could not be parsed"),
        (CHROME_OFFER.replace("102 103 98", "102 73"), "could not be parsed"),
        (CHROME_OFFER.split("m=video")[0], "no video m-line"),
        (drop_lines(CHROME_OFFER, "a=ice-ufrag"), "ICE ufrag/pwd"),
        (drop_lines(CHROME_OFFER, "a=ice-pwd"), "ICE ufrag/pwd"),
        (drop_lines(CHROME_OFFER, "a=fingerprint"), "fingerprint missing"),
        (CHROME_OFFER.replace("sha-256", "md5"), "fingerprint algorithm"),
        (drop_lines(CHROME_OFFER, "a=setup"), "a=setup"),
        (drop_lines(CHROME_OFFER, "a=rtcp-mux"), "rtcp-mux"),
        (
            CHROME_OFFER.replace("VP8/90000", "AV1/90000").replace(
                "profile-level-id=42e01f", "profile-level-id=640c1f"
            ),
            "no supported video codec",
        ),
        # what aiortc's negotiation itself refused with exceptions the server answered 500 to
        (CHROME_OFFER + "m=video" + CHROME_OFFER.split("m=video")[1].replace("a=mid:1", "a=mid:2"), "2 video m-lines"),
        (CHROME_OFFER.replace("a=mid:1", "a=mid:0"), "repeats a=mid:0"),
        # two sections of a kind: aiortc shared one transport and left the spare socket open
        (
            CHROME_OFFER
            + "m=audio"
            + CHROME_OFFER.split("m=audio")[1].split("m=video")[0].replace("a=mid:0", "a=mid:2"),
            "2 audio m-lines",
        ),
        (CHROME_OFFER + data_channel_section("2") + data_channel_section("3"), "2 application m-lines"),
        (
            CHROME_OFFER
            + "m=text 9 UDP/TLS/RTP/SAVPF 100\r\nc=IN IP4 0.0.0.0\r\na=mid:5\r\na=rtpmap:100 t140/1000\r\n",
            "a text m-line",
        ),
        (replace(CHROME_OFFER, "a=mid:1\r\na=sendrecv", "a=mid:1\r\na=recvonly"), "video is recvonly"),
        (replace(CHROME_OFFER, "a=mid:1\r\na=sendrecv", "a=mid:1\r\na=inactive"), "video is inactive"),
        (drop_lines(CHROME_OFFER, "a=candidate") + "a=end-of-candidates\r\n", "without giving one"),
    ],
)
def test_bad_offers_rejected(offer: object, message: str) -> None:
    with pytest.raises(InvalidSdp, match=message):
        parse_offer(offer)  # type: ignore[arg-type]


# --- filter_remote_candidates --------------------------------------------------


def test_filter_keeps_only_allowed_udp_addresses() -> None:
    sdp, dropped = filter_remote_candidates(CHROME_OFFER, LOOPBACK)
    kept = [line.split()[4] for line in sdp.split("\r\n") if line.startswith("a=candidate")]
    assert kept == ["127.0.0.1", "127.0.0.1", "::1"]
    # 192.168.1.5, the .local name, the TCP one and the srflx
    assert dropped == 4
    assert sdp.endswith("\r\n") and "\n" not in sdp.replace("\r\n", "")
    parse_offer(sdp)


def test_filter_open_networks_drop_only_mdns_and_tcp() -> None:
    anywhere = [ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")]
    _, dropped = filter_remote_candidates(CHROME_OFFER, anywhere)
    assert dropped == 2


def test_filter_drops_malformed_candidate_lines() -> None:
    sdp = (
        "v=0\na=candidate:1 1 udp\na=candidate:1 1 udp 1 not-an-ip 5 typ host\n"
        # ports outside 1-65535: aiortc accepted 99999, then the session's socket died on sendto()
        "a=candidate:1 1 udp 1 127.0.0.1 99999 typ host\na=candidate:1 1 udp 1 127.0.0.1 0 typ host\n"
        "a=candidate:1 1 udp 1 127.0.0.1 x typ host\na=candidate:1 1 udp 1 127.0.0.1 65535 typ host\n"
    )
    out, dropped = filter_remote_candidates(sdp, LOOPBACK)
    assert (out, dropped) == ("v=0\na=candidate:1 1 udp 1 127.0.0.1 65535 typ host\n", 5)


def test_filter_nothing_to_drop_returns_same_text() -> None:
    sdp, _ = filter_remote_candidates(CHROME_OFFER, LOOPBACK)
    assert filter_remote_candidates(sdp, LOOPBACK) == (sdp, 0)


# --- add_bitrate_hints ---------------------------------------------------------


def hinted(sdp: str) -> str:
    return add_bitrate_hints(sdp, min_kbps=500, start_kbps=1500, max_kbps=4000)


HINTS = "x-google-min-bitrate=500;x-google-start-bitrate=1500;x-google-max-bitrate=4000"


def test_hints_added_to_vp8_and_h264_only() -> None:
    sdp = hinted(CHROME_OFFER)
    lines = sdp.split("\r\n")
    # VP8 had no fmtp: one is added right after its rtpmap
    vp8 = lines.index("a=rtpmap:96 VP8/90000")
    assert lines[vp8 + 1] == f"a=fmtp:96 {HINTS}"
    assert (f"a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f;{HINTS}") in lines
    # rtx, VP9 and audio untouched
    assert "a=fmtp:97 apt=96" in lines and "a=fmtp:103 apt=102" in lines
    assert "a=fmtp:98 profile-id=0" in lines
    assert "a=fmtp:111 minptime=10;useinbandfec=1" in lines
    assert sdp.count("x-google-start-bitrate") == 2


def test_hints_parse_back_through_aiortc() -> None:
    description = aiortc_sdp.SessionDescription.parse(hinted(CHROME_OFFER))
    video = description.media[1]
    codecs = {c.payloadType: c for c in video.rtp.codecs}
    assert codecs[96].parameters["x-google-start-bitrate"] == "1500"
    assert codecs[102].parameters["packetization-mode"] == "1"
    assert codecs[102].parameters["x-google-max-bitrate"] == "4000"


def test_hints_replace_previous_values() -> None:
    once = add_bitrate_hints(CHROME_OFFER, min_kbps=100, start_kbps=200, max_kbps=300)
    twice = hinted(once)
    assert twice == hinted(CHROME_OFFER)


def test_hints_keep_lf_line_endings() -> None:
    sdp = CHROME_OFFER.replace("\r\n", "\n")
    out = hinted(sdp)
    assert "\r" not in out and out.endswith("\n")


async def test_hints_on_aiortc_answer() -> None:
    settings = IceSettings(hosts=("127.0.0.1",))
    offerer = RTCPeerConnection(rtc_configuration(settings))
    answerer = RTCPeerConnection(rtc_configuration(settings))
    try:
        offerer.addTransceiver("video", direction="sendrecv")
        await restrict_gathering(offerer, settings)
        await offerer.setLocalDescription(await offerer.createOffer())
        await answerer.setRemoteDescription(offerer.localDescription)
        await restrict_gathering(answerer, settings)
        await answerer.setLocalDescription(await answerer.createAnswer())
        answer = hinted(answerer.localDescription.sdp)
        assert answer.count("x-google-min-bitrate=500") >= 2  # VP8 + H264 variants
    finally:
        await offerer.close()
        await answerer.close()


@pytest.mark.parametrize("bounds", [(0, 1, 2), (3, 2, 4), (1, 5, 4)])
def test_hints_bounds_validated(bounds: tuple[int, int, int]) -> None:
    low, start, high = bounds
    with pytest.raises(ValueError):
        add_bitrate_hints(CHROME_OFFER, min_kbps=low, start_kbps=start, max_kbps=high)
