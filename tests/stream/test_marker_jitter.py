"""MarkerJitterBuffer: release on the marker bit, never an empty frame."""

from __future__ import annotations

from aiortc.jitterbuffer import JitterFrame
from aiortc.rtp import RtpPacket

from stream.aiortc_internals import MarkerJitterBuffer


def packet(seq: int, ts: int, data: bytes = b"x", marker: bool = False) -> RtpPacket:
    # RTCRtpReceiver stores the depayloaded bytes in `_data`; padding-only
    # packets get b"".
    p = RtpPacket(payload_type=96, sequence_number=seq % 65536, timestamp=ts)
    p.marker = 1 if marker else 0
    p.payload = data
    p._data = data  # type: ignore[attr-defined]
    return p


def new_buffer() -> MarkerJitterBuffer:
    return MarkerJitterBuffer(capacity=128, is_video=True)


def add(jb: MarkerJitterBuffer, p: RtpPacket) -> JitterFrame | None:
    _pli, frame = jb.add(p)
    return frame


def test_single_packet_frame_released_on_its_marker() -> None:
    jb = new_buffer()
    frame = add(jb, packet(10, 1000, b"abc", marker=True))
    assert frame is not None
    assert (frame.data, frame.timestamp) == (b"abc", 1000)


def test_multi_packet_frame_released_only_when_complete() -> None:
    jb = new_buffer()
    assert add(jb, packet(10, 1000, b"a")) is None
    assert add(jb, packet(11, 1000, b"b")) is None
    frame = add(jb, packet(12, 1000, b"c", marker=True))
    assert frame is not None and frame.data == b"abc"
    # the buffer moved on: the next frame is released on its own marker
    frame = add(jb, packet(13, 4000, b"d", marker=True))
    assert frame is not None and (frame.data, frame.timestamp) == (b"d", 4000)


def test_out_of_order_packets_wait_for_the_gap() -> None:
    jb = new_buffer()
    assert add(jb, packet(10, 1000, b"a")) is None
    assert add(jb, packet(12, 1000, b"c", marker=True)) is None  # 11 missing
    frame = add(jb, packet(11, 1000, b"b"))
    assert frame is not None and frame.data == b"abc"


def test_marker_before_its_frame_start_is_not_released_early() -> None:
    jb = new_buffer()
    assert add(jb, packet(20, 1000, b"a")) is None
    assert add(jb, packet(23, 4000, b"e", marker=True)) is None
    assert add(jb, packet(22, 1000, b"c", marker=True)) is None  # 21 missing
    frame = add(jb, packet(21, 1000, b"b"))
    assert frame is not None and frame.data == b"abc"
    frame = add(jb, packet(24, 7000, b"f", marker=True))
    # one frame per add(): the already complete 4000 frame comes first
    assert frame is not None and frame.timestamp == 4000


def test_missing_marker_released_when_next_timestamp_arrives() -> None:
    jb = new_buffer()
    assert add(jb, packet(10, 1000, b"a")) is None
    assert add(jb, packet(11, 1000, b"b")) is None
    frame = add(jb, packet(12, 4000, b"c"))
    assert frame is not None and (frame.data, frame.timestamp) == (b"ab", 1000)


def test_padding_with_old_timestamp_never_emits_and_does_not_stall() -> None:
    jb = new_buffer()
    frame = add(jb, packet(10, 1000, b"a", marker=True))
    assert frame is not None and frame.data == b"a"

    # Chrome: padding-only packets reuse the previous frame's timestamp
    assert add(jb, packet(11, 1000, b"")) is None
    assert add(jb, packet(12, 1000, b"")) is None

    frame = add(jb, packet(13, 4000, b"n", marker=True))
    assert frame is not None and (frame.data, frame.timestamp) == (b"n", 4000)


def test_padding_with_marker_bit_is_dropped_too() -> None:
    jb = new_buffer()
    assert add(jb, packet(10, 1000, b"", marker=True)) is None
    frame = add(jb, packet(11, 4000, b"n", marker=True))
    assert frame is not None and frame.data == b"n"


def test_padding_only_stream_never_emits() -> None:
    jb = new_buffer()
    for seq in range(300):
        assert add(jb, packet(seq, 1000 + 3000 * (seq // 3), b"")) is None


def test_sequence_wraparound() -> None:
    jb = new_buffer()
    frames = []
    seq = 65533
    for n in range(4):  # two packets per frame, across 65535 -> 0
        ts = 1000 + 3000 * n
        for part, marker in ((b"p", False), (b"q", True)):
            frame = add(jb, packet(seq, ts, part + bytes([n]), marker=marker))
            if frame is not None:
                frames.append(frame)
            seq += 1
    assert [f.timestamp for f in frames] == [1000, 4000, 7000, 10000]
    assert [f.data for f in frames] == [b"p%cq%c" % (n, n) for n in range(4)]


def test_wraparound_with_reordering_across_zero() -> None:
    jb = new_buffer()
    assert add(jb, packet(65534, 1000, b"a")) is None
    assert add(jb, packet(0, 1000, b"c", marker=True)) is None
    frame = add(jb, packet(65535, 1000, b"b"))
    assert frame is not None and frame.data == b"abc"


def test_late_packet_of_released_frame_is_ignored() -> None:
    jb = new_buffer()
    add(jb, packet(10, 1000, b"a"))
    assert add(jb, packet(11, 1000, b"b", marker=True)) is not None
    assert add(jb, packet(10, 1000, b"a")) is None  # duplicate retransmission
    frame = add(jb, packet(12, 4000, b"c", marker=True))
    assert frame is not None and frame.data == b"c"
