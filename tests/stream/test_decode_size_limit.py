"""Frame sizes read from encoded VP8 and H.264 frames before decoding, and the limit built on them."""

import fractions
import queue
import random

import av
import pytest
from aiortc.codecs import depayload
from aiortc.codecs.h264 import H264Encoder
from aiortc.codecs.vpx import Vp8Encoder
from aiortc.jitterbuffer import JitterFrame
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from stream.bounded_queues import DecoderInputQueue
from stream.decode_size_limit import MAX_SETS_PER_FRAME, DecodeSizeLimit, UnreadableSize, declared_size

VP8 = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000)
H264 = RTCRtpCodecParameters(mimeType="video/H264", clockRate=90000)


def still(width: int, height: int, pts: int = 0, pix_fmt: str = "yuv420p") -> av.VideoFrame:
    frame = av.VideoFrame(width, height, pix_fmt)
    for plane in frame.planes:
        plane.update(bytes([plane.line_size % 200]) * plane.buffer_size)
    frame.pts, frame.time_base = pts, fractions.Fraction(1, 90000)
    return frame


def encoded(codec: RTCRtpCodecParameters, width: int, height: int, frames: int = 1) -> list[bytes]:
    """The frames as the receiver's jitter buffer hands them on: aiortc's encoders, depayloaded."""
    encoder = Vp8Encoder() if codec is VP8 else H264Encoder()
    out = []
    for index in range(frames):
        packets, _ = encoder.encode(still(width, height, pts=index * 3000), force_keyframe=index == 0)
        out.append(b"".join(depayload(codec, packet) for packet in packets))
    return out


def x264_keyframe(width: int, height: int, profile: str, pix_fmt: str = "yuv420p", **options: str) -> bytes:
    """A keyframe from libx264 itself, for the SPS variants aiortc's encoder never writes."""
    context = av.CodecContext.create("libx264", "w")
    context.width, context.height, context.pix_fmt = width, height, pix_fmt
    context.time_base = fractions.Fraction(1, 30)
    context.profile = profile
    context.options = options
    packets = context.encode(still(width, height, pix_fmt=pix_fmt)) + context.encode(None)
    return bytes(packets[0])


@pytest.mark.parametrize("width, height", [(640, 480), (683, 385), (1366, 770)])
def test_a_vp8_keyframe_declares_its_size_and_a_delta_frame_none(width, height):
    keyframe, delta = encoded(VP8, width, height, frames=2)
    assert declared_size("VP8", keyframe) == (width, height)
    assert declared_size("VP8", delta) is None
    # the two bits above each 14-bit size ask for upscaling on display; the decoded size stays
    scaled = keyframe[:7] + bytes([keyframe[7] | 0xC0]) + keyframe[8:9] + bytes([keyframe[9] | 0xC0]) + keyframe[10:]
    assert declared_size("VP8", scaled) == (width, height)


@pytest.mark.parametrize("width, height", [(640, 480), (1280, 720)])
def test_an_h264_keyframe_from_aiortcs_encoder_declares_its_size(width, height):
    keyframe, delta = encoded(H264, width, height, frames=2)
    assert declared_size("H264", keyframe) == (width, height)
    assert declared_size("H264", delta) is None


@pytest.mark.parametrize(
    "width, height, profile, pix_fmt, options, coded",
    [
        (1920, 1080, "High", "yuv420p", {}, (1920, 1088)),  # whole macroblocks
        (1280, 720, "High 4:4:4 Predictive", "yuv444p", {}, (1280, 720)),
        (720, 496, "High", "yuv420p", {"x264-params": "interlaced=1"}, (720, 512)),  # field pairs: 32 rows
        (854, 480, "Main", "yuv420p", {}, (864, 480)),
    ],
)
def test_h264_sequence_parameter_sets_of_other_profiles(width, height, profile, pix_fmt, options, coded):
    assert declared_size("H264", x264_keyframe(width, height, profile, pix_fmt, **options)) == coded


class Bits:
    """Writes an H.264 RBSP as the spec's syntax tables do (u(n), ue(v), se(v))."""

    def __init__(self) -> None:
        self.text = ""

    def u(self, value: int, count: int) -> None:
        self.text += format(value, f"0{count}b") if count else ""

    def ue(self, value: int) -> None:
        code = format(value + 1, "b")
        self.text += "0" * (len(code) - 1) + code

    def se(self, value: int) -> None:
        self.ue(2 * value - 1 if value > 0 else -2 * value)

    def nal(self, header: int) -> bytes:
        text = self.text + "1"  # rbsp_stop_one_bit, then zeros to the byte
        text += "0" * (-len(text) % 8)
        raw, escaped, zeros = bytes(int(text[i : i + 8], 2) for i in range(0, len(text), 8)), bytearray(), 0
        for byte in raw:  # emulation prevention: 00 00 0x (x <= 3) becomes 00 00 03 0x
            if zeros >= 2 and byte <= 3:
                escaped.append(3)
                zeros = 0
            escaped.append(byte)
            zeros = zeros + 1 if byte == 0 else 0
        return b"\x00\x00\x00\x01" + bytes([header]) + bytes(escaped)


def sps(
    width_mbs,
    height_units,
    *,
    profile=100,
    chroma=1,
    scaling=None,
    order_type=0,
    cycle=(),
    frame_mbs_only=1,
    header=0x67,
):
    """A sequence parameter set (spec 7.3.2.1.1) with the given sizes; scaling: None, or one entry
    per list (None: absent; else its delta_scale values); cycle: picture order type 1's offsets."""
    bits = Bits()
    bits.u(profile, 8), bits.u(0, 8), bits.u(40, 8), bits.ue(0)
    if profile in (100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135):
        bits.ue(chroma)
        if chroma == 3:
            bits.u(0, 1)
        bits.ue(0), bits.ue(0), bits.u(0, 1)
        bits.u(scaling is not None, 1)
        for deltas in scaling or ():
            bits.u(deltas is not None, 1)
            for delta in deltas or ():
                bits.se(delta)
    bits.ue(0), bits.ue(order_type)
    if order_type == 0:
        bits.ue(2)
    elif order_type == 1:
        bits.u(0, 1), bits.se(-1), bits.se(2), bits.ue(len(cycle))
        for offset in cycle:
            bits.se(offset)
    bits.ue(1), bits.u(0, 1), bits.ue(width_mbs - 1), bits.ue(height_units - 1), bits.u(frame_mbs_only, 1)
    if not frame_mbs_only:
        bits.u(0, 1)  # mb_adaptive_frame_field_flag
    bits.u(1, 1), bits.u(0, 1), bits.u(0, 1)  # direct_8x8_inference, no cropping, no VUI
    return bits.nal(header)


# delta_scale lists: read until next_scale is 0 or the list is full (8.5.6 / 7.3.2.1.1.1)
FULL_4X4 = [1] * 16  # never 0: sixteen values
DEFAULT_4X4 = [-8]  # next_scale 0 at once: the default list, one value read
STOPS_MIDWAY = [2, -10]  # 8 -> 10 -> 0: the rest repeat the last, two values read
FULL_8X8 = [0] * 64


@pytest.mark.parametrize(
    "kind, chroma, scaling",
    [
        (
            "4:2:0, eight lists of each kind",
            1,
            [FULL_4X4, DEFAULT_4X4, STOPS_MIDWAY, None, FULL_4X4, STOPS_MIDWAY, FULL_8X8, [4, -12]],
        ),
        ("4:4:4, twelve lists", 3, [None] * 6 + [FULL_8X8, None, [0] * 10 + [-8], FULL_8X8, None, FULL_8X8]),
    ],
)
def test_scaling_lists_are_stepped_over_as_the_spec_reads_them(kind, chroma, scaling):
    assert declared_size("H264", sps(120, 68, chroma=chroma, scaling=scaling)) == (1920, 1088), kind


def test_picture_order_type_1_and_field_coding_are_stepped_over():
    assert declared_size("H264", sps(80, 45, order_type=1, cycle=(3, -7, 0, 12))) == (1280, 720)
    assert declared_size("H264", sps(45, 18, profile=66, frame_mbs_only=0)) == (720, 576)


def test_emulation_prevention_bytes_are_taken_out_before_reading():
    escaped = sps(80, 45, order_type=1, cycle=(1 << 30, -(1 << 30)))  # runs of 31 zero bits
    assert b"\x00\x00\x03" in escaped
    assert declared_size("H264", escaped) == (1280, 720)


def test_a_small_set_before_a_large_one_does_not_let_the_large_one_through():
    """The decoder keeps the last set of each id (and a set may serve a later frame): every set
    of the frame counts, the forbidden bit notwithstanding."""
    small, large = sps(20, 15), sps(320, 180)
    assert declared_size("H264", small + large) == (5120, 2880)
    assert declared_size("H264", sps(20, 15, header=0xE7) + large + small) == (5120, 2880)
    refused = []
    limit = DecodeSizeLimit(4096 * 2304, refused.append)
    assert not limit((H264, JitterFrame(small + large + encoded(H264, 320, 240)[0], 0)))
    assert refused == ["the video is 5120x2880"]


@pytest.mark.parametrize(
    "data, why",
    [
        (b"\x00\x00\x01\x67", "cannot be read"),  # a set with nothing in it
        (encoded(H264, 640, 480)[0][:9], "cannot be read"),  # cut short of its sizes
        (sps(80, 45, order_type=1, cycle=[1] * 256), "picture order cycle of 256"),
        (sps(20, 15) * (MAX_SETS_PER_FRAME + 1), f"more than {MAX_SETS_PER_FRAME}"),
    ],
)
def test_a_set_that_cannot_be_read_is_refused(data, why):
    with pytest.raises(UnreadableSize, match=why):
        declared_size("H264", data)
    refused = []
    assert not DecodeSizeLimit(4096 * 2304, refused.append)((H264, JitterFrame(data, 0)))
    assert len(refused) == 1 and why in refused[0]


def test_foreign_data_declares_nothing_and_raises_nothing_but_unreadable_size():
    assert declared_size("VP8", b"\x00\x00\x00\x9d\x01") is None
    assert declared_size("opus", encoded(H264, 640, 480)[0]) is None
    rng = random.Random(7)
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        declared_size("VP8", data)  # any bytes: no exception (a 14-bit size cannot be larger)
        for candidate in (data, b"\x00\x00\x01\x67" + data):
            try:
                declared_size("H264", candidate)
            except UnreadableSize:
                pass


def test_the_limit_refuses_an_oversized_keyframe_and_everything_after_it():
    refused = []
    limit = DecodeSizeLimit(640 * 480, refused.append)
    small, large = encoded(VP8, 640, 480, frames=2), encoded(VP8, 1280, 720, frames=2)
    assert limit((VP8, JitterFrame(small[0], 0))) and limit((VP8, JitterFrame(small[1], 3000)))
    assert not limit((VP8, JitterFrame(large[0], 6000)))
    assert not limit((VP8, JitterFrame(large[1], 9000))) and not limit((VP8, JitterFrame(small[0], 12000)))
    assert refused == ["the video is 1280x720"], "told once"


def test_the_decoder_queue_drops_what_admit_refuses_and_still_joins():
    frames = DecoderInputQueue(10, admit=lambda item: item != "refused")
    for item in ("a", "refused", "b", None):
        frames.put(item)
    taken = [frames.get() for _ in range(3)]
    for _ in taken:
        frames.task_done()
    assert taken == ["a", "b", None]
    frames.join()  # returns: the refused item was never counted
    with pytest.raises(queue.Empty):
        frames.get_nowait()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_set_the_stream_repeats_is_read_once(monkeypatch):
    """An encoder sends the same set at every keyframe (with other units after it): read once."""
    import stream.decode_size_limit as module

    reads = []
    real = module._sps_size
    monkeypatch.setattr(module, "_sps_size", lambda unit: reads.append(unit) or real(unit))
    limit = DecodeSizeLimit(4096 * 2304, clock=Clock())
    frames = encoded(H264, 320, 240, frames=1) * 50 + [x264_keyframe(320, 240, "main") for _ in range(3)]
    for frame in frames:
        assert limit((H264, JitterFrame(frame, 0)))
    assert len(reads) == 2, "one read for aiortc's set, one for x264's"


def test_a_stream_that_brings_new_sets_at_every_frame_is_refused():
    """Each new set costs a parse on the event loop (7 ms for a hostile one): past a burst, more than
    a few a second end the session."""
    clock, refused = Clock(), []
    limit = DecodeSizeLimit(4096 * 2304, refused.append, clock=clock)
    admitted = 0
    for index in range(90):  # three seconds at 30 fps, a set never seen before in each frame
        clock.now += 1 / 30
        admitted += limit((H264, JitterFrame(sps(20 + index, 15), 0)))
    assert 16 <= admitted <= 24 and len(refused) == 1 and "new H.264 sequence parameter sets" in refused[0], (
        admitted,
        refused,
    )


def test_sizes_changing_back_and_forth_are_not_new_sets():
    """A browser adapting its resolution goes between a few sizes: each size's set is read once."""
    clock, refused = Clock(), []
    limit = DecodeSizeLimit(4096 * 2304, refused.append, clock=clock)
    sizes = [sps(40, 30), sps(20, 15), sps(80, 45), sps(30, 23)]
    for index in range(300):  # ten seconds at 30 fps, the size changing at every frame
        clock.now += 1 / 30
        assert limit((H264, JitterFrame(sizes[index % 4], 0)))
    assert refused == []
