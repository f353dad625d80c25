"""Bounded replacements for the two unbounded queues inside an aiortc receiver.

Both sit between producers that must never block (the event loop feeding the
decoder thread, the decoder thread feeding the track) and consumers that may
fall behind. Unbounded, they turn a slow consumer into ever-growing latency
(7.5 s after 15 s: docs/architecture.md). `None` is aiortc's end-of-stream sentinel
on both and is never dropped.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class LatestFramesQueue(asyncio.Queue):
    """asyncio.Queue keeping only the newest `max_frames` frames (drop-oldest).

    put() / put_nowait() never block nor raise QueueFull: the base queue is
    unbounded and the bound is enforced by evicting the oldest frame. Used as a
    RemoteStreamTrack's `_queue`, fed by the decoder thread through
    `run_coroutine_threadsafe(queue.put(frame), loop)`, so all calls happen on
    the event loop.
    """

    def __init__(self, max_frames: int) -> None:
        if max_frames < 1:
            raise ValueError(f"max_frames must be >= 1, got {max_frames}")
        super().__init__()  # unbounded base: put() must never wait
        self.max_frames = max_frames
        self.dropped = 0

    def put_nowait(self, item: Any) -> None:
        if item is not None:
            while self._frame_count() >= self.max_frames:
                self._evict_oldest_frame()
        super().put_nowait(item)

    async def put(self, item: Any) -> None:
        # The base put() waits while full(); ours never is, but go straight to
        # put_nowait so the eviction logic has a single entry point.
        self.put_nowait(item)

    def _frame_count(self) -> int:
        return sum(1 for item in self._queue if item is not None)

    def _evict_oldest_frame(self) -> None:
        for index, item in enumerate(self._queue):
            if item is not None:
                del self._queue[index]
                self.dropped += 1
                # keep join()/task_done() bookkeeping consistent
                self.task_done()
                return


class DecoderInputQueue(queue.Queue):
    """queue.Queue of encoded frames that resets itself when the decoder lags.

    When more than `max_frames` encoded frames are already waiting, the waiting
    ones are dropped (the new one is kept) and `overflow_event` is set. aiortc
    reads the receiver's decoder-error event on the next RTP packet and sends a
    PLI, so the sender produces a fresh keyframe to resynchronise on. put()
    never blocks; the `None` stop sentinel is never dropped.
    """

    def __init__(
        self,
        max_frames: int,
        overflow_event: threading.Event | None = None,
        admit: Callable[[Any], bool] | None = None,
    ) -> None:
        if max_frames < 1:
            raise ValueError(f"max_frames must be >= 1, got {max_frames}")
        super().__init__()  # unbounded base: the event loop must never block
        self.max_frames = max_frames
        self.overflow_event = overflow_event
        self.admit = admit  # (codec, encoded frame) -> whether the decoder may see it
        self.dropped = 0

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if item is not None and self.admit is not None and not self.admit(item):
            return  # refused before the decoder allocates anything for it
        super().put(item, block, timeout)

    def _put(self, item: Any) -> None:
        # Called by put() with self.mutex held.
        if item is not None:
            waiting = sum(1 for queued in self.queue if queued is not None)
            if waiting >= self.max_frames:
                self._drop_waiting_frames(waiting)
        super()._put(item)

    def _drop_waiting_frames(self, count: int) -> None:
        sentinels = [queued for queued in self.queue if queued is None]
        self.queue.clear()
        self.queue.extend(sentinels)
        self.dropped += count
        # mirror task_done() for the dropped items (we already hold the mutex)
        self.unfinished_tasks = max(0, self.unfinished_tasks - count)
        if self.unfinished_tasks == 0:
            self.all_tasks_done.notify_all()
        if self.overflow_event is not None:
            self.overflow_event.set()
        logger.warning(
            "decoder is %d frames behind: dropped them, requesting a keyframe",
            count,
        )
