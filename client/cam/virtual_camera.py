"""The swapped frames as a virtual camera that OBS, Zoom or a browser can pick: pyvirtualcam
(v4l2loopback on Linux, OBS Virtual Camera on Windows and macOS), an optional extra.

The camera is opened before anything is sent to the server, at the input's size: a missing
module or loopback device is said at once, not after the session started. Frames of another size
(the server may change it) are scaled to the camera's: a virtual camera's size is fixed.
"""

from __future__ import annotations

import platform
from typing import Any

import av

from client.cam.errors import CamError

INSTALL_HINT = "pip install 'facefuse[cam]'"
LOOPBACK_HINT = "sudo modprobe v4l2loopback devices=1 exclusive_caps=1 card_label=facefuse"
# pyvirtualcam's v4l2loopback backend says one of these when there is no loopback device to write to.
NO_LOOPBACK_SIGNS = ("No v4l2 loopback device", "does not exist", "not a v4l2 loopback device")


def _pyvirtualcam() -> Any:
    try:
        import pyvirtualcam
    except ImportError:
        raise CamError(f"--virtual-camera needs pyvirtualcam: {INSTALL_HINT}") from None
    return pyvirtualcam


class VirtualCamera:
    """One pyvirtualcam camera of a fixed size, fed RGB frames."""

    def __init__(
        self, width: int, height: int, fps: float, *, backend: str | None = None, device: str | None = None
    ) -> None:
        pyvirtualcam = _pyvirtualcam()
        self.width, self.height = width - width % 2, height - height % 2  # the loopback formats are 4:2:0
        known = pyvirtualcam.camera.BACKENDS
        if backend is not None and backend not in known:  # asked first: Camera() would fail half-made
            names = ", ".join(sorted(known)) or "none on this system"
            raise CamError(f"no virtual camera backend {backend!r}; the backends are: {names}")
        try:
            self._camera = pyvirtualcam.Camera(
                self.width, self.height, fps, fmt=pyvirtualcam.PixelFormat.RGB, backend=backend, device=device
            )
        except RuntimeError as exc:
            raise CamError(_why_not(str(exc), device)) from None
        self.device = self._camera.device
        self.frames_sent = 0

    def write(self, frame: av.VideoFrame) -> None:
        if (frame.width, frame.height) != (self.width, self.height):
            frame = frame.reformat(self.width, self.height)
        self._camera.send(frame.to_ndarray(format="rgb24"))
        self.frames_sent += 1

    def close(self) -> None:
        self._camera.close()


def _why_not(said: str, device: str | None) -> str:
    """pyvirtualcam's error (one line per backend it tried) as what to do about it."""
    if platform.system() == "Linux" and any(sign in said for sign in NO_LOOPBACK_SIGNS):
        where = f" at {device}" if device else ""
        return f"no v4l2loopback device{where} to write to; create one with: {LOOPBACK_HINT}"
    if platform.system() in ("Windows", "Darwin"):
        return (
            f"the virtual camera did not start ({said.strip()}); install OBS Studio and start its Virtual Camera once"
        )
    return f"the virtual camera did not start: {' / '.join(said.splitlines())}"
