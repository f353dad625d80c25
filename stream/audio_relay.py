"""The publisher's audio, passed through untouched to the stream's viewers and delayed so that it
stays in sync with the processed video, which leaves the server later by the chain's latency.

Each audio frame is released `delay_s()` after it arrived, in arrival order; its timing (pts)
is the publisher's, so a player's lip sync lines it up with the video frames captured with it.
Each viewer has its own bounded queue: one that cannot keep up loses its own oldest frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

# The longest the audio is held back: past it the video is too late to be worth waiting for.
MAX_DELAY_S = 2.0
# Frames held for the delay: MAX_DELAY_S of Opus's 20 ms frames, with room for a burst.
MAX_PENDING_FRAMES = 2 * int(MAX_DELAY_S / 0.020)
# A viewer's queue: 0.5 s of 20 ms frames; past it its oldest go.
VIEWER_QUEUE_FRAMES = 25
# How often the delay is worked out again (it reads percentiles of the video's recent frames):
# it follows seconds-long windows, so 50 times a second would be work for nothing.
DELAY_REFRESH_S = 0.5


class RelayedAudioTrack(MediaStreamTrack):
    """One viewer's copy of the stream's audio (the frames are shared, never modified)."""

    kind = "audio"

    def __init__(self, on_stop: Callable[[RelayedAudioTrack], None]) -> None:
        super().__init__()
        self._on_stop = on_stop
        self._queue: deque[av.AudioFrame] = deque(maxlen=VIEWER_QUEUE_FRAMES)
        self._ready = asyncio.Event()
        self.frames_dropped = 0

    def put(self, frame: av.AudioFrame) -> None:
        if self.readyState != "live":
            return
        if len(self._queue) == self._queue.maxlen:
            self.frames_dropped += 1
        self._queue.append(frame)
        self._ready.set()

    async def recv(self) -> av.AudioFrame:
        while not self._queue:
            if self.readyState != "live":
                raise MediaStreamError
            self._ready.clear()
            await self._ready.wait()
        return self._queue.popleft()

    def stop(self) -> None:
        super().stop()
        self._queue.clear()
        self._ready.set()  # wake a waiting recv() so it ends the track
        self._on_stop(self)


class AudioRelay:
    def __init__(self, delay_s: Callable[[], float]) -> None:
        self._delay_s = delay_s
        self._tracks: set[RelayedAudioTrack] = set()
        self._pending: deque[tuple[float, av.AudioFrame]] = deque(maxlen=MAX_PENDING_FRAMES)
        self._arrived = asyncio.Event()
        self._delay = 0.0
        self._delay_at = float("-inf")
        self.has_source = False

    def subscribe(self) -> RelayedAudioTrack:
        track = RelayedAudioTrack(on_stop=self._tracks.discard)
        self._tracks.add(track)
        return track

    async def run(self, source: MediaStreamTrack) -> None:
        """Reads the publisher's audio until it ends (or this task is cancelled). Read even when no
        one listens: unread, aiortc would queue every decoded frame."""
        self.has_source = True
        release = asyncio.ensure_future(self._release())
        try:
            while True:
                try:
                    frame = await source.recv()
                except MediaStreamError:
                    return
                if not self._tracks:
                    continue
                now = time.monotonic()
                if now - self._delay_at >= DELAY_REFRESH_S:
                    self._delay, self._delay_at = min(max(self._delay_s(), 0.0), MAX_DELAY_S), now
                self._pending.append((now + self._delay, frame))
                self._arrived.set()
        finally:
            release.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await release

    async def _release(self) -> None:
        while True:
            while not self._pending:
                self._arrived.clear()
                await self._arrived.wait()
            due, frame = self._pending[0]
            wait_s = due - time.monotonic()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
                continue
            self._pending.popleft()
            for track in list(self._tracks):
                track.put(frame)

    def stop(self) -> None:
        self._pending.clear()
        for track in list(self._tracks):
            track.stop()
