"""`facefuse cam`'s main: opens the camera and the outputs, chooses the face, publishes over WHIP,
plays the swapped video back over WHEP into the outputs, shows the status once a second, and on
Ctrl-C, the preview window's closing, or the server ending the session, DELETEs both sessions
before it returns. When only the WHEP connection drops while the published session is live, it
plays the stream again (a streamer expects the picture back, not the run ended).

Everything that can be refused locally (the input, pyvirtualcam, the loopback device, the output
file) is opened before the first request, so such a failure costs the account nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, urlencode, urlsplit

import aiohttp

from client.cam.camera_input import CameraTrack, input_spec
from client.cam.errors import CamError, ServerRefusal
from client.cam.file_output import FileOutput
from client.cam.output_pump import Output, OutputPump
from client.cam.peers import PlayingPeer, PublishingPeer, ice_for
from client.cam.preview_window import PreviewWindow
from client.cam.server_api import api_request, face_to_swap_to, session_description
from client.cam.status_line import StatusLine, status_text
from client.cam.viewer_track import ViewerTrack
from client.cam.virtual_camera import VirtualCamera
from client.cam.whip_http import SdpAnswer, delete_resource, post_offer
from stream.peer_close import close_peer

logger = logging.getLogger(__name__)

STATUS_EVERY_S = 1.0
# How long to wait for the published stream to play: the server answers 409 stream_not_live until
# the camera's session is up (a second or two; a slow link or a loaded server, more).
PLAY_WITHIN_S = 30.0
# Each request of the way out is bounded: Ctrl-C must end the command even with the server gone.
GOODBYE_TIMEOUT_S = 5.0
# When the played video ends, how long the server's `closed` event (which says why) may take after it.
CLOSED_EVENT_WAIT_S = 1.0
# Playing again after the WHEP connection alone dropped: the first POST this long after, each failed
# one doubling the wait up to the most, so a server that refuses for a while is not hammered.
REPLAY_FIRST_S = 0.5
REPLAY_MOST_S = 4.0
# What the server's `closed` codes mean for someone running the command.
ENDED_BECAUSE = {
    "tokens_exhausted": "the account's tokens ran out and the server ended the session: top it up, then start again",
    "quota_store_unavailable": "the server lost its quota store and ended the session; try again later",
    "replaced": "another publisher took over the stream name {stream}; give this one another --stream",
    "idle": "the server received no video for its idle timeout and ended the session",
    "server_shutdown": "the server shut down",
    "video_too_large": "the server refused the camera's frame size; ask for a smaller one with --size",
}


@dataclass(frozen=True)
class CamOptions:
    server: str
    face: str
    token: str | None = None
    input: str | None = None  # None: the system's first camera
    stream: str = "cam"
    virtual_camera: bool = False
    camera_backend: str | None = None
    camera_device: str | None = None
    output: Path | None = None
    preview: bool = False  # a window showing what goes to the outputs
    size: str = "640x480"  # asked of a camera device
    fps: float = 30.0
    ice_servers: tuple[str, ...] = ()
    play_within_s: float = PLAY_WITHIN_S


@dataclass
class _Running:
    """What one run holds, for the way out."""

    outputs: list[Output] = field(default_factory=list)
    camera: CameraTrack | None = None
    publisher: PublishingPeer | None = None
    player: PlayingPeer | None = None  # None while the stream is played again
    viewer: ViewerTrack = field(default_factory=ViewerTrack)  # what the pump reads, across WHEP connections
    pump: OutputPump | None = None
    published: SdpAnswer | None = None
    played: SdpAnswer | None = None
    uploaded_face: str | None = None
    replay_at: float | None = None  # while the WHEP connection is down: when to POST again
    replay_wait_s: float = REPLAY_FIRST_S


async def run_cam(options: CamOptions, *, stop: asyncio.Event | None = None, out: TextIO = sys.stderr) -> int:
    """Runs until `stop` is set (SIGINT and SIGTERM set it) or the session ends: 0 when stopped,
    1 when the server ended the session (said on `out`). A failure raises CamError."""
    if not options.virtual_camera and options.output is None and not options.preview:
        raise CamError(
            "nothing to write the swapped video to: give --virtual-camera and/or --output FILE (or --preview to watch it)"
        )
    stop = stop or asyncio.Event()
    server = options.server.rstrip("/")
    running = _Running()
    status = StatusLine(out)
    with _stopped_by_signals(stop):
        async with aiohttp.ClientSession() as http:
            try:
                _open_locally(options, running, stop)
                face_id, uploaded = await face_to_swap_to(http, server, options.face, token=options.token)
                running.uploaded_face = face_id if uploaded else None
                await _publish(http, server, face_id, options, running)
                await _play(http, server, options, running, stop)
                if stop.is_set():
                    return 0
                status.say(_started_text(options, running))
                ended = await _watch(http, server, options, running, status, stop)
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise CamError(f"no answer from {server}: {exc or type(exc).__name__}") from None
            finally:
                status.end()
                await _goodbye(http, server, options, running)
    if ended is not None:
        out.write(f"facefuse cam: {ended}\n")
        return 1
    return 0


def _open_locally(options: CamOptions, running: _Running, stop: asyncio.Event) -> None:
    running.camera = camera = CameraTrack(input_spec(options.input, size=options.size, fps=options.fps))
    if options.virtual_camera:
        running.outputs.append(
            VirtualCamera(
                camera.width,
                camera.height,
                options.fps,
                backend=options.camera_backend,
                device=options.camera_device,
            )
        )
    if options.output is not None:
        running.outputs.append(FileOutput(options.output, camera.width, camera.height, options.fps))
    if options.preview:
        loop = asyncio.get_running_loop()

        def stop_soon() -> None:  # called from the window's thread; the loop may have ended meanwhile
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)

        title = f"facefuse cam \N{EM DASH} {options.stream}"
        running.outputs.append(PreviewWindow(title, camera.width, camera.height, on_close=stop_soon))


async def _publish(
    http: aiohttp.ClientSession, server: str, face_id: str, options: CamOptions, running: _Running
) -> None:
    assert running.camera is not None
    running.publisher = publisher = PublishingPeer(running.camera, ice_for(server, options.ice_servers))
    sdp = await publisher.offer()
    url = f"{server}/whip/{quote(options.stream, safe='')}?{urlencode({'face_id': face_id})}"
    running.published = await post_offer(http, url, sdp, token=options.token)
    await publisher.answer(running.published.sdp)


async def _play(
    http: aiohttp.ClientSession, server: str, options: CamOptions, running: _Running, stop: asyncio.Event
) -> None:
    """Plays the stream over WHEP, asking again while the server says it is not live yet."""
    running.player = player = PlayingPeer(ice_for(server, options.ice_servers))
    sdp = await player.offer()
    deadline = time.monotonic() + options.play_within_s
    while True:
        try:
            await _post_player(http, server, options, running, player, sdp)
            break
        except ServerRefusal as refused:
            if refused.status != 409 or time.monotonic() >= deadline:
                raise
            retry_after_s = refused.retry_after_s or 1.0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(retry_after_s):
                await stop.wait()
        if stop.is_set():
            return
    running.pump = OutputPump(running.viewer, running.outputs)


async def _post_player(
    http: aiohttp.ClientSession, server: str, options: CamOptions, running: _Running, player: PlayingPeer, sdp: str
) -> None:
    """One WHEP POST of `player`'s offer; once answered, the outputs play from it."""
    running.played = await post_offer(http, f"{server}/whep/{quote(options.stream, safe='')}", sdp, token=options.token)
    await player.answer(running.played.sdp)
    assert player.track is not None
    running.viewer.play_from(player.track)


def _started_text(options: CamOptions, running: _Running) -> str:
    where = [f"the virtual camera {output.device}" for output in running.outputs if isinstance(output, VirtualCamera)]
    where += [str(output.path) for output in running.outputs if isinstance(output, FileOutput)]
    where += ["a preview window" for output in running.outputs if isinstance(output, PreviewWindow)]
    return f"streaming {options.input or 'the camera'} as {options.stream!r}; the swapped video goes to {' and '.join(where)}"


async def _watch(
    http: aiohttp.ClientSession,
    server: str,
    options: CamOptions,
    running: _Running,
    status: StatusLine,
    stop: asyncio.Event,
) -> str | None:
    """Until `stop` or the session's end; what ended it, for the user (None: stopped)."""
    assert running.published is not None and running.pump is not None and running.publisher is not None
    session_id = running.published.headers.get("X-Facefuse-Session")
    api_base = _origin(running.published.url)  # the session lives on the server that answered the POST
    while not stop.is_set():
        described: dict[str, Any] | None = None
        if session_id is not None:
            try:
                described = await session_description(http, api_base, session_id, token=options.token)
            except (ServerRefusal, aiohttp.ClientError, TimeoutError) as exc:
                logger.debug("the session's description could not be read: %s", exc)
                described = {}
            if described is None or described.get("state") in ("closing", "closed"):
                # the `closed` event, which says why as a code, may come just after the state says closed
                await _wait_for(running.publisher.closed_event, CLOSED_EVENT_WAIT_S)
                return _why_ended(options, running, described)
        dropped = running.replay_at is None and _viewer_dropped(running)
        if (dropped or running.pump.ended.is_set()) and running.publisher.closed_event() is None:
            # the viewer's connection and the session's `closed` event race: give the event a moment
            await _wait_for(running.publisher.closed_event, CLOSED_EVENT_WAIT_S)
        ended = _ended_here(options, running)
        if ended is not None:
            return ended
        if dropped or running.replay_at is not None:
            ended = await _play_again(http, server, options, running, status)
            if ended is not None:
                return ended
        text = status_text(described or None, running.pump.fps())
        wait_s = STATUS_EVERY_S
        if running.replay_at is not None:
            replay_in_s = max(running.replay_at - time.monotonic(), 0.0)
            wait_s = min(wait_s, replay_in_s)
            text = f"the video's connection dropped, playing again in {replay_in_s:.1f} s | {text}"
        status.show(text)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await stop.wait()
    return None


def _viewer_dropped(running: _Running) -> bool:
    """The WHEP connection ended (the server closed the viewer) or failed."""
    player = running.player
    return running.viewer.source_ended.is_set() or player is None or player.pc.connectionState in ("failed", "closed")


async def _play_again(
    http: aiohttp.ClientSession, server: str, options: CamOptions, running: _Running, status: StatusLine
) -> str | None:
    """The WHEP connection dropped while the published session is live: the old viewer is DELETEd
    and the stream POSTed again, waiting REPLAY_FIRST_S, doubling after each failure up to
    REPLAY_MOST_S. What ended the run, if playing again showed that the session is over."""
    assert running.published is not None
    if running.replay_at is None:  # the drop is new
        status.say(f"the swapped video's connection (WHEP) dropped while {options.stream!r} is live; playing it again")
        if running.viewer.frames_from_source > 0:  # that connection played: a fresh drop, not one failing again
            running.replay_wait_s = REPLAY_FIRST_S
        await _drop_player(http, options, running)
        running.replay_at = time.monotonic() + running.replay_wait_s
        return None
    if time.monotonic() < running.replay_at:
        return None
    running.player = player = PlayingPeer(ice_for(server, options.ice_servers))
    try:
        await _post_player(http, server, options, running, player, await player.offer())
    except (CamError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        await _drop_player(http, options, running)
        if isinstance(exc, ServerRefusal) and exc.status == 409:
            return _why_ended(options, running, None)  # stream_not_live: nothing is published under the name
        logger.info("playing again failed: %s", exc or type(exc).__name__)
    else:
        running.replay_at = None
        publisher_session = running.published.headers.get("X-Facefuse-Session")
        played_session = running.played.headers.get("X-Facefuse-Session") if running.played else None
        if publisher_session and played_session and played_session != publisher_session:
            return ENDED_BECAUSE["replaced"].format(stream=options.stream)  # the name plays another session now
        status.say(f"playing {options.stream!r} again")
        return None
    running.replay_wait_s = min(running.replay_wait_s * 2, REPLAY_MOST_S)
    running.replay_at = time.monotonic() + running.replay_wait_s
    return None


async def _drop_player(http: aiohttp.ClientSession, options: CamOptions, running: _Running) -> None:
    """Ends the dropped viewer on the server (it may be gone already: errors are ignored) and here."""
    played, player = running.played, running.player
    running.played = running.player = None
    if played is not None:
        with contextlib.suppress(CamError, aiohttp.ClientError, OSError, TimeoutError):
            async with asyncio.timeout(GOODBYE_TIMEOUT_S):
                await delete_resource(http, played.resource_url, token=options.token)
    if player is not None:
        await _bounded(close_peer(player.pc), "closing the dropped viewer's connection")


async def _wait_for(condition: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def _ended_here(options: CamOptions, running: _Running) -> str | None:
    """An end seen on this side: the camera stopped, an output failed, a connection went down."""
    assert running.camera is not None and running.pump is not None and running.publisher is not None
    if running.camera.failure is not None:
        return running.camera.failure
    if running.pump.failure is not None:
        return running.pump.failure
    if running.publisher.closed_event() is not None or running.pump.ended.is_set():
        return _why_ended(options, running, None)
    if running.publisher.pc.connectionState in ("failed", "closed"):
        return "the connection to the server was lost"
    return None


def _why_ended(options: CamOptions, running: _Running, described: dict[str, Any] | None) -> str:
    assert running.publisher is not None
    event = running.publisher.closed_event() or {}
    code = event.get("code") or (described or {}).get("close_reason")
    if code in ENDED_BECAUSE:
        return ENDED_BECAUSE[code].format(stream=options.stream)
    reason = event.get("reason") or (described or {}).get("close_reason")
    return f"the server ended the session ({code or 'no reason given'}{': ' + reason if reason and reason != code else ''})"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def _goodbye(http: aiohttp.ClientSession, server: str, options: CamOptions, running: _Running) -> None:
    """Ends both sessions on the server, then everything here; each step bounded, none skipped
    because an earlier one failed."""
    for answer in (running.played, running.published):  # the viewer first: it plays the publisher's video
        if answer is not None:
            await _bounded(
                delete_resource(http, answer.resource_url, token=options.token), "DELETE " + answer.resource_url
            )
    if running.uploaded_face is not None:  # the library is bounded: a face uploaded for this run goes with it
        await _bounded(
            api_request(http, "DELETE", f"{server}/api/faces/{running.uploaded_face}", token=options.token),
            "deleting the uploaded face",
        )
    for peer in (running.player, running.publisher):
        if peer is not None:
            await _bounded(close_peer(peer.pc), "closing a peer connection")
    if running.pump is not None:
        await running.pump.close()  # closes the outputs
    else:
        for output in running.outputs:
            output.close()
    if running.camera is not None:
        running.camera.stop()
        await asyncio.to_thread(running.camera.join, GOODBYE_TIMEOUT_S)


async def _bounded(awaitable: Any, what: str) -> None:
    try:
        async with asyncio.timeout(GOODBYE_TIMEOUT_S):
            await awaitable
    except (CamError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        logger.warning("%s failed: %s", what, exc)


@contextlib.contextmanager
def _stopped_by_signals(stop: asyncio.Event):
    """SIGINT (Ctrl-C) and SIGTERM set `stop`, so the way out runs in order. Where the loop cannot
    take signal handlers (Windows), Ctrl-C cancels the run and the same way out runs."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
