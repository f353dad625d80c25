"""Bounded queues swapped into aiortc's receiver."""

from __future__ import annotations

import asyncio
import threading

from stream.bounded_queues import DecoderInputQueue, LatestFramesQueue


async def test_latest_frames_queue_drops_oldest() -> None:
    q = LatestFramesQueue(2)
    for n in range(5):
        await q.put(n)
    assert q.qsize() == 2
    assert q.dropped == 3
    assert [q.get_nowait(), q.get_nowait()] == [3, 4]


async def test_latest_frames_queue_put_never_blocks() -> None:
    q = LatestFramesQueue(1)
    for n in range(100):
        await asyncio.wait_for(q.put(n), timeout=0.5)
        q.put_nowait(n)
    assert q.qsize() == 1 and q.dropped == 199


async def test_latest_frames_queue_keeps_end_sentinel() -> None:
    q = LatestFramesQueue(1)
    await q.put("a")
    await q.put(None)
    await q.put("b")  # does not evict the sentinel, only the older frame
    assert q.dropped == 1
    assert [q.get_nowait(), q.get_nowait()] == [None, "b"]


async def test_latest_frames_queue_wakes_a_waiting_getter() -> None:
    q = LatestFramesQueue(2)
    getter = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    await q.put("frame")
    assert await asyncio.wait_for(getter, timeout=1) == "frame"


async def test_latest_frames_queue_from_another_thread() -> None:
    # the decoder thread's way in: run_coroutine_threadsafe(q.put(frame), loop)
    q = LatestFramesQueue(2)
    loop = asyncio.get_running_loop()

    def producer() -> None:
        for n in range(10):
            asyncio.run_coroutine_threadsafe(q.put(n), loop).result(timeout=2)
        asyncio.run_coroutine_threadsafe(q.put(None), loop).result(timeout=2)

    await asyncio.to_thread(producer)
    items = [q.get_nowait() for _ in range(q.qsize())]
    assert items == [8, 9, None]  # the sentinel does not count as a frame
    assert q.dropped == 8


async def test_latest_frames_queue_join_does_not_hang_after_drops() -> None:
    q = LatestFramesQueue(1)
    for n in range(3):
        await q.put(n)
    q.get_nowait()
    q.task_done()
    await asyncio.wait_for(q.join(), timeout=1)


def test_decoder_queue_drops_backlog_and_requests_keyframe() -> None:
    event = threading.Event()
    q = DecoderInputQueue(3, overflow_event=event)
    for n in range(3):
        q.put(n)
    assert not event.is_set() and q.dropped == 0
    q.put(3)  # a 4th frame would wait: drop the 3 waiting ones
    assert event.is_set()
    assert q.dropped == 3
    assert q.qsize() == 1 and q.get_nowait() == 3


def test_decoder_queue_never_drops_stop_sentinel() -> None:
    event = threading.Event()
    q = DecoderInputQueue(1, overflow_event=event)
    q.put("a")
    q.put(None)
    q.put("b")
    assert q.dropped == 1
    assert [q.get_nowait(), q.get_nowait()] == [None, "b"]


def test_decoder_queue_put_never_blocks_and_join_completes() -> None:
    q = DecoderInputQueue(2)
    for n in range(50):
        q.put(n, timeout=0.1)
    while not q.empty():
        q.get_nowait()
        q.task_done()
    done = threading.Event()
    threading.Thread(target=lambda: (q.join(), done.set()), daemon=True).start()
    assert done.wait(1)


def test_decoder_queue_feeds_a_consumer_thread() -> None:
    q = DecoderInputQueue(1000)
    seen: list[int] = []

    def consumer() -> None:
        while (item := q.get()) is not None:
            seen.append(item)

    thread = threading.Thread(target=consumer)
    thread.start()
    for n in range(100):
        q.put(n)
    q.put(None)
    thread.join(timeout=2)
    assert not thread.is_alive()
    assert seen == list(range(100)) and q.dropped == 0
