"""One peer connection's worth of state: its tracks, its slot in the runner, its stats.

Frame path: the remote track's frames go into the runner's slot for this session
(a newer frame replaces an unclaimed one); the runner's results come back on the
event loop into the video fanout, whose tracks the senders encode: the publisher's own
return video and each WHEP viewer's (fanout.py). The audio goes to the viewers, delayed
to the video's latency (audio_relay.py). Every task the session starts is owned here and
cancelled and awaited by `close()`. The data channel's events and commands are
client_channel.py's; the meter's glue is metering.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import av
from aiortc import MediaStreamTrack, RTCDataChannel, RTCIceCandidate, RTCPeerConnection
from aiortc.mediastreams import MediaStreamError

from pipeline.faces import FaceLibrary
from pipeline.runner import BatchRunner, FrameResult
from stream.audio_relay import AudioRelay
from stream.bounded_wait import finished_within
from stream.capacity import ASSUMED_SIZE
from stream.client_channel import ClientChannel, closed_event, error_event
from stream.decode_size_limit import DecodeSizeLimit
from stream.errors import InvalidOffer, SessionClosedEarly
from stream.fanout import VideoFanout
from stream.frame_timings import FrameTimings
from stream.ice import keep_while_media_arrives, refuse_outside_checks, rtc_configuration
from stream.load_shedding import RATE, RESOLUTION, SHED_PIXELS_SHARE, SHED_RATE_SHARE, STEPS
from stream.metering import RETURN_LEASE_LIMIT_S, Meter, MeterFactory, SessionMetering, is_charged, throttle
from stream.negotiation import answer_offer, answer_sdp, apply_offer, tune_video_senders
from stream.network_stats import NetworkStats
from stream.peer_close import PEER_CLOSE_TIMEOUT_S, close_peer
from stream.processed_track import ProcessedTrack
from stream.receiver_tuning import tune_receiver
from stream.settings import StreamSettings
from stream.stats import SessionStats
from stream.swap_options import SWAP_KEYS, checked_swap_options
from stream.trickle import TrickleBudget, add_trickled_candidates, candidate_count
from stream.webrtc_counts import WebrtcCounts

logger = logging.getLogger(__name__)

# How long a session whose video is refused waits for its client's data channel to tell it why.
REFUSAL_NOTICE_S = 2.0
# How long closing waits for its "closed" event (why the session ends) to leave.
CLOSED_NOTICE_S = 0.5
# The most each step of closing may take; past it the step is logged, cancelled and left behind,
# so a session always ends and frees its slots (a task that ignored its cancellation held a
# session in `closing`, its lease renewed, for good). Each is above the step's own inner bounds.
STOP_WORK_LIMIT_S = 2.0
TELL_CLIENT_LIMIT_S = CLOSED_NOTICE_S + 1.0
CLOSE_PEER_LIMIT_S = 2 * PEER_CLOSE_TIMEOUT_S + 1.0


class Session:
    def __init__(
        self,
        session_id: str,
        runner: BatchRunner,
        settings: StreamSettings,
        *,
        face_id: str | None = None,
        options: Mapping[str, object] | None = None,
        account_id: str | None = None,
        faces: FaceLibrary | None = None,
        make_meter: MeterFactory | None = None,
        on_closed: Callable[[Session], Awaitable[None] | None] | None = None,
        timings: FrameTimings | None = None,
    ) -> None:
        self.id = session_id
        self.account_id = account_id
        self._faces = faces if faces is not None else FaceLibrary()
        # Metered sessions: the manager opens the meter's lease before negotiation.
        self._metering = (
            SessionMetering(
                session_id,
                make_meter,
                send_event=self.send_event,
                set_fps_cap=self._set_fps_cap,
                end_session=self._close_soon,
            )
            if make_meter is not None
            else None
        )
        self.meter: Meter | None = self._metering.meter if self._metering is not None else None
        self.face_id = face_id
        self.stream: str | None = None  # the name it is published under, if any (the manager sets it)
        self.options = dict(options or {})
        self.state = "new"  # new -> connecting -> live -> closing -> closed
        self.close_reason: str | None = None
        self.created_at = time.time()
        self.timings = timings  # the node's histograms: each frame's latency and encoding
        self.stats = SessionStats(latency_sink=timings.latency if timings is not None else None)
        self.webrtc = WebrtcCounts()  # for the node's metrics
        self.network = NetworkStats()  # for its description: sampled by the stats loop
        self._runner = runner
        self._settings = settings
        self._on_closed = on_closed
        self._loop = asyncio.get_running_loop()
        self._pc = RTCPeerConnection(rtc_configuration(settings.ice))
        self._output = ProcessedTrack(
            on_sent=self.frame_sent,
            on_replaced=self._output_replaced,
            on_encoded=timings.encode if timings is not None else None,
        )
        self.video_out = VideoFanout()
        self.audio = AudioRelay(self._audio_delay_s)
        self._last_sent_arrival = float("-inf")  # the newest frame an encoder has taken (charged once)
        self.latest_frame: av.VideoFrame | None = None  # the newest frame sent on: the dashboard's still
        self.channel = ClientChannel(session_id, self, faces=self._faces, account_id=account_id, spawn=self._spawn)
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_frame_at = time.monotonic()
        self._closed = asyncio.Event()
        self._close_started = False
        self._negotiated = asyncio.Event()  # clear while accept() runs: close() lets it finish first
        self._trickle = TrickleBudget(0, settings.idle_timeout_s)  # the offer's own count once accepted
        self._negotiated.set()
        self._in_runner = False  # registered with the runner (after negotiation)
        # the node's capacity (stream/node_capacity.py): waiting in line, or processed at a shed step
        self.asked_at = time.monotonic()  # its place in the line: the earliest first, within a tier
        self.queued = False
        self.place: dict[str, object] | None = None  # the last "queued" event while it waits
        self.shed_step = 0  # stream/load_shedding.py's STEPS
        self._meter_fps_cap: float | None = None

    # -- negotiation ---------------------------------------------------------------
    async def accept(self, offer_sdp: str) -> str:
        """Applies the client's offer (checked by offer_check.checked_offer); returns the answer SDP.
        Raises InvalidOffer, or SessionClosedEarly when the session is closed meanwhile."""
        self._negotiated.clear()
        self._trickle = TrickleBudget(candidate_count(offer_sdp), self._settings.idle_timeout_s)
        try:
            return await self._negotiate(offer_sdp)
        finally:
            self._negotiated.set()

    async def _negotiate(self, offer_sdp: str) -> str:
        self.state = "connecting"
        self._pc.on("track", self._on_track)
        self._pc.on("datachannel", self._on_datachannel)
        self._pc.on("connectionstatechange", self._on_connection_state)
        await apply_offer(self._pc, offer_sdp, self._refuse_if_closed)
        if not any(t.kind == "video" and t.receiver.track is not None for t in self._pc.getTransceivers()):
            raise InvalidOffer("the offer has no video to receive")
        refuse_outside_checks(self._pc, self._settings.ice)
        keep_while_media_arrives(self._pc)
        self.webrtc.count_feedback(self._pc)
        for transceiver in self._pc.getTransceivers():
            tune_receiver(
                transceiver.receiver, admit=DecodeSizeLimit(self._settings.max_decoded_pixels, self._video_too_large)
            )
        # Closed while negotiating (a DELETE, a shutdown): it must not take a runner slot after close()
        # has already freed it.
        await answer_offer(self._pc, self._settings, self._refuse_if_closed)
        self.stats.codec = tune_video_senders(self._pc)
        for transceiver in self._pc.getTransceivers():
            if transceiver.kind == "video" and transceiver.currentDirection in ("sendrecv", "sendonly"):
                self.video_out.add(self._output)  # OBS's offer only sends: then nothing comes back to it

        if self._metering is not None:
            self._meter_fps_cap = self._metering.meter.fps_cap
        self._runner.add_session(
            self.id,
            self._deliver_from_worker,
            options=self._chain_options(),
            priority=self.priority,
            fps_cap=self._fps_cap(),
        )
        if self._metering is not None:
            self._spawn(self._metering.run(), "meter")
        self._in_runner = True
        self._spawn(self._watch(), "watch")
        self._spawn(self._send_stats(), "stats")
        return answer_sdp(self._pc, self._settings)

    @property
    def settings(self) -> StreamSettings:
        return self._settings

    @property
    def closing(self) -> bool:
        """close() has begun (or ended)."""
        return self._close_started

    def _refuse_if_closed(self) -> None:
        if self._close_started:
            raise SessionClosedEarly(f"the session was closed ({self.close_reason}) while its offer was being answered")

    def _chain_options(self) -> dict[str, object]:
        options: dict[str, object] = {**self.options, "face_id": self.face_id}
        if self.shed_step >= RESOLUTION:
            width, height = self.frame_size()
            options["max_pixels"] = int(width * height * SHED_PIXELS_SHARE)  # the runner scales it down
        return options

    @property
    def priority(self) -> int:
        """Its tier's priority (vip > paid > free); 0 without a meter."""
        return self.meter.priority if self.meter is not None else 0

    def frame_size(self) -> tuple[int, int]:
        """Its frames' size, or a camera's default before the first frame."""
        if self.stats.width is None or self.stats.height is None:
            return ASSUMED_SIZE
        return self.stats.width, self.stats.height

    # -- the node's capacity (stream/node_capacity.py) ----------------------------------------
    def wait_in_line(self, position: int, estimated_wait_s: float | None) -> None:
        """Not processed until the node has room: its own video goes back unprocessed, uncharged."""
        first = not self.queued
        self.queued = True
        if self.shed_step:
            self.set_shed_step(0, tell=False)
        place = {"type": "queued", "position": position, "estimated_wait_s": estimated_wait_s}
        if first or place != self.place:
            self.place = place
            self.send_event(place)

    def start_processing(self, waited_s: float) -> None:
        self.queued = False
        self.place = None
        self.send_event({"type": "admitted", "waited_s": round(waited_s, 1)})

    def set_shed_step(self, step: int, tell: bool = True) -> None:
        """Processed at a lower rate (RATE), and at fewer pixels too (RESOLUTION), or fully (0)."""
        before, self.shed_step = self.shed_step, step
        if self._in_runner and not self._close_started:
            self._apply_fps_cap()
            self._runner.set_options(self.id, self._chain_options())
        if tell and step != before:
            kind = "degraded" if step > before else "restored"
            self.send_event({"type": kind, "step": STEPS[step], "fps_share": self._shed_fps_share()})

    def _shed_fps_share(self) -> float:
        return SHED_RATE_SHARE if self.shed_step >= RATE else 1.0

    async def add_remote_candidates(self, candidates: list[RTCIceCandidate], end: bool) -> None:
        """Trickled candidates (WHIP's PATCH); `end`: no more will come. Raises TrickleRefused or
        TooManyCandidates past the connection's allowance (stream/trickle.py)."""
        self._trickle.take(len(candidates))
        await add_trickled_candidates(self._pc, candidates, end, closed=lambda: self._close_started)

    # -- tracks and channel ----------------------------------------------------------
    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "video":
            self._pc.addTrack(self._output)  # reuses the offer's video transceiver: sendrecv
            self._spawn(self._pump(track), "pump")
        else:
            self._spawn(self.audio.run(track), "audio")

    async def _pump(self, track: MediaStreamTrack) -> None:
        """Remote frames -> the runner's slot. Cheap: decoding already happened in aiortc's thread."""
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                break
            now = time.monotonic()
            self._last_frame_at = now
            if self.state == "connecting":
                self.state = "live"
            self.stats.frame_in(frame.width, frame.height, now)
            if self.meter is not None and self.meter.stopped:
                # Out of tokens: the original video, unprocessed and uncharged.
                self.stats.frames_throttled += 1
                self.latest_frame = frame
                self.video_out.put(FrameResult(self.id, frame, now, processed=False))
            elif self.queued:  # waiting for the node's capacity: likewise
                self.stats.frames_waiting += 1
                self.latest_frame = frame
                self.video_out.put(FrameResult(self.id, frame, now, processed=False))
            elif not self.video_out.watched:
                continue  # nobody would see it (OBS's sendonly offer, no viewer yet): not processed, not charged
            elif self._runner.submit(self.id, frame, now) is not None:
                self.stats.frames_dropped += 1
        self._close_soon("the peer stopped sending video", "video_ended")

    def _deliver_from_worker(self, result: FrameResult) -> None:
        # Called on the runner's thread.
        with contextlib.suppress(RuntimeError):  # the loop closed during shutdown
            self._loop.call_soon_threadsafe(self._deliver, result)

    def _deliver(self, result: FrameResult) -> None:
        if self._close_started:
            return
        if result.error is not None:
            self.stats.frames_failed += 1
            if self.stats.last_error != result.error:
                self.stats.last_error = result.error
                self.send_event(error_event("frame_failed", result.error))
        elif result.processed:
            self.stats.frames_processed += 1
        else:
            self.stats.frames_passed_through += 1
        self.latest_frame = result.frame
        self.video_out.put(result)

    def frame_sent(self, result: FrameResult, now: float) -> None:
        """An encoder took this frame: only now may it be charged (metering.is_charged), and only by
        the first encoder that takes it (the publisher's or a viewer's: the frame was made once)."""
        if result.arrived <= self._last_sent_arrival:
            return
        self._last_sent_arrival = result.arrived
        self.stats.frame_out(result.arrived, now)
        if is_charged(result):
            self.stats.frames_charged += 1
            if self.meter is not None:
                self.meter.charge(result.frame.width, result.frame.height)

    def _output_replaced(self) -> None:
        self.stats.frames_dropped += 1

    def _audio_delay_s(self) -> float:
        """How long the audio waits to leave with the video captured with it."""
        latency_s, encode_s = self.stats.latency_s(), self.video_out.encode_s()
        if latency_s is None:  # no video sent yet: nothing to be in sync with
            return 0.0
        # Both kinds leave the receiver as they arrive (receiver_tuning.py): the audio waits for
        # exactly the video's time in the server. Measured: tests/e2e/test_av_sync.py.
        return latency_s + (encode_s or 0.0)

    # -- the meter and the client's commands -----------------------------------------------
    def _set_fps_cap(self, fps_cap: float | None) -> None:
        """The meter's level changed: the scheduler's cap follows."""
        self._meter_fps_cap = fps_cap
        if self._in_runner and not self._close_started:
            self._apply_fps_cap()

    def _fps_cap(self) -> float | None:
        """The lower of the meter's cap and a shed rate's (a share of the target rate)."""
        shed_cap = self._settings.target_fps * SHED_RATE_SHARE if self.shed_step >= RATE else None
        caps = [cap for cap in (self._meter_fps_cap, shed_cap) if cap is not None]
        return min(caps, default=None)

    def _apply_fps_cap(self) -> None:
        self._runner.set_fps_cap(self.id, self._fps_cap())

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        self.channel.attach(channel)
        if self.meter is not None:  # the level may have been set before the channel opened
            self.send_event(self.meter.event())
        if self.place is not None:  # likewise its place in line
            self.send_event(self.place)

    def set_swap(
        self, mode: object, reference_face_id: object = None, reference_threshold: object = None
    ) -> dict[str, object]:
        """Changes which faces are swapped mid-stream, by the offer's rules (a reference photo and
        its threshold only with mode 'reference'); returns the new {"swap", "reference_face_id"?,
        "reference_threshold"?}. InvalidSwapOptions, FaceNotFound, FaceForbidden, before anything changes."""
        swap: dict[str, object] = {"swap": mode, "reference_face_id": reference_face_id}
        if reference_threshold is not None:
            swap["reference_threshold"] = reference_threshold
        swap = checked_swap_options(swap, self._faces, self.account_id)
        self.options = {**{key: value for key, value in self.options.items() if key not in SWAP_KEYS}, **swap}
        if self._in_runner and not self._close_started:
            self._runner.set_options(self.id, self._chain_options())
        return swap

    def set_face(self, face_id: str | None) -> None:
        """Switches the source face mid-stream (None: no swap); FaceNotFound / FaceForbidden."""
        if face_id is not None:
            self._faces.get(face_id, self.account_id)
        self.face_id = face_id
        if self._in_runner and not self._close_started:
            self._runner.set_options(self.id, self._chain_options())

    def _video_too_large(self, why: str) -> None:
        """The peer's video declared frames over the decode limit (or a size that cannot be read):
        refused undecoded (decode_size_limit.py); the client is told why, then the session ends."""
        self._spawn(self._refuse_video(why), "refuse")

    async def _refuse_video(self, why: str) -> None:
        message = f"{why}; this server decodes at most {self._settings.max_decoded_pixels:,} pixels a frame"
        self.stats.last_error = message
        # The first keyframe can come before the client's data channel is open, and closing at once
        # drops a sent event with the connection: wait (a little) for the channel, then for the send.
        deadline = time.monotonic() + REFUSAL_NOTICE_S
        await self.channel.wait_open(REFUSAL_NOTICE_S)
        await self.channel.tell(error_event("video_too_large", message), deadline - time.monotonic())
        await self.close(f"refused before decoding: {why}", "video_too_large")

    async def refresh_webrtc_counts(self) -> None:
        await self.webrtc.refresh(self._pc)

    def send_event(self, event: Mapping[str, Any]) -> None:
        """Sends a JSON event to the client if its data channel is open (events are best effort)."""
        self.channel.send(event)

    def snapshot(self) -> dict[str, object]:
        meter_event = self.meter.event() if self.meter is not None else None
        return {
            "session_id": self.id,
            "state": self.state,
            "account_id": self.account_id,
            "face_id": self.face_id,
            "stream": self.stream,
            "options": dict(self.options),  # which faces to swap: as offered, or as set since
            "created_at": self.created_at,
            "close_reason": self.close_reason,
            **self.stats.as_dict(),
            "meter": meter_event,
            # the fanout's tracks besides the publisher's own return video: one a WHEP viewer
            "viewers": len(self.video_out) - (self._output in self.video_out),
            "network": self.network.as_dict(),
            "throttle": throttle(meter_event) if meter_event is not None else None,
            "capacity": {
                "queued": self.queued,
                "position": self.place["position"] if self.place is not None else None,
                "estimated_wait_s": self.place["estimated_wait_s"] if self.place is not None else None,
                "shed_step": STEPS[self.shed_step],
            },
        }

    # -- supervision -------------------------------------------------------------------
    def _on_connection_state(self) -> None:
        if self._pc.connectionState in ("failed", "closed"):
            self._close_soon(f"connection {self._pc.connectionState}", "connection_lost")

    async def _watch(self) -> None:
        """Ends the session when the peer goes quiet: no frame within the idle timeout."""
        timeout = self._settings.idle_timeout_s
        while True:
            silent = time.monotonic() - self._last_frame_at
            if silent >= timeout:
                await self.close(f"no video for {timeout:g} s", "idle")
                return
            await asyncio.sleep(min(1.0, timeout - silent))

    async def _send_stats(self) -> None:
        while True:
            await asyncio.sleep(self._settings.stats_interval_s)
            await self._sample_network()
            self.send_event({"type": "stats", **self.snapshot()})

    async def _sample_network(self) -> None:
        try:
            report = await self._pc.getStats()
        except Exception as exc:  # a transport torn down under it: the figures wait for the next second
            logger.debug("session %s: getStats failed: %s", self.id, exc)
            return
        self.network.add(report, time.monotonic())

    def _close_soon(self, reason: str, code: str) -> None:
        """Closes the session from a callback that cannot wait for it."""
        self._spawn(self.close(reason, code), "close")

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        if self._close_started and name != "close":
            coro.close()  # type: ignore[attr-defined]
            return
        task = asyncio.ensure_future(coro)
        task.set_name(f"session-{self.id}-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- teardown -----------------------------------------------------------------------
    async def close(self, reason: str, code: str) -> None:
        """Idempotent: tells the client why (a "closed" event), then frees the runner slot, tasks,
        tracks, the lease and the peer connection. Each step runs whatever the one before did, and
        the session ends even if closing is cancelled: a second close() waits for `_closed`."""
        if self._close_started:
            await self._closed.wait()
            return
        self._close_started = True
        self.state = "closing"  # listed so until the lease is back and the peer closed
        self.close_reason = reason
        logger.info("session %s closing: %s", self.id, reason)
        closing_task = asyncio.current_task()
        steps: tuple[tuple[str, Callable[[], Awaitable[None]], float], ...] = (
            ("stop its work", lambda: self._stop_work(closing_task), STOP_WORK_LIMIT_S),
            (
                "tell the client",
                lambda: self.channel.tell(closed_event(code, reason), CLOSED_NOTICE_S),
                TELL_CLIENT_LIMIT_S,
            ),
            ("return its lease", self._return_lease, RETURN_LEASE_LIMIT_S),
            ("close its peer connection", self._close_peer_connection, CLOSE_PEER_LIMIT_S),
        )
        try:
            for name, step, limit_s in steps:
                try:
                    if not await finished_within(step(), limit_s):
                        logger.error(
                            "session %s: closing could not %s within %g s; left behind", self.id, name, limit_s
                        )
                except Exception:
                    logger.exception("session %s: closing could not %s", self.id, name)
        finally:
            self.state = "closed"
            self._closed.set()
            if self._on_closed is not None:
                with contextlib.suppress(Exception):
                    result = self._on_closed(self)
                    if result is not None:
                        await result

    async def _stop_work(self, closing_task: asyncio.Task[object] | None) -> None:
        self._runner.remove_session(self.id)
        tasks = [task for task in self._tasks if task is not closing_task]
        for task in tasks:  # before any await: the pump must not hand the runner frames of a session it forgot
            task.cancel()
        self.video_out.stop()  # the publisher's and the viewers' tracks: their senders end
        self._output.stop()
        self.audio.stop()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _return_lease(self) -> None:
        if self.meter is not None:
            await self.meter.close()

    async def _close_peer_connection(self) -> None:
        # A peer connection closed mid-negotiation leaks the UDP sockets its ICE gathering is still
        # opening; the negotiation sees the close at its next step and stops there.
        await finished_within(self._negotiated.wait(), PEER_CLOSE_TIMEOUT_S)
        await self.refresh_webrtc_counts()  # the last figures, before the node's totals take them
        if not await close_peer(self._pc):
            logger.warning("session %s: its peer connection did not close in time; left behind", self.id)
