"""A trickled ICE fragment (application/trickle-ice-sdpfrag, RFC 8840), as WHIP's PATCH carries it:
the sender's ICE credentials, its new candidates per media section, and whether they are all."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from aioice import Candidate
from aiortc import RTCIceCandidate, RTCPeerConnection

from stream.ice import IPNetwork
from stream.sdp import InvalidSdp, filter_remote_candidates

# A fragment carries a few candidates; anything far larger is not one.
MAX_FRAGMENT_CHARS = 16 * 1024


@dataclass
class TrickleFragment:
    ice_ufrag: str | None
    ice_pwd: str | None
    candidates: list[RTCIceCandidate] = field(default_factory=list)
    end: bool = False  # a=end-of-candidates
    dropped: int = 0  # candidates outside the networks this server accepts, or that it cannot use


def parse_trickle_fragment(text: str, networks: Iterable[IPNetwork]) -> TrickleFragment:
    """The fragment with the candidates this server will not try left out; InvalidSdp if malformed."""
    if len(text) > MAX_FRAGMENT_CHARS:
        raise InvalidSdp(f"the fragment is longer than {MAX_FRAGMENT_CHARS} characters")
    if "\x00" in text:
        raise InvalidSdp("the fragment contains a NUL character")
    kept, dropped = filter_remote_candidates(text, networks)
    fragment = TrickleFragment(ice_ufrag=None, ice_pwd=None, dropped=dropped)
    mid: str | None = None
    mline_index = -1
    for line in (line.strip() for line in kept.splitlines()):
        if line.startswith("m="):
            mid, mline_index = None, mline_index + 1
        elif line.startswith("a=mid:"):
            mid = line[len("a=mid:") :]
        elif line.startswith("a=ice-ufrag:"):
            fragment.ice_ufrag = line[len("a=ice-ufrag:") :]
        elif line.startswith("a=ice-pwd:"):
            fragment.ice_pwd = line[len("a=ice-pwd:") :]
        elif line == "a=end-of-candidates":
            fragment.end = True
        elif line.startswith("a=candidate:"):
            try:
                candidate = _rtc_candidate(Candidate.from_sdp(line[len("a=candidate:") :]))
            except (ValueError, IndexError) as exc:
                raise InvalidSdp(f"a candidate could not be parsed: {line[:120]!r}") from exc
            candidate.sdpMid = mid
            candidate.sdpMLineIndex = max(mline_index, 0) if mid is None else None
            fragment.candidates.append(candidate)
    return fragment


def _rtc_candidate(candidate: Candidate) -> RTCIceCandidate:
    return RTCIceCandidate(
        component=candidate.component,
        foundation=candidate.foundation,
        ip=candidate.host,
        port=candidate.port,
        priority=candidate.priority,
        protocol=candidate.transport,
        type=candidate.type,
        relatedAddress=candidate.related_address,
        relatedPort=candidate.related_port,
        tcpType=candidate.tcptype,
    )


async def add_trickled_candidates(
    pc: RTCPeerConnection, candidates: list[RTCIceCandidate], end: bool, closed: Callable[[], bool]
) -> None:
    """Adds trickled candidates to a peer connection; `end`: no more will come. aiortc ignores a
    candidate named for a bundled section, so each goes to the first section sharing its transport.
    Stops once `closed()`: a closing connection takes none."""
    transceivers = pc.getTransceivers()
    for candidate in candidates:
        if closed() or not transceivers:
            return
        named = next((t for t in transceivers if t.mid == candidate.sdpMid), transceivers[0])
        head = next(t for t in transceivers if t.receiver.transport is named.receiver.transport)
        candidate.sdpMid, candidate.sdpMLineIndex = head.mid, None
        await pc.addIceCandidate(candidate)
    if end and not closed():
        await pc.addIceCandidate(None)
