"""H264 encoding for aiortc senders: libx264 at a real-time preset, and the sender's encoder slot.

aiortc's H264Encoder runs libx264 at its default preset (medium), 4-6x more
CPU per frame than ultrafast (docs/architecture.md, "Changes to aiortc and aioice"). For a real-time server the
quality-per-bit gain of medium is not worth a frame budget. aiortc picks a
sender's encoder itself; FastH264Encoder overrides the parent's private
`_encode_frame` (and reuses `_split_bitstream`), and set_sender_encoder fills
the sender's private encoder slot before the sender creates its own.
"""

from __future__ import annotations

import fractions
import logging
from collections.abc import Iterator

import av
from aiortc import RTCRtpSender, RTCRtpTransceiver
from aiortc.codecs.h264 import H264Encoder
from aiortc.rtcrtpparameters import RTCRtpCodecParameters
from av.video.codeccontext import VideoCodecContext

logger = logging.getLogger(__name__)

# Matches the parent: it caps the codec frame rate at 30 and signals level 3.1
# (aiortc's SDP advertises profile-level-id 42e01f).
FRAME_RATE = 30
H264_LEVEL = "31"

# Only significant bitrate changes rebuild the encoder (same 10% as the parent);
# a rebuild costs a keyframe.
BITRATE_CHANGE_RATIO = 0.1


class FastH264Encoder(H264Encoder):
    """H264Encoder using libx264 ultrafast + zerolatency, baseline profile.

    Packetisation, target_bitrate clamping and the public encode()/pack()
    come from the parent; only the codec setup is ours.
    """

    def _encode_frame(self, frame: av.VideoFrame, force_keyframe: bool) -> Iterator[bytes]:
        if self.codec is not None and self._needs_new_codec(frame):
            # a new size or bitrate needs a new x264 instance
            self.buffer_data = b""
            self.buffer_pts = None
            self.codec = None

        # I forces a keyframe (PLI / new receiver); NONE lets x264 decide
        frame.pict_type = av.video.frame.PictureType.I if force_keyframe else av.video.frame.PictureType.NONE

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
        logger.debug("libx264 ultrafast %dx%d at %d bps", width, height, self.target_bitrate)
        return codec


def negotiated_codecs(transceiver: RTCRtpTransceiver) -> list[RTCRtpCodecParameters]:
    """The transceiver's codecs after negotiation, the one it sends with first (RTCPeerConnection
    passes the list as the send parameters' codecs). Empty before negotiation."""
    return list(getattr(transceiver, "_codecs", None) or [])


def sender_encoder(sender: RTCRtpSender) -> object | None:
    """The sender's encoder; None until it encodes its first frame (it creates one then)."""
    return sender._RTCRtpSender__encoder  # type: ignore[attr-defined]


def set_sender_encoder(sender: RTCRtpSender, encoder: object) -> None:
    """Gives the sender its encoder. The sender only creates one while its slot is None, so one
    set before its first frame is kept."""
    sender._RTCRtpSender__encoder = encoder  # type: ignore[attr-defined]
