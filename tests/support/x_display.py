"""A private X display for tests of windows: a real Xvfb on a free display number, its windows
found by title (xwininfo), grabbed as pictures (xwd), and closed as a window manager closes them.

Xvfb runs no window manager, so the close button's message is sent here: a WM_DELETE_WINDOW
ClientMessage (ICCCM 4.1.2.7), through libX11 itself (ctypes), which is what a window manager
sends when its close button is clicked.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import shutil
import subprocess
from collections.abc import Iterator

import numpy as np

XVFB_START_TIMEOUT_S = 30


@contextlib.contextmanager
def xvfb(size: str = "1280x720x24") -> Iterator[str]:
    """Starts Xvfb on a display number it picks itself (-displayfd); yields ":N"; stops it."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_end), "-screen", "0", size, "-nolisten", "tcp"],
        pass_fds=(write_end,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as said:
            number = said.readline().strip()  # written once the display takes clients
        assert number.isdigit(), f"Xvfb did not start (exit status {process.poll()})"
        yield f":{number.decode()}"
    finally:
        process.terminate()
        try:
            process.wait(XVFB_START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def missing_tools() -> list[str]:
    return [tool for tool in ("Xvfb", "xwininfo", "xwd") if shutil.which(tool) is None]


def windows_titled(display: str, title: str) -> list[int]:
    """The ids of the top-level windows of `display` whose title is `title`."""
    tree = subprocess.run(
        ["xwininfo", "-display", display, "-root", "-tree"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    return [int(found, 16) for found in re.findall(rf'^\s+(0x[0-9a-f]+) "{re.escape(title)}":', tree, re.MULTILINE)]


def grab(display: str, window: int) -> np.ndarray:
    """What `window` shows on the screen, as an RGB picture (xwd's ZPixmap of a 24-bit TrueColor screen)."""
    dump = subprocess.run(
        ["xwd", "-display", display, "-id", hex(window), "-silent"], capture_output=True, check=True, timeout=30
    ).stdout
    header = np.frombuffer(dump[:100], dtype=">u4")  # XWDFileHeader: 25 CARD32, big-endian
    header_size, width, height = int(header[0]), int(header[4]), int(header[5])
    byte_order, bits_per_pixel, bytes_per_line, ncolors = (int(header[i]) for i in (7, 11, 12, 19))
    assert bits_per_pixel == 32, f"xwd wrote {bits_per_pixel} bits a pixel; the display is not 24-bit TrueColor"
    start = header_size + ncolors * 12  # XWDColor entries: 12 bytes each
    rows = np.frombuffer(dump[start : start + bytes_per_line * height], dtype=np.uint8).reshape(height, bytes_per_line)
    pixels = rows[:, : width * 4].reshape(height, width, 4)
    # LSBFirst (0): each pixel's bytes are blue, green, red, padding
    return pixels[:, :, [2, 1, 0]] if byte_order == 0 else pixels[:, :, [1, 2, 3]]


class _ClientMessage(ctypes.Structure):  # XClientMessageEvent (Xlib.h)
    _fields_ = [
        ("type", ctypes.c_int),
        ("serial", ctypes.c_ulong),
        ("send_event", ctypes.c_int),
        ("display", ctypes.c_void_p),
        ("window", ctypes.c_ulong),
        ("message_type", ctypes.c_ulong),
        ("format", ctypes.c_int),
        ("data", ctypes.c_long * 5),
    ]


class _Event(ctypes.Union):  # XEvent: any event in 24 longs
    _fields_ = [("client_message", _ClientMessage), ("pad", ctypes.c_long * 24)]


CLIENT_MESSAGE = 33  # X.h
NO_EVENT_MASK = 0


def close_like_a_window_manager(display: str, window: int) -> None:
    """Sends `window` WM_DELETE_WINDOW, as a window manager's close button does."""
    x11 = ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6")
    x11.XOpenDisplay.argtypes, x11.XOpenDisplay.restype = [ctypes.c_char_p], ctypes.c_void_p
    x11.XInternAtom.argtypes, x11.XInternAtom.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int], ctypes.c_ulong
    x11.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.POINTER(_Event)]
    x11.XFlush.argtypes = x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    connection = x11.XOpenDisplay(display.encode())
    assert connection, f"cannot open the display {display}"
    try:
        event = _Event()
        message = event.client_message
        message.type, message.send_event, message.window, message.format = CLIENT_MESSAGE, 1, window, 32
        message.message_type = x11.XInternAtom(connection, b"WM_PROTOCOLS", 0)
        message.data[0] = x11.XInternAtom(connection, b"WM_DELETE_WINDOW", 0)
        message.data[1] = 0  # CurrentTime
        assert x11.XSendEvent(connection, window, 0, NO_EVENT_MASK, ctypes.byref(event)), "XSendEvent failed"
        x11.XFlush(connection)
    finally:
        x11.XCloseDisplay(connection)
