"""The frame size an encoded video frame declares, read before it is decoded.

A decoder allocates a frame's buffers as its headers say: a 242 KB VP8 keyframe that declares
12000x12000 took libvpx 683 MB (bench/results/2026-12-01-what-peers-send.md), and a peer may send one per session. The
receiver reads the size from the keyframe's header (VP8) or sequence parameter set (H.264) and
refuses a frame over the limit before the decoder sees it.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# H.264 profiles whose SPS carries chroma format, bit depths and scaling matrices (spec 7.3.2.1.1).
_HIGH_PROFILES = {100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135}
# A start code and a NAL unit header of type 7 (sequence parameter set), forbidden bit or not. A
# start code never occurs inside a NAL unit (emulation prevention), so no unit is split to find it.
_SPS_START = re.compile(rb"\x00\x00\x01[\x07\x27\x47\x67\x87\xa7\xc7\xe7]")
# Bytes of a set read at most: its sizes come long before (a hostile set of 700 KB kept the
# bit reader busy 4 s), and libavcodec refuses longer picture-order cycles.
MAX_SPS_BYTES = 4096
MAX_ORDER_CYCLE = 255
# Sets in one frame at most (an encoder sends one per keyframe): each costs a parse on the event loop.
MAX_SETS_PER_FRAME = 8
# An encoder repeats the same set at every keyframe and makes a new one when its resolution
# changes; a limit remembers the sets it has read, and reads at most this many new ones a second
# (burst: the second number). A hostile 4 KB set took the bit reader 7 ms: sent at every frame,
# one peer's sets had cost the event loop a core (bench/results/2026-12-01-what-peers-send.md).
NEW_SETS_PER_S, NEW_SETS_BURST = 4.0, 16
KNOWN_SETS = 16


class UnreadableSize(ValueError):
    """An H.264 sequence parameter set that cannot be read: refused, since the decoder might read a
    size into it."""


def declared_size(
    codec: str, data: bytes, size_of_set: Callable[[bytes], tuple[int, int]] | None = None
) -> tuple[int, int] | None:
    """(width, height) declared by an encoded frame of `codec` ("VP8" or "H264", as aiortc names
    them): a VP8 keyframe's, or the largest H.264 coded size (whole macroblocks) of the sequence
    parameter sets in an Annex-B access unit (the decoder keeps the last one of each id, and one
    set may come for a later frame: every set counts). None when the frame declares none (a delta
    frame) or the codec is another; UnreadableSize for a parameter set that cannot be read. A VP8
    header that cannot be read gives None: libvpx refuses that frame itself. `size_of_set` reads one
    set's NAL unit (default: parsed each time)."""
    name = codec.upper()
    if name == "VP8":
        return _vp8_keyframe_size(data)
    if name == "H264":
        sizes = [(size_of_set or _sps_size)(unit) for unit in _sps_units(data)]
        return max(sizes, key=lambda size: size[0] * size[1], default=None)
    return None


def _sps_units(data: bytes) -> list[bytes]:
    """The sequence parameter set NAL units of an Annex-B access unit, each up to the next start
    code (at most MAX_SPS_BYTES)."""
    units = []
    for found in _SPS_START.finditer(data):
        if len(units) == MAX_SETS_PER_FRAME:
            raise UnreadableSize(
                f"the video sends more than {MAX_SETS_PER_FRAME} H.264 sequence parameter sets in one frame"
            )
        start = found.end() - 1
        end = data.find(b"\x00\x00\x01", start, start + MAX_SPS_BYTES)
        units.append(data[start : end if end >= 0 else start + MAX_SPS_BYTES])
    return units


def _vp8_keyframe_size(data: bytes) -> tuple[int, int] | None:
    # RFC 6386 9.1: a 3-byte frame tag (bit 0 clear on keyframes), the start code 9d 01 2a, then
    # 14-bit width and height (2 bits of scaling above each), little-endian
    if len(data) < 10 or data[0] & 1 or data[3:6] != b"\x9d\x01\x2a":
        return None
    return int.from_bytes(data[6:8], "little") & 0x3FFF, int.from_bytes(data[8:10], "little") & 0x3FFF


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


def _sps_size(nal: bytes) -> tuple[int, int]:
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
            cycle = bits.ue()
            if cycle > MAX_ORDER_CYCLE:
                raise ValueError(f"a picture order cycle of {cycle} frames")
            for _ in range(cycle):
                bits.se()
        bits.ue()  # max_num_ref_frames
        bits.bit()  # gaps_in_frame_num_value_allowed_flag
        width_mbs, height_units = bits.ue() + 1, bits.ue() + 1
        frame_mbs_only = bits.bit()
    except ValueError as exc:
        raise UnreadableSize(f"the video's H.264 sequence parameter set cannot be read ({exc})") from None
    return width_mbs * 16, height_units * 16 * (2 - frame_mbs_only)


def _skip_scaling_list(bits: _Bits, size: int) -> None:
    last, following = 8, 8
    for _ in range(size):
        if following:
            following = (last + bits.se() + 256) % 256
        last = following or last


class DecodeSizeLimit:
    """For a receiver's decoder queue (`admit`): refuses a (codec, encoded frame) that declares
    more than `max_pixels` or a size that cannot be read, and every frame after it (the stream
    cannot be decoded without that keyframe); calls `on_refused(why)` once, on the thread that
    feeds the queue, with why "the video is WxH" or what could not be read."""

    def __init__(
        self,
        max_pixels: int,
        on_refused: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_pixels = max_pixels
        self.on_refused = on_refused
        self.refused: str | None = None
        self._clock = clock
        self._known_sets: OrderedDict[bytes, tuple[int, int]] = OrderedDict()
        self._new_set_tokens, self._tokens_at = float(NEW_SETS_BURST), clock()

    def __call__(self, item: Any) -> bool:
        if self.refused is not None:
            return False
        codec, frame = item
        try:
            size = declared_size(codec.name, frame.data, self._size_of_set)
        except UnreadableSize as exc:
            why = str(exc)
        else:
            if size is None or size[0] * size[1] <= self.max_pixels:
                return True
            why = f"the video is {size[0]}x{size[1]}"
        self.refused = why
        if self.on_refused is not None:
            self.on_refused(why)
        return False

    def _size_of_set(self, unit: bytes) -> tuple[int, int]:
        known = self._known_sets.get(unit)
        if known is not None:
            self._known_sets.move_to_end(unit)
            return known
        now = self._clock()
        self._new_set_tokens = min(
            float(NEW_SETS_BURST), self._new_set_tokens + (now - self._tokens_at) * NEW_SETS_PER_S
        )
        self._tokens_at = now
        if self._new_set_tokens < 1:
            raise UnreadableSize(
                f"the video brings new H.264 sequence parameter sets more than {NEW_SETS_PER_S:g} times a second"
            )
        self._new_set_tokens -= 1
        size = _sps_size(unit)
        self._known_sets[unit] = size
        if len(self._known_sets) > KNOWN_SETS:
            self._known_sets.popitem(last=False)
        return size
