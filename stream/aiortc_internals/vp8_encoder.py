"""VP8 encoding for aiortc senders: libvpx on one thread per session.

aiortc's Vp8Encoder gives libvpx two threads for frames above 640x480 on a machine of 3 cores or
more (its `number_of_threads`). A server encodes many sessions at once, each on its own encoder,
so a frame sooner buys nothing and the CPU is what runs out: two threads took 13-18 % more CPU a
frame than one here (bench/results/2026-12-08-codecs.md) and 3.5-4.7x at 720p on issue #37's
machine. So one thread, whatever the size; the codec settings are libvpx's real-time ones (CBR
at the target bitrate, no lag, the fastest real-time speed aiortc also uses). Packetisation, the picture id and
the target bitrate (REMB) come from the parent.
"""

from __future__ import annotations

import av
from aiortc.codecs.vpx import Vp8Encoder
from aiortc.mediastreams import VIDEO_TIME_BASE, convert_timebase
from av.video.codeccontext import VideoCodecContext

# Only a bitrate that moved by more than this share rebuilds the encoder (a rebuild costs a keyframe).
BITRATE_CHANGE_RATIO = 0.1
PICTURE_IDS = 1 << 15


class OneThreadVp8Encoder(Vp8Encoder):
    def encode(self, frame: av.VideoFrame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        if frame.format.name != "yuv420p":
            frame = frame.reformat(format="yuv420p")
        if self.codec is not None and self._needs_new_codec(frame):
            self.codec = None
        if force_keyframe:
            frame.pict_type = av.video.frame.PictureType.I
        if self.codec is None:
            self.codec = self._open_codec(frame.width, frame.height)
        data = b"".join(bytes(packet) for packet in self.codec.encode(frame))
        payloads = self._packetize(data, self.picture_id)
        self.picture_id = (self.picture_id + 1) % PICTURE_IDS
        return payloads, convert_timebase(frame.pts, frame.time_base, VIDEO_TIME_BASE)

    def _needs_new_codec(self, frame: av.VideoFrame) -> bool:
        codec = self.codec
        assert codec is not None
        if (frame.width, frame.height) != (codec.width, codec.height):
            return True
        return abs(self.target_bitrate - codec.bit_rate) / codec.bit_rate > BITRATE_CHANGE_RATIO

    def _open_codec(self, width: int, height: int) -> VideoCodecContext:
        codec = av.CodecContext.create("libvpx", "w")
        codec.width, codec.height, codec.pix_fmt = width, height, "yuv420p"
        codec.bit_rate = self.target_bitrate
        codec.gop_size = 3000  # keyframes when a receiver asks (PLI), not on a timer
        codec.qmin, codec.qmax = 2, 56
        codec.thread_count = 1
        bitrate = str(self.target_bitrate)
        codec.options = {
            "deadline": "realtime",
            "cpu-used": "-6",  # libvpx's fastest real-time speed, adapting to the CPU left
            "lag-in-frames": "0",
            "minrate": bitrate,  # min = max = target: constant bitrate, what a congestion controller expects
            "maxrate": bitrate,
            "bufsize": bitrate,  # a one-second buffer
            "undershoot-pct": "100",
            "overshoot-pct": "15",
            "static-thresh": "1",
            "noise-sensitivity": "4",
            "partitions": "0",  # one token partition
        }
        return codec
