"""A trickled ICE fragment (application/trickle-ice-sdpfrag, RFC 8840), as WHIP's PATCH carries it:
the sender's ICE credentials, its new candidates per media section, and whether they are all."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from aioice import Candidate
from aiortc import RTCIceCandidate, RTCPeerConnection

from stream.errors import TooManyCandidates, TooManyPatches, TrickleTooLate
from stream.ice import IPNetwork
from stream.sdp import InvalidSdp, filter_remote_candidates

# A fragment carries a few candidates; anything far larger is not one.
MAX_FRAGMENT_CHARS = 16 * 1024
# What one connection may ask of this server's ICE agent: each remote candidate is a STUN check
# it sends (and retransmits), at an address the peer chose. A browser offers a handful and trickles
# them in a few PATCHes; 300 candidates made a node send 4,200 binding requests (issue #35).
MAX_REMOTE_CANDIDATES = 20
MAX_TRICKLE_PATCHES = 20


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


def candidate_count(sdp: str) -> int:
    return sum(1 for line in sdp.splitlines() if line.strip().startswith("a=candidate:"))


class TrickleBudget:
    """One connection's allowance of remote candidates and trickle PATCHes, and its deadline:
    after `deadline_s` (the connect deadline) it takes no more candidates."""

    def __init__(self, offered: int, deadline_s: float) -> None:
        self.candidates = offered
        self.patches = 0
        self._deadline = time.monotonic() + deadline_s
        self._deadline_s = deadline_s

    def take(self, candidates: int) -> None:
        """Counts one PATCH of `candidates` more; raises the TrickleRefused or TooManyCandidates
        that applies (counting nothing then)."""
        if time.monotonic() > self._deadline:
            raise TrickleTooLate(
                f"candidates are taken for {self._deadline_s:g} s after the answer; this connection's time is past"
            )
        if self.patches >= MAX_TRICKLE_PATCHES:
            raise TooManyPatches(f"a connection takes {MAX_TRICKLE_PATCHES} trickle PATCHes at most")
        if self.candidates + candidates > MAX_REMOTE_CANDIDATES:
            raise TooManyCandidates(
                f"a connection may name {MAX_REMOTE_CANDIDATES} remote candidates at most; it has {self.candidates}"
            )
        self.patches += 1
        self.candidates += candidates
