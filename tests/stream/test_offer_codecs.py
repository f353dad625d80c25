"""An offer whose video is in no codec or profile aiortc decodes is refused as such (the WHIP route
answers it 422): the message names what was offered and what would work."""

import pytest
from test_sdp_offer import CHROME_OFFER

from stream.errors import InvalidOffer, UnsupportedCodec
from stream.ice import IceSettings
from stream.offer_check import checked_offer


def test_an_offer_of_h264_high_only_is_a_codec_refusal_that_says_what_works() -> None:
    high_only = CHROME_OFFER.replace("VP8/90000", "AV1/90000").replace(
        "profile-level-id=42e01f", "profile-level-id=640c1f"
    )
    with pytest.raises(UnsupportedCodec) as caught:
        checked_offer(high_only, IceSettings())
    message = str(caught.value)
    assert "profile-level-id=640c1f" in message, message  # what was offered
    assert "constrained baseline" in message and "packetization-mode=1" in message, message  # what works


def test_a_malformed_offer_is_not_a_codec_refusal() -> None:
    with pytest.raises(InvalidOffer) as caught:
        checked_offer(CHROME_OFFER.split("m=video")[0], IceSettings())
    assert not isinstance(caught.value, UnsupportedCodec)
