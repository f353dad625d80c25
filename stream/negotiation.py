"""The answering side's steps that a publisher's session and a WHEP viewer share: apply the offer,
answer it (gathering on the allowed hosts only), tune the video senders, and add the bitrate
hints. aiortc's own errors become ours, and a peer closed meanwhile stops each step (the caller's
`refuse_if_closed` raises SessionClosedEarly)."""

from __future__ import annotations

from collections.abc import Callable

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.exceptions import InvalidAccessError, InvalidStateError

from stream.aiortc_internals import accept_rsa_dtls_peers, negotiated_codecs
from stream.encoder import tune_sender
from stream.errors import IceGatheringFailed, InvalidOffer
from stream.ice import restrict_gathering
from stream.retransmit_limit import limit_retransmissions
from stream.sdp import add_bitrate_hints
from stream.settings import StreamSettings

RefuseIfClosed = Callable[[], None]


async def apply_offer(pc: RTCPeerConnection, offer_sdp: str, refuse_if_closed: RefuseIfClosed) -> None:
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
    except (ValueError, KeyError, IndexError, InvalidAccessError, InvalidStateError) as exc:  # aiortc's refusals
        refuse_if_closed()
        raise InvalidOffer(f"the offer could not be applied: {exc}") from exc
    refuse_if_closed()


async def answer_offer(pc: RTCPeerConnection, settings: StreamSettings, refuse_if_closed: RefuseIfClosed) -> None:
    accept_rsa_dtls_peers(pc)  # GStreamer's webrtcbin has an RSA certificate
    try:
        answer = await pc.createAnswer()
        await restrict_gathering(pc, settings.ice)
        await pc.setLocalDescription(answer)
    except InvalidStateError:
        refuse_if_closed()
        raise
    except ValueError as exc:  # aiortc refusing its own answer to an offer it accepted
        refuse_if_closed()
        raise InvalidOffer(f"the offer could not be answered: {exc}") from exc
    except RuntimeError as exc:  # e.g. an --ice-host address this machine does not have
        refuse_if_closed()
        raise IceGatheringFailed(f"the server could not gather ICE candidates: {exc}") from exc
    refuse_if_closed()


def tune_video_senders(pc: RTCPeerConnection) -> str | None:
    """Tunes each video sender (encoder, retransmissions); returns the negotiated video codec."""
    codec = None
    for transceiver in pc.getTransceivers():
        if transceiver.kind == "video":
            tune_sender(transceiver)
            limit_retransmissions(transceiver.sender)
            if codecs := negotiated_codecs(transceiver):  # the negotiated codec, first in aiortc's list
                codec = codecs[0].name
    return codec


def answer_sdp(pc: RTCPeerConnection, settings: StreamSettings) -> str:
    """The local answer with Chrome's bitrate hints (settings.bitrate_hints_kbps)."""
    min_kbps, start_kbps, max_kbps = settings.bitrate_hints_kbps
    return add_bitrate_hints(pc.localDescription.sdp, min_kbps=min_kbps, start_kbps=start_kbps, max_kbps=max_kbps)
