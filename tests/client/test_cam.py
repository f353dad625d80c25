"""`facefuse cam` against a real server: a video file of a real face published over WHIP, the
swapped video played over WHEP into a pyvirtualcam camera (a recording backend registered through
pyvirtualcam's public register_backend) and a file; Ctrl-C DELETEs both sessions; each failure a
user can meet is one line that says what to do."""

from __future__ import annotations

import asyncio
import glob
import io
import os
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path

import aiohttp
import av
import numpy as np
import pytest
import pyvirtualcam

from client.cam.camera_input import CameraTrack, input_spec
from client.cam.errors import CamError
from client.cam.run import CamOptions, run_cam
from client.cam.status_line import status_text
from client.cam.virtual_camera import LOOPBACK_HINT, VirtualCamera
from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from signaling.app_keys import FACES, SESSIONS
from support.face_clip import face_clip
from support.face_identity import similarity
from support.metering import ADMIN, create_account, metered_settings
from support.server import REPO_ROOT, face_path, face_rgb, free_port, loopback_settings, running_server, wait_until
from support.whip_publisher import offer_like_obs, post_offer

RECORDER = "facefuse-test-recorder"


class RecordingCamera:
    """A pyvirtualcam backend that keeps the last frames it was sent, as RGB pictures."""

    def __init__(self, *, width: int, height: int, fps: float, fourcc: int, device: str | None, **kw) -> None:
        self.width, self.height = width, height
        self._device = device or "recorder"
        self.frames: deque[np.ndarray] = deque(maxlen=30)
        self.closed = False
        RecordingCamera.opened.append(self)

    opened: list[RecordingCamera] = []

    def send(self, frame: np.ndarray) -> None:
        self.frames.append(frame.reshape(self.height, self.width, 3).copy())

    def close(self) -> None:
        self.closed = True

    def device(self) -> str:
        return self._device

    def native_fourcc(self) -> int | None:
        return None


@pytest.fixture
def recorder():
    """The recording backend, registered for one test; yields the cameras it opened."""
    RecordingCamera.opened = []
    pyvirtualcam.register_backend(RECORDER, RecordingCamera)
    try:
        yield RecordingCamera.opened
    finally:
        pyvirtualcam.camera.BACKENDS.pop(RECORDER, None)


def decoded_frames(path: Path) -> list[av.VideoFrame]:
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


@pytest.mark.slow
async def test_the_virtual_camera_gets_the_swapped_face_and_the_file_plays(recorder, tmp_path):
    video = face_clip(tmp_path / "obama.mkv")
    async with running_server(loopback_settings("mesh")) as (url, app):
        stop = asyncio.Event()
        options = CamOptions(
            server=url,
            face=str(face_path("grace_hopper.jpg")),
            input=str(video),
            virtual_camera=True,
            camera_backend=RECORDER,
            output=tmp_path / "swapped.mp4",
        )
        run = asyncio.ensure_future(run_cam(options, stop=stop, out=sys.stderr))
        try:
            await wait_until(lambda: run.done() or (recorder and len(recorder[0].frames) >= 15), timeout=120)
            assert not run.done(), run.result()
            described = app[SESSIONS].all()[0].snapshot()
            assert described["frames_processed"] > 0 and described["face_id"] is not None, described
        finally:
            stop.set()
            assert await asyncio.wait_for(run, 30) == 0
        assert app[SESSIONS].all() == [] and app[SESSIONS].viewers() == []
        assert len(app[FACES]) == 0, "the face uploaded for the run went with it"
    camera = recorder[0]
    assert (camera.width, camera.height) == (640, 480) and camera.closed
    received = camera.frames[-1]
    to_source, to_target = (
        similarity(received, face_rgb("grace_hopper.jpg")),
        similarity(received, face_rgb("obama.jpg")),
    )
    print(f"virtual camera: SFace {to_source:.3f} to the source (Grace Hopper), {to_target:.3f} to the target")
    assert to_source > to_target, "the camera shows the source's identity"
    written = decoded_frames(tmp_path / "swapped.mp4")
    assert len(written) >= 10 and (written[0].width, written[0].height) == (640, 480)


async def test_ctrl_c_deletes_both_sessions_and_the_output_file_plays(tmp_path):
    video = face_clip(tmp_path / "obama.mkv")
    output = tmp_path / "out.mkv"
    async with running_server(loopback_settings()) as (url, app):
        command = [sys.executable, "-m", "signaling.cli", "cam", "--server", url, "--input", str(video)]
        command += ["--face", str(face_path("biden.jpg")), "--output", str(output), "--stream", "desk"]
        process = await asyncio.create_subprocess_exec(
            *command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            await wait_until(lambda: process.returncode is not None or app[SESSIONS].viewers(), timeout=60)
            assert process.returncode is None, (await process.communicate())[1].decode()
            session, viewer = app[SESSIONS].all()[0], app[SESSIONS].viewers()[0]
            await wait_until(lambda: session.stats.frames_out >= 15, timeout=30)
            process.send_signal(signal.SIGINT)
            _, stderr = await asyncio.wait_for(process.communicate(), 30)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert process.returncode == 0, stderr.decode()
        assert "streaming" in stderr.decode() and "Traceback" not in stderr.decode()
        assert session.close_reason == "ended by its WHIP client", session.close_reason
        assert viewer.close_reason == "ended by its WHEP client", viewer.close_reason
        assert app[SESSIONS].all() == []
    assert len(decoded_frames(output)) >= 10, "the file plays"


async def test_a_bad_token_and_an_empty_balance_are_said_before_anything_streams(tmp_path):
    video = face_clip(tmp_path / "obama.mkv", seconds=0.5)
    async with running_server(metered_settings(None)) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            broke = await create_account(admin, "broke", balance=0)
        options = CamOptions(server=url, face=str(face_path("biden.jpg")), input=str(video), output=tmp_path / "o.mkv")
        with pytest.raises(CamError, match=r"refused the token \(401\).*--token"):
            await run_cam(CamOptions(**{**options.__dict__, "token": "not-a-key"}))
        with pytest.raises(CamError, match=r"no tokens left \(402\): top it up"):
            await run_cam(CamOptions(**{**options.__dict__, "token": broke}))
        assert app[SESSIONS].all() == []


async def test_an_unknown_face_and_a_missing_photo_are_said(tmp_path):
    video = face_clip(tmp_path / "obama.mkv", seconds=0.5)
    async with running_server(loopback_settings()) as (url, app):
        options = CamOptions(server=url, face="no-such-face", input=str(video), output=tmp_path / "o.mkv")
        with pytest.raises(CamError, match="no face 'no-such-face' on this server"):
            await run_cam(options)
        with pytest.raises(CamError, match="no photo at /nowhere/me.jpg"):
            await run_cam(CamOptions(**{**options.__dict__, "face": "/nowhere/me.jpg"}))
        assert app[SESSIONS].all() == []


async def test_a_missing_input_file_or_camera_names_it_and_how_to_list_cameras():
    with pytest.raises(CamError, match="no video file at /nowhere/clip.mp4"):
        CameraTrack(input_spec("/nowhere/clip.mp4", size="640x480", fps=30))
    if sys.platform.startswith("linux"):
        with pytest.raises(CamError, match=r"cannot open the camera /dev/video97 .*v4l2-ctl --list-devices"):
            CameraTrack(input_spec("/dev/video97", size="640x480", fps=30))


def test_the_command_says_a_missing_input_in_one_line_and_exits_1():
    """Before any request: the server given here does not exist."""
    done = subprocess.run(
        [sys.executable, "-m", "signaling.cli", "cam", "--server", "http://127.0.0.1:9", "--face", "x"]
        + ["--input", "/nowhere/clip.mp4", "--output", os.devnull],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("facefuse cam: no video file at /nowhere/clip.mp4"), done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="v4l2loopback is Linux's")
@pytest.mark.skipif(bool(glob.glob("/dev/video*")), reason="this machine has video devices")
def test_no_loopback_device_says_the_command_that_makes_one():
    with pytest.raises(CamError) as caught:
        VirtualCamera(640, 480, 30, backend="v4l2loopback")
    assert "no v4l2loopback device" in str(caught.value) and LOOPBACK_HINT in str(caught.value)
    assert LOOPBACK_HINT == "sudo modprobe v4l2loopback devices=1 exclusive_caps=1 card_label=facefuse"


def test_without_pyvirtualcam_the_extra_to_install_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyvirtualcam", None)  # as when it is not installed: import fails
    with pytest.raises(CamError, match=r"pip install 'facefuse\[cam\]'"):
        VirtualCamera(640, 480, 30)


def test_an_unknown_camera_backend_lists_the_known_ones(recorder):
    with pytest.raises(CamError, match=f"no virtual camera backend 'nope'; the backends are: .*{RECORDER}"):
        VirtualCamera(640, 480, 30, backend="nope")


async def test_a_server_that_does_not_answer_is_one_line(tmp_path):
    video = face_clip(tmp_path / "obama.mkv", seconds=0.5)
    nobody = f"http://127.0.0.1:{free_port()}"
    options = CamOptions(server=nobody, face=str(face_path("biden.jpg")), input=str(video), output=tmp_path / "o.mkv")
    with pytest.raises(CamError, match=f"no answer from {nobody}"):
        await run_cam(options)


async def test_nothing_to_write_to_is_said_before_anything_opens():
    with pytest.raises(CamError, match="--virtual-camera and/or --output"):
        await run_cam(CamOptions(server="http://127.0.0.1:9", face="x", input="/nowhere"))


def test_the_status_line_says_fps_latency_tokens_and_throttle():
    session = {"fps_in": 29.7, "fps_out": 28.94, "latency_ms": {"p50": 41.6, "p99": 80.0}}
    metered = {"level": "slow", "balance": 1234.56, "seconds_left": 600.0, "price_per_second": 2.0}
    assert status_text({**session, "meter": metered}, 27.0) == (
        "in 29.7 fps | out 28.9 fps | written 27.0 fps | latency 42 ms | tokens 1234.6 (~10 min) | throttle slow"
    )
    stopped = {"level": "stopped", "reason": "exhausted", "grace_s": 20, "seconds_left": 0.0}
    assert status_text({**session, "meter": stopped}, 0.0).endswith(
        "STOPPED (exhausted), the session ends in 20 s unless topped up"
    )
    assert status_text({**session, "meter": {"level": "full", "seconds_left": None}}, 30).endswith("unmetered")
    assert status_text(None, 0) == "waiting for the session | written 0.0 fps"


def test_the_cam_flags_cost_the_command_line_no_imports_but_their_own():
    """`facefuse --help` builds every command's parser: the cam command's flags must not pull in
    what the command runs with (pyvirtualcam, the client's peers)."""
    probe = (
        "import sys; from signaling.cli import build_parsers; before = set(sys.modules); build_parsers(); "
        "print(sorted(set(sys.modules) - before))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "['client', 'client.cam', 'client.cam.cli']", done.stderr


async def test_a_session_the_server_ends_is_said_with_its_reason_and_exits_1(tmp_path):
    """Here another publisher takes the stream name: the server ends the camera's session ("replaced")."""
    video = face_clip(tmp_path / "obama.mkv")
    said = io.StringIO()
    async with running_server(loopback_settings()) as (url, app):
        options = CamOptions(server=url, face=str(face_path("biden.jpg")), input=str(video), output=tmp_path / "o.mkv")
        run = asyncio.ensure_future(run_cam(options, out=said))
        await wait_until(lambda: run.done() or app[SESSIONS].viewers(), timeout=60)
        assert not run.done(), run.result()
        first = app[SESSIONS].all()[0]
        async with aiohttp.ClientSession() as http:
            pc, sdp = await offer_like_obs(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            other = await post_offer(http, f"{url}/whip/cam", pc, sdp)
            try:
                assert other.status == 201, other.body
                assert await asyncio.wait_for(run, 30) == 1
            finally:
                await other.close()
    assert first.close_reason.startswith("a new publisher took the stream")
    assert "another publisher took over the stream name cam" in said.getvalue(), said.getvalue()


async def test_tokens_running_out_mid_stream_ends_the_run_and_says_to_top_up(tmp_path):
    video = face_clip(tmp_path / "obama.mkv")
    said = io.StringIO()
    settings = metered_settings(None, lease_s=1.0, slow_below_s=0.5, crawl_below_s=0.2, grace_s=1.0)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "ada", balance=1.5)
        options = CamOptions(
            server=url, token=key, face=str(face_path("biden.jpg")), input=str(video), output=tmp_path / "o.mkv"
        )
        assert await asyncio.wait_for(run_cam(options, out=said), 60) == 1
        assert app[SESSIONS].all() == []
    assert "the account's tokens ran out" in said.getvalue() and "top it up" in said.getvalue(), said.getvalue()
