"""The runner thread with small chains of our own (the Chain protocol), real av frames."""

import fractions
import threading
import time

import av
import numpy as np
import pytest
import torch

from pipeline.chain import ChainItem, UnstagedChain
from pipeline.chains import UnknownChain, create_chain
from pipeline.runner import BatchRunner, FrameResult
from pipeline.settings import PipelineSettings


def make_frame(value: int, pts: int = 0, width: int = 64, height: int = 48) -> av.VideoFrame:
    image = np.full((height * 3 // 2, width), value, np.uint8)
    frame = av.VideoFrame.from_ndarray(image, format="yuv420p")
    frame.pts = pts
    frame.time_base = fractions.Fraction(1, 90000)
    return frame


class RecordingChain(UnstagedChain):
    """Adds 1 to every pixel, remembers batches and when they were staged and run; can be told to fail."""

    name = "recording"

    def __init__(
        self, fail_batch: bool = False, fail_session: str | None = None, delay: float = 0.0, fail_stage: bool = False
    ) -> None:
        self.batches: list[list[str]] = []
        self.staged_at: dict[str, float] = {}  # session -> when its latest frame was staged
        self.ran: dict[str, tuple[float, float]] = {}  # session -> (start, end) of its latest batch
        self.times: dict[str, float | None] = {}  # session -> its latest frame's media time
        self.forgotten: list[str] = []
        self.forgotten_at: dict[str, float] = {}
        self.fail_batch = fail_batch
        self.fail_session = fail_session
        self.fail_stage = fail_stage
        self.delay = delay
        self.warmed_for: int | None = None  # the largest batch the warm-up was told of

    def warm_up(self, max_batch: int = 1) -> None:
        self.warmed_for = max_batch

    def stage(self, batch: list[ChainItem]):
        if self.fail_stage:
            raise RuntimeError("upload failed")
        for item in batch:
            self.staged_at[item.session_id] = time.monotonic()
        return super().stage(batch)

    def run(self, batch: list[ChainItem]):
        start = time.monotonic()
        self.batches.append([item.session_id for item in batch])
        time.sleep(self.delay)
        for item in batch:
            self.ran[item.session_id] = (start, time.monotonic())
            self.times[item.session_id] = item.time
        if self.fail_batch:
            raise RuntimeError("model exploded")
        return [ValueError("bad face") if item.session_id == self.fail_session else item.image + 1 for item in batch]

    def forget_session(self, session_id: str) -> None:
        self.forgotten.append(session_id)
        self.forgotten_at[session_id] = time.monotonic()


def wait_until(condition, timeout: float = 2.0) -> None:
    """Polls the runner thread's visible state instead of sleeping a guessed time."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


class Inbox:
    def __init__(self) -> None:
        self.results: list[FrameResult] = []
        self.event = threading.Event()

    def __call__(self, result: FrameResult) -> None:
        self.results.append(result)
        self.event.set()

    def wait(self, count: int = 1, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.results) < count:
            assert time.monotonic() < deadline, f"only {len(self.results)} of {count} results"
            self.event.wait(0.05)
            self.event.clear()


@pytest.fixture
def runner_factory():
    runners = []

    def make(chain, **settings) -> BatchRunner:
        runner = BatchRunner(chain, PipelineSettings(**settings))
        runner.start()
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        runner.stop()
        assert not runner.running


def test_the_chain_is_warmed_up_for_the_largest_batch_the_runner_forms(runner_factory):
    chain = RecordingChain()
    runner_factory(chain, max_batch=5)
    assert chain.warmed_for == 5


def test_frames_over_the_pixel_limit_reach_the_chain_scaled_down(runner_factory):
    runner = runner_factory(RecordingChain(), max_frame_pixels=64 * 64)
    inbox = Inbox()
    runner.add_session("a", inbox)
    runner.submit("a", make_frame(10, pts=3000, width=256, height=128), arrived=time.monotonic())
    inbox.wait()
    result = inbox.results[0]
    assert result.processed and result.error is None
    assert (result.frame.width, result.frame.height) == (90, 44) and result.frame.pts == 3000
    assert int(result.frame.to_ndarray(format="yuv420p")[20, 40]) == 11


class AlternatingChain(RecordingChain):
    """Swaps every other frame of a session and passes the rest through (a face that comes and goes);
    session "c" gets an output that is no I420 image."""

    def run(self, batch: list[ChainItem]):
        swapped = super().run(batch)
        seen = [sum(session == item.session_id for done in self.batches for session in done) for item in batch]
        swapped = [np.zeros((5, 5), np.float32) if item.session_id == "c" else out for out, item in zip(swapped, batch)]
        return [out if count % 2 or isinstance(out, Exception) else None for out, count in zip(swapped, seen)]


def any_size_frame(value: int, width: int, height: int, pts: int) -> av.VideoFrame:
    """make_frame for any size, odd ones included (I420 arrays cannot hold those)."""
    frame = av.VideoFrame.from_ndarray(np.full((height, width, 3), value, np.uint8), format="rgb24")
    frame.pts, frame.time_base = pts, fractions.Fraction(1, 90000)
    return frame


@pytest.mark.parametrize("size, settings", [((65, 49), {}), ((256, 128), {"max_frame_pixels": 64 * 64})])
def test_a_sessions_output_keeps_one_size_whether_or_not_frames_are_swapped(runner_factory, size, settings):
    """Passed-through and failed frames go out as the chain saw them (cropped to even, scaled
    down), not as they came: each change of size would restart the peer's encoder."""
    runner = runner_factory(AlternatingChain(fail_session="b"), **settings)
    inboxes = {"a": Inbox(), "b": Inbox(), "c": Inbox()}
    for session, inbox in inboxes.items():
        runner.add_session(session, inbox)
    for n in range(4):
        for session, inbox in inboxes.items():
            runner.submit(session, any_size_frame(10, *size, pts=n), arrived=time.monotonic())
            inbox.wait(n + 1)
    delivered = {(r.frame.width, r.frame.height) for inbox in inboxes.values() for r in inbox.results}
    assert len(delivered) == 1 and delivered != {size}, delivered
    assert [r.processed for r in inboxes["a"].results] == [True, False, True, False]
    assert all(r.error == "bad face" for r in inboxes["b"].results)
    assert [r.error is not None and "not I420" in r.error for r in inboxes["c"].results] == [True, False, True, False]


def test_processed_frame_keeps_timing(runner_factory):
    chain = RecordingChain()
    runner = runner_factory(chain)
    inbox = Inbox()
    runner.add_session("a", inbox)
    runner.submit("a", make_frame(10, pts=3000), arrived=time.monotonic())
    inbox.wait()
    result = inbox.results[0]
    assert result.processed and result.error is None
    assert result.frame.pts == 3000 and result.frame.time_base == fractions.Fraction(1, 90000)
    assert int(result.frame.to_ndarray(format="yuv420p")[0, 0]) == 11
    assert chain.times["a"] == pytest.approx(3000 / 90000)  # the chain's smoothing measures media time


@pytest.mark.parametrize(
    "chain, message",
    [(RecordingChain(fail_batch=True), "model exploded"), (RecordingChain(fail_stage=True), "upload failed")],
)
def test_a_failed_batch_or_stage_passes_the_frames_through(runner_factory, chain, message):
    runner = runner_factory(chain)
    inbox = Inbox()
    runner.add_session("a", inbox)
    frame = make_frame(10)
    runner.submit("a", frame, arrived=time.monotonic())
    inbox.wait()
    assert inbox.results[0].frame is frame
    assert not inbox.results[0].processed and message in inbox.results[0].error
    assert runner.stats()["failed_frames"] == 1


def a_computes_while_b_arrives(runner_factory):
    """Sessions a and b; a's frame computes (0.3 s) when b's frame arrives, 0.1 s in."""
    chain = RecordingChain(delay=0.3)
    runner = runner_factory(chain)
    inboxes = {name: Inbox() for name in "ab"}
    for name, inbox in inboxes.items():
        runner.add_session(name, inbox)
    runner.submit("a", make_frame(10), arrived=time.monotonic())
    time.sleep(0.1)
    runner.submit("b", make_frame(50), arrived=time.monotonic())
    return chain, runner, inboxes


def test_next_batch_is_staged_while_the_previous_one_computes(runner_factory):
    chain, runner, inboxes = a_computes_while_b_arrives(runner_factory)
    for inbox in inboxes.values():
        inbox.wait()
    a_start, a_end = chain.ran["a"]
    b_start, _ = chain.ran["b"]
    assert a_start < chain.staged_at["b"] < a_end  # b's upload overlapped a's compute
    assert b_start >= a_end  # one batch computes at a time, in order
    assert chain.batches == [["a"], ["b"]]
    stats = runner.stats()
    assert stats["staged_wait_ms"]["p50"] is not None


def test_a_session_is_forgotten_only_after_its_staged_frame_ran(runner_factory):
    chain, runner, inboxes = a_computes_while_b_arrives(runner_factory)
    wait_until(lambda: "b" in chain.staged_at)  # b is staged, waiting for a's batch
    assert "b" in chain.staged_at and "b" not in chain.ran
    runner.remove_session("b")
    inboxes["a"].wait()
    deadline = time.monotonic() + 2
    while "b" not in chain.forgotten_at and time.monotonic() < deadline:
        time.sleep(0.01)
    # the chain ran b's staged frame (its result was dropped) and forgot b afterwards, so no
    # state of the ended session is rebuilt after it was forgotten
    assert chain.forgotten_at["b"] >= chain.ran["b"][1]
    assert inboxes["b"].results == []


def test_a_failed_frame_fails_only_itself(runner_factory):
    runner = runner_factory(RecordingChain(fail_session="b", delay=0.05), max_wait_ms=50)
    inboxes = {name: Inbox() for name in "ab"}
    for name, inbox in inboxes.items():
        runner.add_session(name, inbox)
    for name in "ab":
        runner.submit(name, make_frame(10), arrived=time.monotonic())
    for inbox in inboxes.values():
        inbox.wait()
    assert inboxes["a"].results[0].processed
    assert not inboxes["b"].results[0].processed and "bad face" in inboxes["b"].results[0].error


def test_sessions_are_batched_and_get_their_own_frames(runner_factory):
    chain = RecordingChain(delay=0.3)
    runner = runner_factory(chain)
    inboxes = {name: Inbox() for name in "abc"}
    for name, inbox in inboxes.items():
        runner.add_session(name, inbox)
    runner.submit("c", make_frame(1), arrived=time.monotonic())
    inboxes["c"].wait()  # the runner has learnt how long a batch takes
    runner.submit("c", make_frame(1), arrived=time.monotonic())
    wait_until(lambda: len(chain.batches) == 2)  # c's second batch computes
    # a and b arrive while c's batch computes: the next batch is staged near its end, with both
    runner.submit("a", make_frame(10), arrived=time.monotonic())
    time.sleep(0.05)
    runner.submit("b", make_frame(50), arrived=time.monotonic())
    for name in "ab":
        inboxes[name].wait()
    assert chain.batches == [["c"], ["c"], ["a", "b"]]
    assert chain.staged_at["a"] > chain.ran["c"][0] + 0.2  # staged late in c's batch, not at once
    assert int(inboxes["a"].results[0].frame.to_ndarray(format="yuv420p")[0, 0]) == 11
    assert int(inboxes["b"].results[0].frame.to_ndarray(format="yuv420p")[0, 0]) == 51
    assert runner.stats()["batch_sizes"] == {"1": 2, "2": 1}


def test_newest_frame_wins_while_the_chain_is_busy(runner_factory):
    chain = RecordingChain(delay=0.2)
    runner = runner_factory(chain)
    inbox = Inbox()
    runner.add_session("a", inbox)
    runner.submit("a", make_frame(1, pts=1), arrived=time.monotonic())
    wait_until(lambda: chain.batches)  # frame 1 is in the chain now
    assert runner.submit("a", make_frame(2, pts=2), arrived=time.monotonic()) is None
    replaced = runner.submit("a", make_frame(3, pts=3), arrived=time.monotonic())
    assert replaced is not None and replaced.pts == 2
    inbox.wait(2)
    assert [result.frame.pts for result in inbox.results] == [1, 3]


def test_removed_session_gets_nothing_and_is_forgotten(runner_factory):
    chain = RecordingChain(delay=0.2)
    runner = runner_factory(chain)
    inbox = Inbox()
    runner.add_session("a", inbox)
    runner.submit("a", make_frame(1), arrived=time.monotonic())
    wait_until(lambda: chain.batches)  # in the chain
    runner.remove_session("a")
    wait_until(lambda: chain.forgotten == ["a"])  # forgotten once its batch ran
    time.sleep(0.05)  # a result would be delivered by now
    assert inbox.results == []
    with pytest.raises(KeyError):
        runner.submit("a", make_frame(1), arrived=time.monotonic())


def test_fps_cap_limits_delivered_frames(runner_factory):
    runner = runner_factory(RecordingChain())
    inbox = Inbox()
    runner.add_session("a", inbox, fps_cap=10)
    start = time.monotonic()
    while time.monotonic() - start < 1.0:
        runner.submit("a", make_frame(1), arrived=time.monotonic())
        time.sleep(1 / 60)
    time.sleep(0.05)
    assert 8 <= len(inbox.results) <= 12


def test_chains_by_name():
    cpu = torch.device("cpu")
    assert create_chain("passthrough", cpu).name == "passthrough"
    fixed = create_chain("fixed-cost:100:2", cpu)
    assert (fixed.batch_ms, fixed.frame_ms) == (100, 2)
    for bad in ("nope", "fixed-cost:1", "fixed-cost:a:b", "passthrough:3"):
        with pytest.raises(UnknownChain):
            create_chain(bad, cpu)


def test_invert_chain_inverts_each_size():
    chain = create_chain("invert", torch.device("cpu"))
    small, large = np.full((6, 4), 10, np.uint8), np.full((12, 8), 200, np.uint8)
    out = chain.run([ChainItem("a", small), ChainItem("b", large), ChainItem("c", small)])
    assert [o.shape for o in out] == [(6, 4), (12, 8), (6, 4)]
    assert out[0][0, 0] == 245 and out[1][0, 0] == 55 and out[2][0, 0] == 245


class OutOfMemoryChain(RecordingChain):
    """Runs out of device memory on any batch of more than `fits` frames, as CUDA's allocator raises."""

    def __init__(self, fits: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fits = fits

    def run(self, batch: list[ChainItem]):
        if len(batch) > self.fits:
            self.batches.append([item.session_id for item in batch])
            raise torch.OutOfMemoryError(f"CUDA out of memory: a batch of {len(batch)} (test)")
        return super().run(batch)


def four_frames_in_one_batch(runner_factory, chain) -> tuple[BatchRunner, dict[str, Inbox]]:
    """Sessions a-d submit while session z's slow batch computes: they form one batch of four.

    z runs once first so the runner knows how long a batch takes: before that it stages whatever has
    arrived at once, and a thread switch between two submits would split a-d.
    """
    runner = runner_factory(chain)
    inboxes = {name: Inbox() for name in "zabcd"}
    for name, inbox in inboxes.items():
        runner.add_session(name, inbox)
    runner.submit("z", make_frame(1), arrived=time.monotonic())
    inboxes["z"].wait()
    runner.submit("z", make_frame(1), arrived=time.monotonic())
    wait_until(lambda: len(chain.batches) == 2)
    for value, name in enumerate("abcd", start=10):
        runner.submit(name, make_frame(value), arrived=time.monotonic())
    inboxes["z"].wait(2)
    for name in "abcd":
        inboxes[name].wait()
    return runner, inboxes


def test_a_batch_the_device_has_no_memory_for_runs_again_in_halves_and_loses_no_frame(runner_factory):
    """Issue #36: an out-of-memory error must never drop sessions' frames."""
    chain = OutOfMemoryChain(fits=1, delay=0.2)
    runner, inboxes = four_frames_in_one_batch(runner_factory, chain)
    assert chain.batches[2:] == [["a", "b", "c", "d"], ["a", "b"], ["a"], ["b"], ["c", "d"], ["c"], ["d"]]
    for value, name in enumerate("abcd", start=10):
        (result,) = inboxes[name].results
        assert result.processed and int(result.frame.to_ndarray(format="yuv420p")[0, 0]) == value + 1, name
    stats = runner.stats()
    assert (stats["oom_splits"], stats["failed_frames"]) == (3, 0)


def test_a_single_frame_the_device_has_no_memory_for_fails_alone(runner_factory):
    chain = OutOfMemoryChain(fits=0)
    runner = runner_factory(chain)
    inbox = Inbox()
    runner.add_session("a", inbox)
    frame = make_frame(10)
    runner.submit("a", frame, arrived=time.monotonic())
    inbox.wait()
    assert inbox.results[0].frame is frame and not inbox.results[0].processed
    assert "out of memory" in inbox.results[0].error
    assert runner.stats()["oom_splits"] == 0


def test_batches_stay_within_what_the_devices_memory_holds(runner_factory):
    """Issue #36: a chain whose warm-up measured room for 2 frames never gets a batch of more."""
    chain = RecordingChain(delay=0.05)
    chain.memory_batch_cap = 2
    runner = runner_factory(chain, max_batch=8)
    assert runner.max_batch == 2
    inboxes = {name: Inbox() for name in "zabcd"}
    for name, inbox in inboxes.items():
        runner.add_session(name, inbox)
    runner.submit("z", make_frame(1), arrived=time.monotonic())
    wait_until(lambda: len(chain.batches) == 1)
    for name in "abcd":
        runner.submit(name, make_frame(1), arrived=time.monotonic())
    for name in "abcd":
        inboxes[name].wait()
    assert max(len(batch) for batch in chain.batches) == 2


def test_the_runner_measures_what_a_batch_costs(runner_factory):
    """The capacity model's input: a fixed-cost chain's line is found from live batches."""
    runner = runner_factory(create_chain("fixed-cost:20:10", torch.device("cpu")), max_batch=4)
    inboxes = {name: Inbox() for name in "abcd"}
    for name, inbox in inboxes.items():
        runner.add_session(name, inbox)
    for size in (1, 4, 1, 4, 1, 4):
        for name in "abcd"[:size]:
            runner.submit(name, make_frame(1), arrived=time.monotonic())
        wait_until(lambda size=size: all(len(inboxes[name].results) for name in "abcd"[:size]))
        for inbox in inboxes.values():
            inbox.results.clear()
    line = runner.cost.line()
    assert set(runner.cost.by_size()) >= {1}
    assert line is not None and line.batch_s(4) > line.batch_s(1) and 0.025 <= line.batch_s(1) <= 0.060
