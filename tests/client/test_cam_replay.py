"""`facefuse cam` when only its WHEP viewer drops while the published (WHIP) session is live: it
DELETEs the old viewer and POSTs /whep again, backing off 0.5 s doubling to 4 s while refused,
and the frames reach the outputs again; the run goes on until stopped."""

from __future__ import annotations

import asyncio
import io
import logging
import time

import aiohttp
import numpy as np
import pytest
import pyvirtualcam

from client.cam.run import REPLAY_FIRST_S, REPLAY_MOST_S, CamOptions, run_cam
from signaling.app_keys import SESSIONS
from support.face_clip import face_clip
from support.server import face_path, loopback_settings, running_server, wait_until
from support.whep_viewer import whep_viewer

COUNTER = "facefuse-test-counter"


class CountingCamera:
    """A pyvirtualcam backend (registered through its public register_backend) that notes when each
    frame reached it."""

    opened: list[CountingCamera] = []

    def __init__(self, *, width: int, height: int, fps: float, fourcc: int, device: str | None, **kw) -> None:
        self.arrivals: list[float] = []
        CountingCamera.opened.append(self)

    def send(self, frame: np.ndarray) -> None:
        self.arrivals.append(time.monotonic())

    def close(self) -> None:
        pass

    def device(self) -> str:
        return "counter"

    def native_fourcc(self) -> int | None:
        return None


@pytest.fixture
def counter():
    CountingCamera.opened = []
    pyvirtualcam.register_backend(COUNTER, CountingCamera)
    try:
        yield CountingCamera.opened
    finally:
        pyvirtualcam.camera.BACKENDS.pop(COUNTER, None)


async def test_the_video_plays_again_when_only_the_whep_viewer_is_closed(tmp_path, counter):
    """The server ends the cam's WHEP viewer (DELETE with the API) while its WHIP session goes on: the
    cam posts /whep again and the frames reach the outputs again; the run goes on until stopped."""
    video = face_clip(tmp_path / "obama.mkv")
    said = io.StringIO()
    async with running_server(loopback_settings()) as (url, app):
        stop = asyncio.Event()
        options = CamOptions(
            server=url,
            face=str(face_path("biden.jpg")),
            input=str(video),
            stream="desk",
            virtual_camera=True,
            camera_backend=COUNTER,
        )
        run = asyncio.ensure_future(run_cam(options, stop=stop, out=said))
        try:
            await wait_until(lambda: run.done() or (counter and len(counter[0].arrivals) >= 10), timeout=60)
            assert not run.done(), run.result()
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{url}/api/streams") as response:
                    (stream,) = (await response.json())["streams"]
                (first,) = stream["viewers"]
                async with http.delete(f"{url}/whep/desk/{first['viewer_id']}") as response:
                    assert response.status == 200, await response.text()
            session = app[SESSIONS].all()[0]

            def playing_again() -> bool:
                viewers = app[SESSIONS].viewers()
                return bool(viewers) and viewers[0].id != first["viewer_id"]

            await wait_until(lambda: run.done() or playing_again(), timeout=60)
            assert not run.done(), f"the run ended: {run.result()}; said: {said.getvalue()}"
            replayed_at = time.monotonic()  # the old connection was closed before the new one was made
            await wait_until(lambda: run.done() or _arrived_after(counter[0], replayed_at) >= 15, timeout=60)
            assert not run.done(), f"the run ended: {run.result()}; said: {said.getvalue()}"
            assert app[SESSIONS].all() == [session], "the published session went on"
        finally:
            stop.set()
            assert await asyncio.wait_for(run, 30) == 0
        assert app[SESSIONS].all() == [] and app[SESSIONS].viewers() == []
    assert "dropped while 'desk' is live; playing it again" in said.getvalue(), said.getvalue()
    assert "playing 'desk' again" in said.getvalue(), said.getvalue()


def _arrived_after(camera: CountingCamera, moment: float) -> int:
    return sum(1 for arrived in camera.arrivals if arrived > moment)


async def test_while_refused_it_asks_again_backing_off_then_plays(tmp_path, counter, caplog):
    """One viewer a stream (max_viewers_per_stream=1): once the cam's viewer is closed, another player
    takes the only place and the cam's POSTs are refused (503 too_many_viewers) until it leaves.
    The cam asks again after 0.5 s, then waits 1 s, 2 s, 4 s, 4 s: the gaps' lower bounds hold on any
    machine (a slow one only lengthens them); the cap's upper bound leaves 4 s of margin."""
    caplog.set_level(logging.INFO, logger="client.cam.run")
    video = face_clip(tmp_path / "obama.mkv")
    said = io.StringIO()
    async with running_server(loopback_settings(stream={"max_viewers_per_stream": 1})) as (url, app):
        stop = asyncio.Event()
        options = CamOptions(
            server=url,
            face=str(face_path("biden.jpg")),
            input=str(video),
            stream="desk",
            virtual_camera=True,
            camera_backend=COUNTER,
        )
        run = asyncio.ensure_future(run_cam(options, stop=stop, out=said))

        def refusals() -> list[float]:
            return [r.created for r in caplog.records if r.getMessage().startswith("playing again failed")]

        try:
            await wait_until(lambda: run.done() or (counter and len(counter[0].arrivals) >= 10), timeout=60)
            assert not run.done(), run.result()
            async with aiohttp.ClientSession() as http:
                (first,) = app[SESSIONS].viewers()
                async with http.delete(f"{url}/whep/desk/{first.id}") as response:
                    assert response.status == 200, await response.text()
                async with whep_viewer(http, f"{url}/whep/desk", audio=False) as other:
                    assert other.status == 201, other.body
                    await wait_until(lambda: run.done() or len(refusals()) >= 5, timeout=60)
                    assert not run.done(), f"the run ended: {run.result()}; said: {said.getvalue()}"
                    refused_at = refusals()
            await wait_until(lambda: run.done() or app[SESSIONS].viewers(), timeout=30)
            assert not run.done(), f"the run ended: {run.result()}; said: {said.getvalue()}"
            replayed_at = time.monotonic()
            await wait_until(lambda: run.done() or _arrived_after(counter[0], replayed_at) >= 15, timeout=60)
            assert not run.done(), f"the run ended: {run.result()}; said: {said.getvalue()}"
        finally:
            stop.set()
            assert await asyncio.wait_for(run, 30) == 0
        assert app[SESSIONS].all() == [] and app[SESSIONS].viewers() == []
    said_refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("playing again failed")]
    assert all("503 too_many_viewers" in message for message in said_refused), said_refused
    gaps = np.diff(refused_at[:5])
    print("waits between refused POSTs:", ", ".join(f"{gap:.2f} s" for gap in gaps))
    assert gaps[0] >= 2 * REPLAY_FIRST_S and gaps[1] >= 4 * REPLAY_FIRST_S, "each refusal doubles the wait"
    assert gaps[2] >= REPLAY_MOST_S and REPLAY_MOST_S <= gaps[3] < 2 * REPLAY_MOST_S, "up to REPLAY_MOST_S"
