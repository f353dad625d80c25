"""The frame size an encoded video frame declares, read before it is decoded.

A decoder allocates a frame's buffers as its headers say: a 242 KB VP8 keyframe that declares
12000x12000 took libvpx 683 MB (measured 2026-12-01), and a peer may send one per session. The
receiver reads the size from the keyframe's header (VP8) or sequence parameter set (H.264) and
refuses a frame over the limit before the decoder sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# H.264 profiles whose SPS carries chroma format, bit depths and scaling matrices (spec 7.3.2.1.1).
_HIGH_PROFILES = {100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135}
_SPS = 7


def declared_size(codec: str, data: bytes) -> tuple[int, int] | None:
    """(width, height) declared by an encoded frame of `codec` ("VP8" or "H264", as aiortc names
    them): a VP8 keyframe's, or the H.264 coded size (whole macroblocks) of the first sequence
    parameter set in an Annex-B access unit. None when the frame declares none (a delta frame)
    or the codec is another; a header too short or malformed to read also gives None (the decoder
    then refuses it itself)."""
    name = codec.upper()
    if name == "VP8":
        return _vp8_keyframe_size(data)
    if name == "H264":
        for nal in _annex_b_units(data):
            if nal and nal[0] & 0x1F == _SPS:
                return _sps_size(nal)
    return None


def _vp8_keyframe_size(data: bytes) -> tuple[int, int] | None:
    # RFC 6386 9.1: a 3-byte frame tag (bit 0 clear on keyframes), the start code 9d 01 2a, then
    # 14-bit width and height (2 bits of scaling above each), little-endian
    if len(data) < 10 or data[0] & 1 or data[3:6] != b"\x9d\x01\x2a":
        return None
    return int.from_bytes(data[6:8], "little") & 0x3FFF, int.from_bytes(data[8:10], "little") & 0x3FFF


def _annex_b_units(data: bytes) -> list[bytes]:
    """The NAL units between 00 00 01 start codes (a 4-byte start code's extra 00 ends the unit
    before it as a trailing zero, which the parser never reads)."""
    units, start = [], data.find(b"\x00\x00\x01")
    while start != -1:
        end = data.find(b"\x00\x00\x01", start + 3)
        units.append(data[start + 3 : end if end != -1 else len(data)])
        start = end
    return units


class _Bits:
    """An RBSP's bits, most significant first, with the emulation-prevention bytes taken out."""

    def __init__(self, nal: bytes) -> None:
        self.data = nal.replace(b"\x00\x00\x03", b"\x00\x00")
        self.position = 0

    def bit(self) -> int:
        byte, offset = divmod(self.position, 8)
        if byte >= len(self.data):
            raise ValueError("the SPS ends early")
        self.position += 1
        return (self.data[byte] >> (7 - offset)) & 1

    def bits(self, count: int) -> int:
        value = 0
        for _ in range(count):
            value = value << 1 | self.bit()
        return value

    def ue(self) -> int:
        """Exp-Golomb, unsigned (spec 9.1)."""
        zeros = 0
        while not self.bit():
            zeros += 1
            if zeros > 31:
                raise ValueError("an Exp-Golomb code longer than 32 bits")
        return (1 << zeros) - 1 + self.bits(zeros)

    def se(self) -> int:
        value = self.ue()
        return (value + 1) // 2 if value % 2 else -(value // 2)


def _sps_size(nal: bytes) -> tuple[int, int] | None:
    """The coded size of a sequence parameter set NAL unit (spec 7.3.2.1.1), in whole macroblocks."""
    bits = _Bits(nal[1:])
    try:
        profile = bits.bits(8)
        bits.bits(16)  # constraint flags, level
        bits.ue()  # seq_parameter_set_id
        if profile in _HIGH_PROFILES:
            chroma_format = bits.ue()
            if chroma_format == 3:  # 4:4:4
                bits.bit()  # separate_colour_plane_flag
            bits.ue(), bits.ue()  # bit depths
            bits.bit()  # qpprime_y_zero_transform_bypass_flag
            if bits.bit():  # seq_scaling_matrix_present_flag: 6 lists of 4x4, 2 (4:4:4: 6) of 8x8
                for index in range(12 if chroma_format == 3 else 8):
                    if bits.bit():
                        _skip_scaling_list(bits, 16 if index < 6 else 64)
        bits.ue()  # log2_max_frame_num_minus4
        order_type = bits.ue()
        if order_type == 0:
            bits.ue()
        elif order_type == 1:
            bits.bit()
            bits.se(), bits.se()
            for _ in range(bits.ue()):
                bits.se()
        bits.ue()  # max_num_ref_frames
        bits.bit()  # gaps_in_frame_num_value_allowed_flag
        width_mbs, height_units = bits.ue() + 1, bits.ue() + 1
        frame_mbs_only = bits.bit()
    except ValueError:
        return None
    return width_mbs * 16, height_units * 16 * (2 - frame_mbs_only)


def _skip_scaling_list(bits: _Bits, size: int) -> None:
    last, following = 8, 8
    for _ in range(size):
        if following:
            following = (last + bits.se() + 256) % 256
        last = following or last


class DecodeSizeLimit:
    """For a receiver's decoder queue (`admit`): refuses a (codec, encoded frame) that declares
    more than `max_pixels`, and every frame after it (the stream cannot be decoded without that
    keyframe); calls `on_refused(width, height)` once, on the thread that feeds the queue."""

    def __init__(self, max_pixels: int, on_refused: Callable[[int, int], None] | None = None) -> None:
        self.max_pixels = max_pixels
        self.on_refused = on_refused
        self.refused: tuple[int, int] | None = None

    def __call__(self, item: Any) -> bool:
        if self.refused is not None:
            return False
        codec, frame = item
        size = declared_size(codec.name, frame.data)
        if size is None or size[0] * size[1] <= self.max_pixels:
            return True
        self.refused = size
        if self.on_refused is not None:
            self.on_refused(*size)
        return False
