"""Cheaper H264 encoding for aiortc senders.

aiortc's H264Encoder runs libx264 at its default preset (medium), 4-6x more
CPU per frame than ultrafast (streaming.md). For a real-time server the
quality-per-bit gain of medium is not worth a frame budget.
"""

from __future__ import annotations

import fractions
import logging
from collections.abc import Iterator

import av
from av.video.codeccontext import VideoCodecContext
from aiortc import RTCRtpTransceiver
from aiortc.codecs.h264 import H264Encoder

logger = logging.getLogger(__name__)

# Matches the parent: it caps the codec frame rate at 30 and signals level 3.1
# (aiortc's SDP advertises profile-level-id 42e01f).
FRAME_RATE = 30
H264_LEVEL = "31"

# Only significant bitrate changes rebuild the encoder (same 10% as the parent);
# a rebuild costs a keyframe.
BITRATE_CHANGE_RATIO = 0.1

# Name-mangled private attribute of RTCRtpSender (aiortc 1.16).
_SENDER_ENCODER = "_RTCRtpSender__encoder"


class FastH264Encoder(H264Encoder):
    """H264Encoder using libx264 ultrafast + zerolatency, baseline profile.

    Packetisation, target_bitrate clamping and the public encode()/pack()
    come from the parent; only the codec setup is ours.
    """

    def _encode_frame(
        self, frame: av.VideoFrame, force_keyframe: bool
    ) -> Iterator[bytes]:
        if self.codec is not None and self._needs_new_codec(frame):
            # a new size or bitrate needs a new x264 instance
            self.buffer_data = b""
            self.buffer_pts = None
            self.codec = None

        # I forces a keyframe (PLI / new receiver); NONE lets x264 decide
        frame.pict_type = (
            av.video.frame.PictureType.I
            if force_keyframe
            else av.video.frame.PictureType.NONE
        )

        if self.codec is None:
            self.codec = self._open_codec(frame.width, frame.height)

        data = b"".join(bytes(packet) for packet in self.codec.encode(frame))
        if data:
            yield from self._split_bitstream(data)

    def _needs_new_codec(self, frame: av.VideoFrame) -> bool:
        codec = self.codec
        assert codec is not None
        if frame.width != codec.width or frame.height != codec.height:
            return True
        drift = abs(self.target_bitrate - codec.bit_rate) / codec.bit_rate
        return drift > BITRATE_CHANGE_RATIO

    def _open_codec(self, width: int, height: int) -> VideoCodecContext:
        codec = av.CodecContext.create("libx264", "w")
        codec.width = width
        codec.height = height
        codec.bit_rate = self.target_bitrate
        codec.pix_fmt = "yuv420p"
        codec.framerate = fractions.Fraction(FRAME_RATE, 1)
        codec.time_base = fractions.Fraction(1, FRAME_RATE)
        codec.options = {
            "preset": "ultrafast",
            "tune": "zerolatency",
            "level": H264_LEVEL,
        }
        # baseline: no B-frames, no CABAC; what every WebRTC peer decodes
        codec.profile = "Baseline"
        logger.debug(
            "libx264 ultrafast %dx%d at %d bps", width, height, self.target_bitrate
        )
        return codec


def tune_sender(transceiver: RTCRtpTransceiver) -> None:
    """Make the transceiver's sender encode H264 with FastH264Encoder.

    Call after `pc.setLocalDescription()` on the answering side (the codec
    list is final once the remote offer is applied). An offerer must call it
    after `setRemoteDescription(answer)`, which is where its codec list is
    narrowed. The sender uses `transceiver._codecs[0]` (RTCPeerConnection
    passes it as `codecs[0]` of the send parameters) and creates its encoder
    lazily, only when `__encoder` is still None, so a pre-set one is kept.
    Does nothing for other codecs.
    """
    codecs = getattr(transceiver, "_codecs", None)
    if not codecs:
        logger.debug("transceiver has no negotiated codecs; sender not tuned")
        return
    codec = codecs[0]
    if codec.mimeType.lower() != "video/h264":
        logger.debug("send codec is %s; sender not tuned", codec.mimeType)
        return
    sender = transceiver.sender
    if not hasattr(sender, _SENDER_ENCODER):
        raise RuntimeError(
            f"aiortc internals changed: RTCRtpSender has no {_SENDER_ENCODER!r}"
        )
    current = getattr(sender, _SENDER_ENCODER)
    if isinstance(current, FastH264Encoder):
        return
    if current is not None:
        # the sender is already encoding (possibly in an executor thread right
        # now); swapping encoders under it is not safe
        logger.warning(
            "sender already encodes with %s; not replaced", type(current).__name__
        )
        return
    setattr(sender, _SENDER_ENCODER, FastH264Encoder())
