"""The camera as a video track: a capture device through PyAV (v4l2 on Linux, avfoundation on
macOS, dshow on Windows), or a video file looped and paced in real time (for tests and demos).

Reading blocks (a device hands a frame every 33 ms; decoding takes a while), so a thread reads
and keeps only the newest frame; `recv()` hands that one on. The frames are stamped with the
wall clock, so a file that loops does not send time backwards.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from client.cam.errors import CamError

logger = logging.getLogger(__name__)

VIDEO_CLOCK = 90_000
FILE_FPS_FALLBACK = 30.0  # a file whose frames carry no times is played at this rate
# How to list the capture devices on each system, for the "no camera" error.
LIST_DEVICES = {
    "Linux": "v4l2-ctl --list-devices (or ls /dev/video*)",
    "Darwin": 'ffmpeg -f avfoundation -list_devices true -i ""',
    "Windows": "ffmpeg -list_devices true -f dshow -i dummy",
}
DEFAULT_DEVICE = {"Linux": "/dev/video0", "Darwin": "0", "Windows": None}  # dshow wants a name


@dataclass(frozen=True)
class InputSpec:
    """What to open: a device (`av_format` set) or a file (`av_format` None)."""

    name: str
    av_format: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    @property
    def is_device(self) -> bool:
        return self.av_format is not None


def input_spec(text: str | None, *, size: str, fps: float, system: str | None = None) -> InputSpec:
    """The input the user named: on Linux a /dev/ path is a v4l2 device, on macOS a number an
    avfoundation device, on Windows `video=NAME` a dshow device; anything else is a video file.
    None: the system's first camera. A device is asked for `size` (WIDTHxHEIGHT) at `fps`."""
    system = system or platform.system()
    if text is None:
        text = DEFAULT_DEVICE.get(system)
        if text is None:
            raise CamError(f"name the camera with --input video=NAME; list them with {LIST_DEVICES['Windows']}")
    options = {"video_size": size, "framerate": f"{fps:g}"}
    if system == "Linux" and text.startswith("/dev/"):
        return InputSpec(text, "v4l2", options)
    if system == "Darwin" and text.isdigit():
        return InputSpec(text, "avfoundation", options)
    if system == "Windows" and text.startswith("video="):
        return InputSpec(text, "dshow", options)
    return InputSpec(text)


def open_container(spec: InputSpec, system: str | None = None) -> av.container.InputContainer:
    """Opens the device or file; a CamError that names it, and how to find the right one, if it cannot."""
    system = system or platform.system()
    if not spec.is_device and not Path(spec.name).is_file():
        raise CamError(f"no video file at {spec.name} (a camera on this system is {_device_example(system)})")
    try:
        container = av.open(spec.name, format=spec.av_format, options=spec.options)
    except (av.FFmpegError, OSError) as exc:
        if spec.is_device:
            raise CamError(
                f"cannot open the camera {spec.name} ({exc}); list the cameras with {LIST_DEVICES.get(system, '?')}"
            ) from None
        raise CamError(f"cannot read the video file {spec.name}: {exc}") from None
    if not container.streams.video:
        container.close()
        raise CamError(f"{spec.name} has no video")
    return container


def _device_example(system: str) -> str:
    return {"Linux": "/dev/video0", "Darwin": "0", "Windows": "video=NAME"}.get(system, "/dev/video0")


class CameraTrack(MediaStreamTrack):
    """The camera's (or the file's) newest frame, as yuv420p with wall-clock times."""

    kind = "video"

    def __init__(self, spec: InputSpec) -> None:
        super().__init__()
        self.spec = spec
        self.frames_read = 0
        container = open_container(spec)  # here, not in the thread: a missing camera fails at once
        stream = container.streams.video[0]
        self.width, self.height = stream.codec_context.width, stream.codec_context.height
        self._loop = asyncio.get_running_loop()
        self._arrived = asyncio.Event()
        self._lock = threading.Lock()
        self._newest: av.VideoFrame | None = None
        self._failure: str | None = None
        self._stopping = threading.Event()
        self._start: float | None = None
        self._reader = threading.Thread(target=self._read, args=(container,), name="camera-input", daemon=True)
        self._reader.start()

    @property
    def failure(self) -> str | None:
        """Why the input stopped giving frames (a camera unplugged, a file that broke); None while it runs."""
        return self._failure

    async def recv(self) -> av.VideoFrame:
        while True:
            if self.readyState != "live":
                raise MediaStreamError
            await self._arrived.wait()
            self._arrived.clear()
            with self._lock:
                frame, self._newest = self._newest, None
            if frame is not None:
                break
            if self._failure is not None:
                self.stop()
                raise MediaStreamError
        now = time.monotonic()
        if self._start is None:
            self._start = now
        frame.pts = round((now - self._start) * VIDEO_CLOCK)
        frame.time_base = fractions.Fraction(1, VIDEO_CLOCK)
        return frame

    def stop(self) -> None:
        super().stop()
        self._stopping.set()

    def join(self, timeout: float) -> None:
        """Waits (bounded) for the reading thread to let go of the device or file."""
        self._stopping.set()
        self._reader.join(timeout)

    # -- the reading thread ---------------------------------------------------------------
    def _read(self, container: av.container.InputContainer) -> None:
        try:
            while True:
                with container:
                    self._read_once(container)
                if self._stopping.is_set():
                    return
                if self.spec.is_device:
                    self._fail(f"the camera {self.spec.name} stopped giving frames")
                    return
                container = open_container(self.spec)  # a file plays again from its start
        except (av.FFmpegError, OSError, CamError) as exc:
            self._fail(f"reading {self.spec.name} failed: {exc}")

    def _read_once(self, container: av.container.InputContainer) -> None:
        """Every frame of the container (a device: until it stops), a file's at its own pace."""
        started, first = time.monotonic(), None
        for index, frame in enumerate(container.decode(video=0)):
            if self._stopping.is_set():
                return
            if not self.spec.is_device:
                at = frame.time if frame.time is not None else index / FILE_FPS_FALLBACK
                first = at if first is None else first
                if self._stopping.wait(max(0.0, started + at - first - time.monotonic())):
                    return
            self._hand_on(frame if frame.format.name == "yuv420p" else frame.reformat(format="yuv420p"))

    def _hand_on(self, frame: av.VideoFrame) -> None:
        with self._lock:
            self._newest = frame
        self.frames_read += 1
        self._wake()

    def _fail(self, why: str) -> None:
        logger.warning("%s", why)
        self._failure = why
        self._wake()

    def _wake(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._arrived.set)
        except RuntimeError:  # the event loop is closed: nobody is reading any more
            self._stopping.set()
