"""An offer checked before any work is spent on it: no session, no lease, no history entry.

Everything that can be judged from the SDP text is judged here, so a malformed offer costs one
parse and answers 400; what aiortc's negotiation itself refuses is mapped in session.py.
"""

from __future__ import annotations

import logging

from stream.errors import InvalidOffer, TooManyCandidates, UnsupportedCodec
from stream.ice import IceSettings, allowed_remote_networks
from stream.sdp import InvalidSdp, NoSupportedVideoCodec, filter_remote_candidates, parse_offer
from stream.trickle import MAX_REMOTE_CANDIDATES, candidate_count

logger = logging.getLogger(__name__)


def checked_offer(offer_sdp: str, ice: IceSettings, *, viewer: bool = False) -> str:
    """The offer (a publisher's, or a WHEP viewer's) with the candidates this server will not try
    removed; raises InvalidOffer."""
    try:
        parse_offer(offer_sdp, viewer=viewer)
        filtered, dropped = filter_remote_candidates(offer_sdp, allowed_remote_networks(ice))
    except NoSupportedVideoCodec as exc:
        raise UnsupportedCodec(str(exc)) from exc
    except InvalidSdp as exc:
        raise InvalidOffer(str(exc)) from exc
    if (offered := candidate_count(filtered)) > MAX_REMOTE_CANDIDATES:
        raise TooManyCandidates(
            f"the offer names {offered} ICE candidates this server could try; {MAX_REMOTE_CANDIDATES} at most"
        )
    if dropped:
        logger.info("dropped %d offered candidates outside the allowed networks", dropped)
        if "a=candidate:" not in filtered:
            raise InvalidOffer(
                f"none of the {dropped} offered ICE candidates is in the networks this server accepts "
                "(a browser on the server's own machine needs loopback candidates)"
            )
    return filtered
