"""ArrivalJitterBuffer: each audio packet handed on as it arrives, late ones dropped."""

from __future__ import annotations

from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

from stream.aiortc_internals import ArrivalJitterBuffer

OPUS_FRAME_TICKS = 960  # 20 ms at 48 kHz


def packet(seq: int) -> RtpPacket:
    p = RtpPacket(payload_type=111, sequence_number=seq % 65536, timestamp=seq * OPUS_FRAME_TICKS)
    p.payload = p._data = f"opus {seq}".encode()  # type: ignore[attr-defined]
    return p


def add(buffer: JitterBuffer, seq: int) -> JitterFrame | None:
    _pli, frame = buffer.add(packet(seq))
    return frame


def test_every_packet_in_order_comes_out_as_it_goes_in() -> None:
    buffer = ArrivalJitterBuffer()
    for seq in range(100, 140):
        frame = add(buffer, seq)
        assert frame is not None
        assert (frame.data, frame.timestamp) == (f"opus {seq}".encode(), seq * OPUS_FRAME_TICKS)


def test_aiortcs_own_audio_buffer_holds_four_packets_back() -> None:
    # the reference: the lag ArrivalJitterBuffer removes
    buffer = JitterBuffer(capacity=16, prefetch=4)
    released = [add(buffer, seq) for seq in range(5)]
    assert released[:4] == [None] * 4  # 80 ms of Opus held
    assert released[4] is not None and released[4].data == b"opus 0"


def test_a_lost_packet_is_given_up_at_once() -> None:
    buffer = ArrivalJitterBuffer()
    assert add(buffer, 1) is not None
    frame = add(buffer, 3)  # 2 is lost
    assert frame is not None and frame.data == b"opus 3"
    assert add(buffer, 4) is not None


def test_a_packet_that_arrives_after_a_newer_one_is_dropped() -> None:
    buffer = ArrivalJitterBuffer()
    add(buffer, 1)
    add(buffer, 3)
    assert add(buffer, 2) is None  # too late: 3 is already out
    assert add(buffer, 3) is None  # a duplicate
    assert add(buffer, 4).data == b"opus 4"


def test_sequence_numbers_wrap_around() -> None:
    buffer = ArrivalJitterBuffer()
    out = [add(buffer, seq) for seq in range(65530, 65542)]
    assert [frame.data for frame in out] == [f"opus {seq}".encode() for seq in range(65530, 65542)]


def test_a_long_loss_burst_does_not_stall_the_buffer() -> None:
    buffer = ArrivalJitterBuffer()
    add(buffer, 10)
    frame = add(buffer, 10 + 40)  # 39 packets lost: more than the buffer's 16 slots
    assert frame is not None and frame.data == b"opus 50"
    assert add(buffer, 51).data == b"opus 51"
