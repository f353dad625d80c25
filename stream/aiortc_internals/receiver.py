"""The receive path of an RTCRtpReceiver: its jitter buffer, decoder queue and track queue.

aiortc creates all three in RTCRtpReceiver.__init__ / RemoteStreamTrack.__init__ and offers no
way to give its own; these read and replace them on one instance. The decoder queue carries
(codec, JitterFrame) items and a None stop sentinel; the decoder thread puts decoded frames into
the track's asyncio queue with run_coroutine_threadsafe(queue.put(frame)).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

from aiortc import RTCRtpReceiver
from aiortc.jitterbuffer import JitterBuffer


def receiver_kind(receiver: RTCRtpReceiver) -> str:
    """ "audio" or "video"."""
    return receiver._RTCRtpReceiver__kind  # type: ignore[attr-defined]


def receiver_started(receiver: RTCRtpReceiver) -> bool:
    """Whether receive() has run: the decoder thread holds the queues it was given by then."""
    started = receiver._RTCRtpReceiver__started  # type: ignore[attr-defined]
    return bool(started or decoder_thread(receiver))


def decoder_thread(receiver: RTCRtpReceiver) -> threading.Thread | None:
    return receiver._RTCRtpReceiver__decoder_thread  # type: ignore[attr-defined]


def jitter_buffer(receiver: RTCRtpReceiver) -> JitterBuffer:
    return receiver._RTCRtpReceiver__jitter_buffer  # type: ignore[attr-defined]


def set_jitter_buffer(receiver: RTCRtpReceiver, buffer: JitterBuffer) -> None:
    receiver._RTCRtpReceiver__jitter_buffer = buffer  # type: ignore[attr-defined]


def decoder_queue(receiver: RTCRtpReceiver) -> queue.Queue:
    return receiver._RTCRtpReceiver__decoder_queue  # type: ignore[attr-defined]


def set_decoder_queue(receiver: RTCRtpReceiver, decoder_input: queue.Queue) -> None:
    receiver._RTCRtpReceiver__decoder_queue = decoder_input  # type: ignore[attr-defined]


def decoder_error_event(receiver: RTCRtpReceiver) -> threading.Event:
    """Set by the decoder on an error; the receiver clears it on the next RTP packet and sends a
    PLI (asks the sender for a keyframe)."""
    return receiver._RTCRtpReceiver__decoder_error  # type: ignore[attr-defined]


def track_queue(track: Any) -> asyncio.Queue | None:
    """The queue a RemoteStreamTrack's recv() reads decoded frames from."""
    return getattr(track, "_queue", None)


def set_track_queue(track: Any, frames: asyncio.Queue) -> None:
    track._queue = frames
