"""aiortc's own SDP parser and the codec and fingerprint tables it negotiates with.

None of these is exported by aiortc; the offer checks use them to refuse, before aiortc sees an
offer, what its negotiation would crash on or refuse, with the same rules it applies.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiortc.codecs import CODECS
from aiortc.rtcdtlstransport import X509_DIGEST_ALGORITHMS
from aiortc.rtcpeerconnection import find_common_codecs
from aiortc.rtcrtpparameters import RTCRtpCodecParameters
from aiortc.sdp import MediaDescription, SessionDescription

__all__ = [
    "MediaDescription",
    "SessionDescription",
    "digest_algorithm_supported",
    "parse_sdp",
    "video_codecs_in_common",
]


def parse_sdp(sdp: str) -> SessionDescription:
    """aiortc's parse: it validates with `assert` and lets KeyError, StopIteration or IndexError
    escape on malformed input."""
    return SessionDescription.parse(sdp)


def video_codecs_in_common(offered: Iterable[RTCRtpCodecParameters]) -> list[RTCRtpCodecParameters]:
    """The offered video codecs aiortc can receive and send, as its negotiation matches them."""
    return find_common_codecs(CODECS["video"], list(offered))


def digest_algorithm_supported(algorithm: str) -> bool:
    """Whether aiortc's DTLS can check a fingerprint of this hash algorithm."""
    return algorithm.lower() in X509_DIGEST_ALGORITHMS
