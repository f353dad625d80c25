"""Cheaper encoding for aiortc senders.

aiortc's H264Encoder runs libx264 at its default preset (medium), 4-6x more
CPU per frame than ultrafast (docs/architecture.md, "Changes to aiortc and aioice"). For a real-time server the
quality-per-bit gain of medium is not worth a frame budget: an H264 sender
gets aiortc_internals.FastH264Encoder (ultrafast, zerolatency, baseline). A VP8 sender gets
aiortc_internals.OneThreadVp8Encoder: libvpx on one thread, where aiortc gives it two above
640x480 on 3 cores or more for more CPU a frame (bench/results/2026-12-08-codecs.md).
"""

from __future__ import annotations

import logging

from aiortc import RTCRtpTransceiver

from stream.aiortc_internals import (
    FastH264Encoder,
    OneThreadVp8Encoder,
    negotiated_codecs,
    sender_encoder,
    set_sender_encoder,
)

logger = logging.getLogger(__name__)


ENCODERS = {"video/h264": FastH264Encoder, "video/vp8": OneThreadVp8Encoder}


def tune_sender(transceiver: RTCRtpTransceiver) -> None:
    """Make the transceiver's sender encode H264 with FastH264Encoder, VP8 with OneThreadVp8Encoder.

    Call after `pc.setLocalDescription()` on the answering side (the codec
    list is final once the remote offer is applied). An offerer must call it
    after `setRemoteDescription(answer)`, which is where its codec list is
    narrowed. The sender encodes with the first negotiated codec and creates
    its encoder lazily, only when it has none yet, so a pre-set one is kept.
    Does nothing for other codecs.
    """
    codecs = negotiated_codecs(transceiver)
    if not codecs:
        logger.debug("transceiver has no negotiated codecs; sender not tuned")
        return
    codec = codecs[0]
    encoder = ENCODERS.get(codec.mimeType.lower())
    if encoder is None:
        logger.debug("send codec is %s; sender not tuned", codec.mimeType)
        return
    sender = transceiver.sender
    current = sender_encoder(sender)
    if isinstance(current, encoder):
        return
    if current is not None:
        # the sender is already encoding (possibly in an executor thread right
        # now); swapping encoders under it is not safe
        logger.warning("sender already encodes with %s; not replaced", type(current).__name__)
        return
    set_sender_encoder(sender, encoder())
