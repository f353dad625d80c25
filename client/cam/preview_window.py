"""`facefuse cam --preview`: a window on the desktop showing the swapped video as it goes to the
outputs (an Output, fed as the virtual camera and the file are).

Tk runs in a thread of its own, and only there: every Tk call is made from that thread. The
pipeline hands it frames through a one-frame slot, the newest frame replacing one not shown yet,
so a slow window skips frames and never holds the pipeline back; the conversion to a picture
happens in the window's thread too. Frames are shown as PPM pictures (PyAV's rgb24 with a PPM
header): Tk reads those itself, no imaging library needed.

Closing the window ends the run as Ctrl-C does: `on_close` is called, from the window's thread.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

import av

from client.cam.errors import CamError

logger = logging.getLogger(__name__)

# How often the window looks for a new frame (ms): under a frame's time at 60 fps.
POLL_MS = 10
# Opening a window on a display takes milliseconds; a display that has not answered by then is not going to.
OPEN_WITHIN_S = 10.0
# Closing ends Tk's loop within a poll; bounded, so a stuck display never holds the way out.
CLOSE_WITHIN_S = 5.0
# Frames larger than this are shown scaled down (the aspect kept): a window must fit a screen.
MAX_WIDTH, MAX_HEIGHT = 1280, 720


class PreviewWindow:
    """A Tk window titled `title`, showing each frame written to it; frames_shown counts them."""

    def __init__(self, title: str, width: int, height: int, on_close: Callable[[], None]) -> None:
        _check_display()
        try:
            import tkinter
        except ImportError:
            raise CamError("--preview needs Python's tkinter (Debian and Ubuntu: apt install python3-tk)") from None
        self.title = title
        self.frames_shown = 0
        self._tkinter = tkinter
        self._size = _fitted(width, height)
        self._on_close = on_close
        self._slot: queue.Queue[av.VideoFrame] = queue.Queue(maxsize=1)
        self._closing = threading.Event()
        self._opened = threading.Event()
        self._open_error: str | None = None
        self._thread = threading.Thread(target=self._run, name="facefuse-preview", daemon=True)
        self._thread.start()
        if not self._opened.wait(OPEN_WITHIN_S):
            self._closing.set()
            raise CamError(f"--preview: the display {_display_name()} did not open a window within {OPEN_WITHIN_S:g} s")
        if self._open_error is not None:
            raise CamError(f"--preview cannot open a window on the display {_display_name()}: {self._open_error}")

    def write(self, frame: av.VideoFrame) -> None:
        """Hands `frame` to the window, replacing one it has not shown yet; never waits."""
        while True:
            try:
                self._slot.put_nowait(frame)
                return
            except queue.Full:
                with contextlib.suppress(queue.Empty):
                    self._slot.get_nowait()

    def close(self) -> None:
        self._closing.set()
        self._thread.join(CLOSE_WITHIN_S)

    def _run(self) -> None:
        try:
            root = self._tkinter.Tk()
        except self._tkinter.TclError as exc:
            self._open_error = str(exc)
            self._opened.set()
            return
        closed_by_user = False
        try:
            closed_by_user = self._show_until_closed(root)
        except Exception:
            logger.exception("the preview window failed")
        finally:
            with contextlib.suppress(self._tkinter.TclError):
                root.destroy()
            # Tk's objects are freed here, in Tk's thread: freed from another thread they would call into it.
            del root
            gc.collect()
        if closed_by_user:
            try:
                self._on_close()
            except Exception:
                logger.exception("ending the run from the preview window failed")

    def _show_until_closed(self, root: Any) -> bool:
        """Tk's loop; True when the window was closed on the desktop, False when close() ended it."""
        tkinter = self._tkinter
        root.title(self.title)
        photo = tkinter.PhotoImage(master=root, width=self._size[0], height=self._size[1])
        label = tkinter.Label(root, image=photo, borderwidth=0, background="black")
        label.pack()
        closed_by_user = False

        def on_delete() -> None:  # WM_DELETE_WINDOW: the window's close button
            nonlocal closed_by_user
            closed_by_user = True
            root.destroy()

        def poll() -> None:
            if self._closing.is_set():
                root.destroy()
                return
            try:
                frame = self._slot.get_nowait()
            except queue.Empty:
                pass
            else:
                photo.configure(data=_ppm(frame), format="PPM")
                self.frames_shown += 1
            root.after(POLL_MS, poll)

        root.protocol("WM_DELETE_WINDOW", on_delete)
        root.after(POLL_MS, poll)
        self._opened.set()
        root.mainloop()  # returns once the window is destroyed, by on_delete, poll or the display
        label = photo = None  # PhotoImage deletes its Tk image when freed: here, in Tk's thread
        return closed_by_user or not self._closing.is_set()


def _check_display() -> None:
    """Where windows go through X11 or Wayland, a session without either has no desktop to show one."""
    if sys.platform in ("win32", "cygwin"):
        return
    if sys.platform == "darwin":
        # macOS's Tk lives on the main thread only, which the event loop holds
        raise CamError("--preview is not available on macOS yet: its Tk cannot run beside the event loop")
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        raise CamError("--preview needs a desktop: neither DISPLAY nor WAYLAND_DISPLAY is set (leave --preview out)")


def _display_name() -> str:
    return os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or "(default)"


def _fitted(width: int, height: int) -> tuple[int, int]:
    scale = min(1.0, MAX_WIDTH / max(width, 1), MAX_HEIGHT / max(height, 1))
    return max(round(width * scale), 1), max(round(height * scale), 1)


def _ppm(frame: av.VideoFrame) -> bytes:
    """The frame as a binary PPM (P6), scaled to fit MAX_WIDTH x MAX_HEIGHT."""
    width, height = _fitted(frame.width, frame.height)
    pixels = frame.reformat(width, height, format="rgb24").to_ndarray()
    return b"P6\n%d %d\n255\n" % (width, height) + pixels.tobytes()
