"""An offer checked before any work is spent on it: no session, no lease, no history entry.

Everything that can be judged from the SDP text is judged here, so a malformed offer costs one
parse and answers 400; what aiortc's negotiation itself refuses is mapped in session.py.
"""

from __future__ import annotations

import logging

from stream.errors import InvalidOffer, UnsupportedCodec
from stream.ice import IceSettings, allowed_remote_networks
from stream.sdp import InvalidSdp, NoSupportedVideoCodec, filter_remote_candidates, parse_offer

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
    if dropped:
        logger.info("dropped %d offered candidates outside the allowed networks", dropped)
        if "a=candidate:" not in filtered:
            raise InvalidOffer(
                f"none of the {dropped} offered ICE candidates is in the networks this server accepts "
                "(a browser on the server's own machine needs loopback candidates)"
            )
    return filtered
