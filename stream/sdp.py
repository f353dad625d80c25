"""SDP checks and rewrites applied around aiortc's negotiation.

aiortc's SessionDescription.parse validates with `assert` and lets KeyError,
StopIteration or IndexError escape on malformed input, and some offers it
accepts crash later inside setRemoteDescription (no a=setup -> dtls is None).
parse_offer turns all of that into one clear InvalidSdp before aiortc sees it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from aiortc import RTCRtpCodecParameters

from stream.aiortc_internals import MediaDescription, digest_algorithm_supported, parse_sdp, video_codecs_in_common
from stream.ice import IPNetwork, address_allowed

logger = logging.getLogger(__name__)


# Browser offers are a few KiB; anything far larger is not worth parsing.
MAX_SDP_CHARS = 64 * 1024  # 65,536: one limit for /api/offer, WHIP and WHEP (docs/api.md)

# Codecs whose fmtp lines get Chrome's bitrate hints.
BITRATE_HINT_CODECS = ("vp8", "h264")

_RTPMAP = re.compile(r"^a=rtpmap:(\d+) ([^/\s]+)/", re.IGNORECASE)
_FMTP = re.compile(r"^a=fmtp:(\d+)(?: (.*))?$")
_X_GOOGLE_BITRATE = re.compile(r"^x-google-(min|start|max)-bitrate=", re.IGNORECASE)


class InvalidSdp(ValueError):
    """The SDP offer is malformed or cannot be used by this server."""


class NoSupportedVideoCodec(InvalidSdp):
    """The offer is well formed, but none of its video codecs is one aiortc can decode."""


def parse_offer(sdp: str, *, viewer: bool = False) -> None:
    """Raise InvalidSdp unless `sdp` is an offer aiortc can answer with video: a publisher's sends
    its video, a viewer's (WHEP) only receives."""
    if not isinstance(sdp, str):
        raise InvalidSdp(f"SDP must be a string, not {type(sdp).__name__}")
    if not sdp.strip():
        raise InvalidSdp("SDP is empty")
    if len(sdp) > MAX_SDP_CHARS:
        raise InvalidSdp(f"SDP is too long ({len(sdp)} > {MAX_SDP_CHARS} characters)")
    if "\x00" in sdp:
        raise InvalidSdp("SDP contains a NUL character")

    first_line = sdp.lstrip().splitlines()[0].strip()
    if first_line != "v=0":
        raise InvalidSdp(f"SDP must start with 'v=0', found {first_line[:40]!r}")

    try:
        description = parse_sdp(sdp)
    except Exception as exc:  # asserts, KeyError, StopIteration, ValueError...
        detail = str(exc) or type(exc).__name__
        raise InvalidSdp(f"SDP could not be parsed: {detail}") from exc

    if not description.media:
        raise InvalidSdp("SDP has no media section")
    videos = [m for m in description.media if m.kind == "video"]
    if not videos:
        raise InvalidSdp("SDP has no video m-line")
    unknown = sorted({m.kind for m in description.media} - {"video", "audio", "application"})
    if unknown:
        # aiortc answers no section for them, then refuses its own answer as not matching the offer
        raise InvalidSdp(f"SDP has a {unknown[0]} m-line; a session takes video, audio and a data channel")
    for kind in ("video", "audio", "application"):
        count = sum(m.kind == kind for m in description.media)
        if count > 1:
            # aiortc shares one transport between two sections of a kind and leaves the spare one's
            # socket open after close: one session takes one camera, one microphone, one data channel
            raise InvalidSdp(f"SDP has {count} {kind} m-lines; a session takes at most one")
    if viewer and any(m.direction != "recvonly" for m in description.media if m.kind in ("audio", "video")):
        # what a viewer would send would be decoded for nothing
        raise InvalidSdp("a viewer's offer only receives: its audio and video must be recvonly")
    if not viewer and videos[0].direction in ("recvonly", "inactive"):
        raise InvalidSdp(
            f"the offer's video is {videos[0].direction}: the server must receive the camera (sendrecv or sendonly)"
        )
    mids = [m.rtp.muxId for m in description.media if m.rtp.muxId]
    repeated = sorted({mid for mid in mids if mids.count(mid) > 1})
    if repeated:
        raise InvalidSdp(f"SDP repeats a=mid:{repeated[0]}; every m-line needs its own")
    if any(m.ice_candidates_complete for m in description.media) and not any(
        m.ice_candidates for m in description.media
    ):
        # aioice drops a component whose candidates are complete but none: the session could never connect
        raise InvalidSdp("SDP ends its ICE candidates (a=end-of-candidates) without giving one")

    for index, media in enumerate(description.media):
        _check_media(index, media)

    if not any(video_codecs_in_common(m.rtp.codecs) for m in videos):
        offered = sorted({_codec_name(c) for m in videos for c in m.rtp.codecs})
        raise NoSupportedVideoCodec(
            f"no supported video codec offered{' to receive' if viewer else ''} "
            f"(offered: {', '.join(offered) or 'none'}; "
            "supported: VP8, or H264 in baseline or constrained baseline profile (profile-level-id 42e0xx or "
            "4200xx) with packetization-mode=1; in OBS set the encoder's profile to baseline)"
        )


def _codec_name(codec: RTCRtpCodecParameters) -> str:
    """The codec as an offer names it; H.264 with the profile and packetization that decide whether we take it."""
    if codec.mimeType.lower() != "video/h264":
        return codec.mimeType
    profile = codec.parameters.get("profile-level-id", "none")
    packetization = codec.parameters.get("packetization-mode", "0")
    return f"{codec.mimeType} profile-level-id={profile} packetization-mode={packetization}"


def ice_credentials(sdp: str) -> tuple[str, str]:
    """The (ufrag, pwd) of a checked offer's first media section: a bundled offer's ICE session."""
    media = parse_sdp(sdp).media[0]
    return media.ice.usernameFragment, media.ice.password


def _check_media(index: int, media: MediaDescription) -> None:
    where = f"m-line {index} ({media.kind})"
    if not media.ice.usernameFragment or not media.ice.password:
        raise InvalidSdp(f"{where}: ICE ufrag/pwd missing")
    # aiortc sets dtls to None when a=setup is absent, then crashes on it
    if media.dtls is None:
        raise InvalidSdp(f"{where}: DTLS a=setup missing")
    if not media.dtls.fingerprints:
        raise InvalidSdp(f"{where}: DTLS fingerprint missing")
    if not any(digest_algorithm_supported(f.algorithm) for f in media.dtls.fingerprints):
        algorithms = ", ".join(f.algorithm for f in media.dtls.fingerprints)
        raise InvalidSdp(f"{where}: no supported fingerprint algorithm ({algorithms})")
    if media.kind in ("audio", "video") and not media.rtcp_mux:
        raise InvalidSdp(f"{where}: a=rtcp-mux missing")


def filter_remote_candidates(sdp: str, networks: Iterable[IPNetwork]) -> tuple[str, int]:
    """Drop a=candidate lines we will not connect to; return (sdp, dropped).

    Dropped: addresses outside `networks`, mDNS `.local` names (they would
    need a multicast lookup and hide the real address), TCP candidates (aioice
    only does UDP) and lines that do not parse.
    """
    networks = list(networks)
    newline = _newline(sdp)
    kept: list[str] = []
    dropped = 0
    for line in sdp.splitlines():
        if line.startswith("a=candidate:") and not _candidate_allowed(line[len("a=candidate:") :], networks):
            dropped += 1
            logger.debug("dropped remote candidate %s", line)
            continue
        kept.append(line)
    return _join(kept, newline, sdp), dropped


def _candidate_allowed(value: str, networks: list[IPNetwork]) -> bool:
    bits = value.split()
    if len(bits) < 8:
        return False
    transport, host, port = bits[2].lower(), bits[4], bits[5]
    if transport != "udp":
        return False
    if not (port.isdigit() and 0 < int(port) < 65536):  # a port past 65535 later kills the socket's writes
        return False
    # mDNS .local names and other hostnames have no address to match: refused
    return address_allowed(host, networks)


def add_bitrate_hints(sdp: str, *, min_kbps: int, start_kbps: int, max_kbps: int) -> str:
    """Add x-google-{min,start,max}-bitrate to VP8/H264 fmtp of video sections.

    Chrome's send bitrate towards aiortc follows aiortc's REMB estimate, which
    ramps slowly and collapses on still content (docs/architecture.md: 320x180 at
    30 kbps); Chrome honours these hints from the remote description. Existing
    x-google bitrate values are replaced. A codec without an fmtp line (VP8
    usually) gets one right after its rtpmap.
    """
    if not 0 < min_kbps <= start_kbps <= max_kbps:
        raise ValueError(
            f"bitrate hints need 0 < min_kbps <= start_kbps <= max_kbps, got {min_kbps}, {start_kbps}, {max_kbps}"
        )
    hints = [
        f"x-google-min-bitrate={min_kbps}",
        f"x-google-start-bitrate={start_kbps}",
        f"x-google-max-bitrate={max_kbps}",
    ]

    newline = _newline(sdp)
    sections = _split_sections(sdp.splitlines())
    out: list[str] = list(sections[0])
    for section in sections[1:]:
        is_video = section[0].startswith("m=video")
        out += _hint_section(section, hints) if is_video else section
    return _join(out, newline, sdp)


def _hint_section(lines: list[str], hints: list[str]) -> list[str]:
    targets = set()
    for line in lines:
        match = _RTPMAP.match(line)
        if match and match.group(2).lower() in BITRATE_HINT_CODECS:
            targets.add(match.group(1))

    has_fmtp = set()
    result: list[str] = []
    for line in lines:
        match = _FMTP.match(line)
        if match and match.group(1) in targets:
            has_fmtp.add(match.group(1))
            params = [
                p for p in (match.group(2) or "").split(";") if p.strip() and not _X_GOOGLE_BITRATE.match(p.strip())
            ]
            line = f"a=fmtp:{match.group(1)} {';'.join(params + hints)}"
        result.append(line)

    # add missing fmtp lines after their rtpmap
    with_new: list[str] = []
    for line in result:
        with_new.append(line)
        match = _RTPMAP.match(line)
        if match and match.group(1) in targets and match.group(1) not in has_fmtp:
            with_new.append(f"a=fmtp:{match.group(1)} {';'.join(hints)}")
    return with_new


def _split_sections(lines: list[str]) -> list[list[str]]:
    """[session lines, m-section 1 lines, m-section 2 lines, ...]"""
    sections: list[list[str]] = [[]]
    for line in lines:
        if line.startswith("m="):
            sections.append([])
        sections[-1].append(line)
    return sections


def _newline(sdp: str) -> str:
    return "\r\n" if "\r\n" in sdp else "\n"


def _join(lines: list[str], newline: str, original: str) -> str:
    text = newline.join(lines)
    if original.endswith(("\n", "\r")):
        text += newline
    return text
