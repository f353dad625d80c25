"""The batch runner: two worker threads per device that execute the policy's decisions.

Each session has one slot holding its newest unclaimed frame (a newer frame
replaces it: latest frame wins, so nothing queues up behind a slow chain).

The staging thread asks the policy for a batch and stages it (frames to I420 arrays,
then `chain.stage`, which starts the upload to the device); the compute thread runs
the staged batch and hands every result to the session's `deliver` callback (called
on the compute thread; the caller moves it to its own loop).

Batch k+1 is staged while batch k computes, timed to be ready just as batch k ends
(from running estimates of both times): staging earlier would commit older frames
and split the sessions that arrive meanwhile into smaller batches. Nor is it staged
ahead when a session of batch k could join it by waiting for k's end (the policy's
`finishing`): sessions would otherwise settle into alternate batches for good.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import av
import torch

from pipeline.chain import Chain, ChainItem, ChainResult
from pipeline.chain_cost import ChainCost
from pipeline.device_memory import release_cached_device_memory
from pipeline.frames import frame_to_image, image_to_frame
from pipeline.policy import BatchPolicy
from pipeline.rolling import RollingWindow
from pipeline.settings import PipelineSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FrameResult:
    session_id: str
    frame: av.VideoFrame  # what the session sends on: processed, or the input passed through
    arrived: float  # time.monotonic() when the decoded frame reached the runner
    processed: bool
    error: str | None = None


Deliver = Callable[[FrameResult], None]


@dataclass(frozen=True)
class BatchTimes:
    """One batch's times in seconds, for the node's metrics (BatchRunner's `on_batch`)."""

    queue_waits_s: tuple[float, ...]  # each frame's: arrival at the runner -> its batch starts computing
    chain_s: float  # the batch's compute


@dataclass
class _RegisteredSession:
    """What the runner keeps of a session: where its results go and the options its frames run with."""

    deliver: Deliver
    options: Mapping[str, object] = field(default_factory=dict)


@dataclass
class _PendingFrame:
    """A session's newest frame not yet claimed by a batch (its slot holds one at most)."""

    session_id: str
    frame: av.VideoFrame
    arrived: float


@dataclass
class _StagedWork:
    """A batch the staging thread prepared, and sessions to forget once it has run."""

    jobs: list[_PendingFrame]
    items: list[ChainItem]
    failures: dict[int, str]  # job index -> why its frame could not be staged
    staged: object  # what chain.stage returned, or the exception it raised
    staged_at: float
    forget: list[str]


class BatchRunner:
    def __init__(
        self,
        chain: Chain,
        settings: PipelineSettings,
        clock: Callable[[], float] = time.monotonic,
        on_batch: Callable[[BatchTimes], None] | None = None,
    ) -> None:
        self.chain = chain
        self.settings = settings
        self._clock = clock
        self._policy = BatchPolicy(
            max_batch=settings.max_batch,
            max_wait_s=settings.max_wait_ms / 1000,
            max_in_flight=settings.max_in_flight,
        )
        self._cond = threading.Condition()
        self._sessions: dict[str, _RegisteredSession] = {}
        self._slots: dict[str, _PendingFrame] = {}
        self._forget: list[str] = []
        self._handoff: _StagedWork | None = None  # the staged batch waiting for the compute thread
        self._computing_since: float | None = None  # when the batch now computing started
        self._computing: frozenset[str] = frozenset()  # its sessions
        self._compute_s = _RunningMean()  # seconds a batch computes
        self._stage_s = _RunningMean()  # seconds a batch takes to stage
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._stats = _RunnerStats()
        self._on_batch = on_batch  # called on the compute thread after each batch
        self.cost = ChainCost()  # what a batch of n costs now: the node's capacity model reads it

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> None:
        self.chain.warm_up(self.settings.max_batch)
        cap = getattr(self.chain, "memory_batch_cap", None)  # free device memory, measured by the warm-up
        if cap is not None:
            self._policy.max_batch = max(1, min(self.settings.max_batch, cap))
        name = self.chain.name
        self._threads = [
            threading.Thread(target=self._stage_loop, name=f"facefuse-stage-{name}", daemon=True),
            threading.Thread(target=self._compute_loop, name=f"facefuse-compute-{name}", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                logger.error("runner thread %s did not stop within %.0f s", thread.name, timeout)
        self._threads = []

    @property
    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    # -- sessions (any thread) -----------------------------------------------------
    def add_session(
        self,
        session_id: str,
        deliver: Deliver,
        *,
        priority: int = 0,
        fps_cap: float | None = None,
        options: Mapping[str, object] | None = None,
    ) -> None:
        with self._cond:
            if session_id in self._sessions:
                raise ValueError(f"session {session_id} is already registered")
            self._sessions[session_id] = _RegisteredSession(deliver, dict(options or {}))
            self._policy.add_session(session_id, priority=priority, fps_cap=fps_cap)

    def remove_session(self, session_id: str) -> None:
        """Stops scheduling the session; a frame of it in flight is not delivered."""
        with self._cond:
            if self._sessions.pop(session_id, None) is None:
                return
            self._slots.pop(session_id, None)
            self._policy.remove_session(session_id)
            self._forget.append(session_id)
            self._cond.notify_all()

    def set_fps_cap(self, session_id: str, fps_cap: float | None) -> None:
        with self._cond:
            self._policy.set_fps_cap(session_id, fps_cap)
            self._cond.notify_all()

    def set_priority(self, session_id: str, priority: int) -> None:
        with self._cond:
            self._policy.set_priority(session_id, priority)
            self._cond.notify_all()

    def set_options(self, session_id: str, options: Mapping[str, object]) -> None:
        with self._cond:
            self._sessions[session_id].options = dict(options)

    def submit(self, session_id: str, frame: av.VideoFrame, arrived: float) -> av.VideoFrame | None:
        """Puts a frame in the session's slot; returns the unclaimed frame it replaced, if any."""
        with self._cond:
            if session_id not in self._sessions:
                raise KeyError(session_id)
            replaced = self._slots.get(session_id)
            self._slots[session_id] = _PendingFrame(session_id, frame, arrived)
            self._policy.frame_pending(session_id, self._clock())
            self._cond.notify_all()
        return replaced.frame if replaced is not None else None

    @property
    def max_batch(self) -> int:
        """The largest batch it runs: --max-batch, or fewer where the device's memory holds fewer."""
        return self._policy.max_batch

    def stats(self) -> dict[str, object]:
        with self._cond:
            return self._stats.snapshot(sessions=len(self._sessions))

    # -- the workers ---------------------------------------------------------------
    def _stage_loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    if self._handoff is not None:
                        self._cond.wait()
                        continue
                    now = self._clock()
                    hold = self._hold_s(now)
                    if hold > 0:  # the batch computing now has a while to go: let frames gather
                        self._cond.wait(hold)
                        continue
                    decision = self._policy.decide(now, finishing=self._computing)
                    if decision.batch or self._forget:
                        break
                    self._cond.wait(decision.wake_in)
                jobs = [self._slots.pop(session_id) for session_id in decision.batch]
                options = {job.session_id: self._sessions[job.session_id].options for job in jobs}
                # Forgotten after this batch has run: no batch with the session can follow it.
                forget, self._forget = self._forget, []
            started = self._clock()
            work = self._stage(jobs, options, forget)
            with self._cond:
                if jobs:
                    self._stage_s.add(work.staged_at - started)
                self._handoff = work
                self._cond.notify_all()

    def _hold_s(self, now: float) -> float:
        """How long to wait before staging, so the next batch is ready just as the current one ends."""
        if self._computing_since is None or self._compute_s.value is None:
            return 0.0
        lead = 2 * (self._stage_s.value or 0.0) + 0.001  # margin: staging times vary
        return self._computing_since + self._compute_s.value - lead - now

    def _stage(
        self, jobs: list[_PendingFrame], options: Mapping[str, Mapping[str, object]], forget: list[str]
    ) -> _StagedWork:
        items: list[ChainItem] = []
        failures: dict[int, str] = {}
        for index, job in enumerate(jobs):
            try:
                items.append(
                    ChainItem(
                        job.session_id,
                        frame_to_image(job.frame, self.settings.max_frame_pixels),
                        options[job.session_id],
                        job.frame.time,
                    )
                )
            except Exception as exc:
                failures[index] = f"decode to I420 failed: {exc}"
        staged: object = None
        if items:
            try:
                staged = self.chain.stage(items)
            except Exception as exc:
                staged = exc
        return _StagedWork(jobs, items, failures, staged, self._clock(), forget)

    def _compute_loop(self) -> None:
        while True:
            with self._cond:
                while self._handoff is None:
                    if self._stopping:
                        return
                    self._cond.wait()
                if self._stopping:
                    return
                work, self._handoff = self._handoff, None
                if work.jobs:
                    self._computing_since = self._clock()
                    self._computing = frozenset(job.session_id for job in work.jobs)
                self._cond.notify_all()  # the staging thread may plan the next batch now
            if work.jobs:
                self._run_batch(work)
            for session_id in work.forget:
                self._forget_session(session_id)

    def _forget_session(self, session_id: str) -> None:
        try:
            self.chain.forget_session(session_id)
        except Exception:
            logger.exception("chain failed to forget session %s", session_id)

    def _run_batch(self, work: _StagedWork) -> None:
        started = self._clock()
        splits_before = self._stats.oom_splits
        results = self._process(work)
        finished = self._clock()
        if work.items and self._stats.oom_splits == splits_before:  # a split batch's time is no batch's cost
            self.cost.add(len(work.items), finished - started)
        with self._cond:
            self._computing_since = None
            self._computing = frozenset()
            self._compute_s.add(finished - started)
            self._stats.record_batch(work.jobs, work.staged_at, started, finished, results)
            sessions = [self._sessions.get(job.session_id) for job in work.jobs]
            for job in work.jobs:
                self._policy.frame_done(job.session_id)
            self._cond.notify_all()
        if self._on_batch is not None:
            try:
                self._on_batch(BatchTimes(tuple(started - job.arrived for job in work.jobs), finished - started))
            except Exception:
                logger.exception("the batch observer failed")
        for session, result in zip(sessions, results):
            if session is None:
                continue  # the session ended while its frame was processed
            try:
                session.deliver(result)
            except Exception:
                logger.exception("delivering a frame to session %s failed", result.session_id)

    def _process(self, work: _StagedWork) -> list[FrameResult]:
        """Runs the chain; any failure affects only the frames it touched."""
        items = work.items
        outputs: list[ChainResult] = []
        if items:
            try:
                if isinstance(work.staged, BaseException):
                    raise work.staged
                outputs = self._run_splitting_on_oom(work.staged, items)
                if len(outputs) != len(items):
                    raise RuntimeError(f"chain returned {len(outputs)} results for {len(items)} frames")
            except Exception as exc:
                logger.warning("chain %s failed a batch of %d: %s", self.chain.name, len(items), exc)
                outputs = [exc] * len(items)
        by_job = iter(zip(items, outputs))
        results: list[FrameResult] = []
        for index, job in enumerate(work.jobs):
            if index in work.failures:
                results.append(FrameResult(job.session_id, job.frame, job.arrived, False, work.failures[index]))
                continue
            item, output = next(by_job)
            results.append(self._result(job, item, output))
        return results

    def _run_splitting_on_oom(self, staged: object, items: list[ChainItem]) -> list[ChainResult]:
        """The chain's results for a staged batch; a batch the device has no memory for is run again
        in two halves (each staged anew, the allocator's cache freed first), down to single frames:
        a scene with more faces, or a device another tenant filled, slows a batch instead of
        failing every frame in it. One frame that still does not fit fails alone."""
        try:
            return self.chain.run_staged(staged)
        except torch.OutOfMemoryError:
            if len(items) == 1:
                raise
        del staged  # the failed batch's device memory goes before the halves take theirs
        release_cached_device_memory()
        half = len(items) // 2
        with self._cond:
            self._stats.oom_splits += 1
        logger.warning("the device ran out of memory on a batch of %d: running it in halves", len(items))
        outputs: list[ChainResult] = []
        for part in (items[:half], items[half:]):
            outputs += self._run_splitting_on_oom(self.chain.stage(part), part)
        return outputs

    @staticmethod
    def _result(job: _PendingFrame, item: ChainItem, output: ChainResult) -> FrameResult:
        unchanged = _as_staged(job.frame, item)
        if isinstance(output, BaseException):
            return FrameResult(job.session_id, unchanged, job.arrived, False, str(output) or type(output).__name__)
        if output is None:  # passed through on purpose (e.g. no face): not processed, no error
            return FrameResult(job.session_id, unchanged, job.arrived, False)
        if output is item.image:
            return FrameResult(job.session_id, unchanged, job.arrived, True)
        try:
            return FrameResult(job.session_id, image_to_frame(output, like=job.frame), job.arrived, True)
        except Exception as exc:
            return FrameResult(job.session_id, unchanged, job.arrived, False, str(exc))


def _as_staged(frame: av.VideoFrame, item: ChainItem) -> av.VideoFrame:
    """The frame as the chain saw it: the decoded frame itself unless staging cropped an odd size
    or scaled it down (frames.py). A session's output keeps one size whether or not a frame was
    swapped: each change of size restarts the peer's encoder with a keyframe."""
    height, width = item.image.shape[0] * 2 // 3, item.image.shape[1]
    if (frame.width, frame.height) == (width, height):
        return frame
    return image_to_frame(item.image, like=frame)


class _RunningMean:
    """A running mean that follows recent values (exponentially weighted)."""

    def __init__(self, weight: float = 0.2) -> None:
        self.weight = weight
        self.value: float | None = None

    def add(self, sample: float) -> None:
        self.value = sample if self.value is None else self.value + self.weight * (sample - self.value)


class _RunnerStats:
    """Batch sizes, queue wait (arrival -> compute start), staged wait (staged -> compute start) and
    chain time; guarded by the runner's lock."""

    def __init__(self) -> None:
        self.batches = 0
        self.frames = 0
        self.failed_frames = 0
        self.oom_splits = 0  # batches run again in halves for want of device memory
        self.batch_sizes: Counter[int] = Counter()
        self.queue_wait_ms = RollingWindow(seconds=10)
        self.staged_wait_ms = RollingWindow(seconds=10)
        self.chain_ms = RollingWindow(seconds=10)

    def record_batch(
        self, jobs: list[_PendingFrame], staged_at: float, started: float, finished: float, results: list[FrameResult]
    ) -> None:
        self.batches += 1
        self.frames += len(jobs)
        self.failed_frames += sum(not result.processed for result in results)
        self.batch_sizes[len(jobs)] += 1
        self.staged_wait_ms.add((started - staged_at) * 1000)
        self.chain_ms.add((finished - started) * 1000)
        for job in jobs:
            self.queue_wait_ms.add((started - job.arrived) * 1000)

    def snapshot(self, sessions: int) -> dict[str, object]:
        return {
            "sessions": sessions,
            "batches": self.batches,
            "frames": self.frames,
            "failed_frames": self.failed_frames,
            "oom_splits": self.oom_splits,
            "batch_sizes": {str(size): count for size, count in sorted(self.batch_sizes.items())},
            "queue_wait_ms": {"p50": self.queue_wait_ms.percentile(50), "p99": self.queue_wait_ms.percentile(99)},
            "staged_wait_ms": {"p50": self.staged_wait_ms.percentile(50), "p99": self.staged_wait_ms.percentile(99)},
            "chain_ms": {"p50": self.chain_ms.percentile(50), "p99": self.chain_ms.percentile(99)},
        }
