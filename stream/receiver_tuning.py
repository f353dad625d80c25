"""Per-receiver latency tuning for aiortc's RTCRtpReceiver.

aiortc exposes no knobs for its receive path, so we swap private objects on
one receiver instance (nothing global is patched; the private accesses
themselves are in aiortc_internals.receiver):

- an audio receiver's jitter buffer, for ArrivalJitterBuffer (each packet on
  at once: the audio is only relayed, the viewer's player buffers it);
- a video receiver's jitter buffer, for MarkerJitterBuffer (release on the
  RTP marker bit);
- the track's frame queue, for a drop-oldest bounded queue (latest wins);
- the decoder input queue, for one that drops a backlog and asks for a
  keyframe instead of growing without limit.

Ordering (aiortc 1.16): `setRemoteDescription()` creates the RemoteStreamTrack
and only *schedules* `__connect()`; `RTCRtpReceiver.receive()`, which hands
`track._queue` and the decoder queue to the decoder thread, runs from
`__connect()` once ICE and DTLS are connected. Calling this right after
`await pc.setRemoteDescription(...)`, before yielding to the loop again, is
therefore always in time. No RTP packet reaches the jitter buffer before
`receive()` registers the receiver with the transport either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiortc import RTCRtpReceiver

from stream.aiortc_internals import (
    ArrivalJitterBuffer,
    MarkerJitterBuffer,
    decoder_error_event,
    jitter_buffer,
    receiver_kind,
    receiver_started,
    set_decoder_queue,
    set_jitter_buffer,
    set_track_queue,
    track_queue,
)
from stream.bounded_queues import DecoderInputQueue, LatestFramesQueue

logger = logging.getLogger(__name__)

# Same geometry as aiortc's own video jitter buffer.
VIDEO_JITTER_CAPACITY = 512


def tune_receiver(
    receiver: RTCRtpReceiver,
    *,
    max_decoded_frames: int = 2,
    max_encoded_frames: int = 60,
    admit: Callable[[Any], bool] | None = None,
) -> None:
    """Tune one receiver: a video one's jitter buffer and queues; an audio one's jitter buffer only.

    `admit` ((codec, encoded frame) -> bool), when given, sees each encoded frame before the
    decoder does; frames it refuses are dropped (decode_size_limit.DecodeSizeLimit).

    Call right after `await pc.setRemoteDescription(...)`. Calling it again on
    a tuned receiver does nothing. Raises RuntimeError when an untuned receiver
    has already started (its decoder thread holds the old queues by then, so
    swapping them would silently do nothing).
    """
    if isinstance(jitter_buffer(receiver), (MarkerJitterBuffer, ArrivalJitterBuffer)):
        # already tuned (e.g. called again on renegotiation): nothing to do
        return

    if receiver_started(receiver):
        raise RuntimeError(
            "tune_receiver() must run before the receiver starts: call it right after pc.setRemoteDescription()"
        )

    if receiver_kind(receiver) == "audio":
        # Its queues stay aiortc's: bounding them to a couple of frames would chop the sound.
        set_jitter_buffer(receiver, ArrivalJitterBuffer())
        logger.debug("tuned audio receiver: each packet handed on as it arrives")
        return

    set_jitter_buffer(receiver, MarkerJitterBuffer(capacity=VIDEO_JITTER_CAPACITY, is_video=True))
    set_decoder_queue(
        receiver,
        DecoderInputQueue(max_encoded_frames, overflow_event=decoder_error_event(receiver), admit=admit),
    )

    track = receiver.track
    if track is None:
        # sendonly transceiver: nothing is decoded for a track
        logger.debug("video receiver has no track yet; track queue not replaced")
        return
    old_queue = track_queue(track)
    if old_queue is not None and not old_queue.empty():
        raise RuntimeError("the track's queue already holds frames")
    set_track_queue(track, LatestFramesQueue(max_decoded_frames))
    logger.debug(
        "tuned video receiver: marker jitter buffer, %d decoded / %d encoded frames",
        max_decoded_frames,
        max_encoded_frames,
    )
