"""`facefuse cam --preview` on a real X display (Xvfb): the window, titled with the stream, shows
the video the server processed, and closing it (the close button's WM_DELETE_WINDOW) ends the run
as Ctrl-C does; without a display the flag is one line before anything reaches the server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import av
import numpy as np
import pytest

from client.cam.preview_window import PreviewWindow
from signaling.app_keys import FACES, SESSIONS
from support.face_clip import face_clip, face_picture
from support.server import REPO_ROOT, face_path, loopback_settings, running_server, wait_until
from support.x_display import close_like_a_window_manager, grab, missing_tools, windows_titled, xvfb

TITLE = "facefuse cam \N{EM DASH} desk"


@pytest.fixture
def x_display():
    if missing_tools():
        pytest.fail(f"missing {', '.join(missing_tools())}: apt-get install xvfb x11-utils x11-apps (tests/run.sh)")
    with xvfb() as display:
        yield display


def cam_command(url: str, video: Path, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "signaling.cli",
        "cam",
        "--server",
        url,
        "--input",
        str(video),
        "--stream",
        "desk",
    ] + [
        "--face",
        str(face_path("biden.jpg")),
        *flags,
    ]


def mean_difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


async def test_the_preview_shows_the_processed_video_and_closing_it_ends_the_run(tmp_path, x_display):
    """The server runs the `invert` chain: the window must show the inverted face, which only the
    server's processing makes, not the camera's picture."""
    video = face_clip(tmp_path / "obama.mkv")
    source = face_picture()
    async with running_server(loopback_settings("invert")) as (url, app):
        command = cam_command(url, video, "--output", str(tmp_path / "out.mkv"), "--preview")
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=REPO_ROOT,
            env={**os.environ, "DISPLAY": x_display},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            await wait_until(lambda: process.returncode is not None or app[SESSIONS].viewers(), timeout=60)
            assert process.returncode is None, (await process.communicate())[1].decode()
            session, viewer = app[SESSIONS].all()[0], app[SESSIONS].viewers()[0]
            await wait_until(lambda: viewer.frames_sent >= 15, timeout=30)
            (window,) = await asyncio.to_thread(windows_titled, x_display, TITLE)
            shown = await _shown_when(lambda picture: picture.shape == source.shape, x_display, window)
            assert shown.shape == source.shape, shown.shape
            shown = await _shown_when(
                lambda picture: mean_difference(picture, 255 - source) < mean_difference(picture, source) / 3,
                x_display,
                window,
            )
            to_processed, to_camera = mean_difference(shown, 255 - source), mean_difference(shown, source)
            print(f"preview: mean difference {to_processed:.1f} to the inverted face, {to_camera:.1f} to the camera's")
            assert to_processed < to_camera / 3, "the window shows the server's processed video"

            close_like_a_window_manager(x_display, window)
            _, stderr = await asyncio.wait_for(process.communicate(), 30)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert process.returncode == 0, stderr.decode()
        assert "a preview window" in stderr.decode() and "Traceback" not in stderr.decode(), stderr.decode()
        assert session.close_reason == "ended by its WHIP client", session.close_reason
        assert viewer.close_reason == "ended by its WHEP client", viewer.close_reason
        assert app[SESSIONS].all() == [] and app[SESSIONS].viewers() == []
    assert windows_titled(x_display, TITLE) == []


async def _shown_when(holds, display: str, window: int, timeout: float = 30) -> np.ndarray:
    """The window's picture once `holds(picture)`, or the last one grabbed after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        picture = await asyncio.to_thread(grab, display, window)
        if holds(picture) or time.monotonic() > deadline:
            return picture
        await asyncio.sleep(0.2)


def test_the_window_skips_the_frames_it_has_no_time_for_and_shows_the_newest(x_display, monkeypatch):
    """Frames handed over faster than the window shows them replace one another: none waits in a
    queue (the pipeline is never held back), and the newest is what the window shows."""
    monkeypatch.setenv("DISPLAY", x_display)
    closed: list[bool] = []
    window = PreviewWindow("facefuse cam \N{EM DASH} shades", 320, 240, on_close=lambda: closed.append(True))
    try:
        handed = 200
        for shade in range(handed):  # back to back, as a pipeline faster than the window would
            window.write(av.VideoFrame.from_ndarray(np.full((240, 320, 3), (shade, 255 - shade, 0), np.uint8)))
        (shown_in,) = windows_titled(x_display, "facefuse cam \N{EM DASH} shades")
        newest = np.array([handed - 1, 256 - handed, 0])
        deadline = time.monotonic() + 30
        while not np.array_equal(grab(x_display, shown_in)[120, 160], newest) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert np.array_equal(grab(x_display, shown_in)[120, 160], newest), "the newest frame is shown"
        assert 1 <= window.frames_shown < handed, window.frames_shown
    finally:
        window.close()
    assert closed == [], "close() is the run's, not the user's: it does not end the run again"
    assert windows_titled(x_display, "facefuse cam \N{EM DASH} shades") == []


@pytest.mark.parametrize("display", [None, "unreachable"])
async def test_preview_without_a_display_is_one_line_before_anything_reaches_the_server(tmp_path, display):
    """No DISPLAY (nor WAYLAND_DISPLAY), or one Tk cannot open: exit 1 with one line, and the server
    never hears of the run: no face uploaded, no session. The window is an output of its own: with
    no other output given, the line is about the display, not about having nothing to write to."""
    video = face_clip(tmp_path / "obama.mkv", seconds=0.5)
    env = {name: value for name, value in os.environ.items() if name not in ("DISPLAY", "WAYLAND_DISPLAY")}
    if display == "unreachable":
        env["DISPLAY"] = f":{_display_number_nobody_serves()}"
    async with running_server(loopback_settings()) as (url, app):
        command = cam_command(url, video, "--preview")
        process = await asyncio.create_subprocess_exec(
            *command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
        lines = stderr.decode().strip().splitlines()
        assert process.returncode == 1, stderr.decode()
        if display is None:
            expected = "facefuse cam: --preview needs a desktop: neither DISPLAY nor WAYLAND_DISPLAY is set"
        else:
            expected = f"facefuse cam: --preview cannot open a window on the display {env['DISPLAY']}: "
        assert len(lines) == 1 and lines[0].startswith(expected), stderr.decode()
        assert app[SESSIONS].all() == [] and len(app[FACES]) == 0
        async with aiohttp.ClientSession() as http, http.get(f"{url}/api/sessions") as response:
            assert (await response.json())["sessions"] == []


def _display_number_nobody_serves() -> int:
    for number in range(90, 200):
        if not os.path.exists(f"/tmp/.X11-unix/X{number}") and not os.path.exists(f"/tmp/.X{number}-lock"):
            return number
    raise AssertionError("every display number from 90 to 199 is taken")
