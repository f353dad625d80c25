"""Helpers for the browser tests of the streaming pages: /publish (a WHIP publisher) and
/watch/{stream} (a WHEP player), driven in headless Chromium (support/browser.py)."""

from __future__ import annotations

import base64
import io
from typing import Any

import av
import numpy as np

from support.browser import alert_text, face_path, wait_for

# A <video>'s current frame at its own size, as a PNG data URL (null before it plays).
VIDEO_FRAME_PNG_JS = """
const video = document.getElementById(arguments[0]);
if (!video || video.readyState < 2 || !video.videoWidth) return null;
const canvas = document.createElement("canvas");
canvas.width = video.videoWidth; canvas.height = video.videoHeight;
canvas.getContext("2d").drawImage(video, 0, 0);
return canvas.toDataURL("image/png");
"""

# A <video>'s current frame drawn into 64x48 and returned as grey values (row-major), as
# support.browser's VIDEO_GREY_JS does for the camera page's two videos; null before it plays.
VIDEO_GREY_BY_ID_JS = """
const video = document.getElementById(arguments[0]);
if (!video || video.readyState < 2 || !video.videoWidth) return null;
const canvas = document.createElement("canvas");
canvas.width = 64; canvas.height = 48;
const ctx = canvas.getContext("2d", {willReadFrequently: true});
ctx.drawImage(video, 0, 0, 64, 48);
const rgba = ctx.getImageData(0, 0, 64, 48).data;
const out = new Array(64 * 48);
for (let i = 0; i < 64 * 48; i++) out[i] = 0.299 * rgba[4 * i] + 0.587 * rgba[4 * i + 1] + 0.114 * rgba[4 * i + 2];
return out;
"""

# The audio the watch page's connection received: Opus packets in, and whether the element plays it unmuted.
WATCH_AUDIO_JS = """
const done = arguments[arguments.length - 1];
const pc = window.facefuseWatch.pc;
if (!pc) { done(null); return; }
pc.getStats().then((report) => {
  let packets = 0;
  report.forEach((s) => {
    if (s.type === "inbound-rtp" && (s.kind || s.mediaType) === "audio") packets = s.packetsReceived || 0;
  });
  done({packets, muted: document.getElementById("video").muted});
}, () => done(null));
"""

WATCH_FRAMES_DECODED_JS = """
const done = arguments[arguments.length - 1];
window.facefuseWatch.framesDecoded().then(done, () => done(-1));
"""


def video_frame_rgb(driver: Any, element_id: str) -> np.ndarray | None:
    """The frame a page's <video id=element_id> shows now, as RGB (H, W, 3), or None before it plays."""
    url = driver.execute_script(VIDEO_FRAME_PNG_JS, element_id)
    if not url:
        return None
    with av.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])), format="png_pipe") as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def video_grey(driver: Any, element_id: str) -> np.ndarray | None:
    """A page's <video id=element_id> now, as 48x64 grey levels, or None before it plays."""
    grey = driver.execute_script(VIDEO_GREY_BY_ID_JS, element_id)
    return None if grey is None else np.asarray(grey).reshape(48, 64)


def go_live(driver: Any, base_url: str, stream: str, face: str | None, api_key: str | None = None) -> dict:
    """Opens /publish, uploads `face` (a test photo's name), publishes under `stream` and waits
    until the page is live; returns the page's state (window.facefuse)."""
    driver.get(f"{base_url}/publish")
    if api_key is not None:
        wait_for(lambda: driver.find_element("id", "api-key").is_displayed(), 10, "the API key field shows")
        driver.find_element("id", "api-key").send_keys(api_key)
    if face is not None:
        driver.find_element("id", "face-file").send_keys(str(face_path(face)))
        wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 20, "face analysed and stored")
    name = driver.find_element("id", "stream-name")
    name.clear()
    name.send_keys(stream)
    return publish_again(driver)


def publish_again(driver: Any) -> dict:
    """Presses Go live on an open /publish page and waits until it is live (failing at once on an error)."""
    driver.find_element("id", "go-live").click()

    def live() -> bool:
        shown = alert_text(driver).strip()
        assert not shown, f"the publish page shows an error instead of going live: {shown}"
        return driver.execute_script("return document.body.dataset.state;") == "live"

    wait_for(live, 20, "the publish page is live")
    return driver.execute_script(
        "const s = window.facefuse; return {lastStatus: s.lastStatus, sessionUrl: s.sessionUrl, sessionId: s.sessionId};"
    )


def watch_state(driver: Any) -> dict:
    """The watch page's state (window.facefuseWatch) with its current connection's decoded frames."""
    state = driver.execute_script(
        "const w = window.facefuseWatch; return {state: w.state, dataState: document.body.dataset.state,"
        " connects: w.connects, plays: w.plays, attempts: w.attempts, lastStatus: w.lastStatus,"
        " audioMuted: w.audioMuted, message: document.getElementById('message').hidden ? ''"
        " : document.getElementById('message').textContent};"
    )
    state["framesDecoded"] = driver.execute_async_script(WATCH_FRAMES_DECODED_JS)
    return state
