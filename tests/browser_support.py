"""Helpers for the Chromium end-to-end tests: test faces, a y4m fake camera, the server process,
and a headless Chromium driven by selenium with the flags from ../shared/docs/streaming.md."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
FACES_DIR = REPO_ROOT / ".." / "shared" / "testdata" / "faces"

CHROMIUM_BINARY = "/usr/bin/chromium"
CHROMEDRIVER_BINARY = "/usr/bin/chromedriver"

Y4M_WIDTH = 640
Y4M_HEIGHT = 480
Y4M_HEADER = f"YUV4MPEG2 W{Y4M_WIDTH} H{Y4M_HEIGHT} F30:1 Ip A1:1 C420jpeg\n".encode("ascii")


def face_path(name: str) -> Path:
    """A real face photograph from ../shared/testdata/faces (read-only)."""
    path = FACES_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"test face {name!r} not found in {FACES_DIR.resolve()}")
    return path.resolve()


def write_y4m(photo: Path, destination: Path, frames: int = 30) -> Path:
    """Writes a still 640x480 yuv420p y4m clip of `photo`, `frames` identical frames long
    (Chromium's fake camera loops it). The photo is scaled to cover 640x480 and centre-cropped."""
    with av.open(str(photo)) as container:
        rgb = next(container.decode(video=0)).to_ndarray(format="rgb24")
    height, width = rgb.shape[:2]
    scale = max(Y4M_WIDTH / width, Y4M_HEIGHT / height)
    scaled_w, scaled_h = max(Y4M_WIDTH, round(width * scale)), max(Y4M_HEIGHT, round(height * scale))
    scaled = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(scaled_w, scaled_h).to_ndarray(format="rgb24")
    top, left = (scaled_h - Y4M_HEIGHT) // 2, (scaled_w - Y4M_WIDTH) // 2
    cropped = np.ascontiguousarray(scaled[top : top + Y4M_HEIGHT, left : left + Y4M_WIDTH])
    yuv = av.VideoFrame.from_ndarray(cropped, format="rgb24").reformat(Y4M_WIDTH, Y4M_HEIGHT, format="yuv420p")
    planes = b"".join(_plane_bytes(yuv, index) for index in range(3))
    with open(destination, "wb") as out:
        out.write(Y4M_HEADER)
        for _ in range(frames):
            out.write(b"FRAME\n")
            out.write(planes)
    return destination


def _plane_bytes(frame: av.VideoFrame, index: int) -> bytes:
    """One plane's visible bytes, without the line padding PyAV may add."""
    plane = frame.planes[index]
    width = frame.width if index == 0 else frame.width // 2
    height = frame.height if index == 0 else frame.height // 2
    rows = np.frombuffer(plane, dtype=np.uint8).reshape(-1, plane.line_size)
    return rows[:height, :width].tobytes()


# ---- the server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def facefuse_executable() -> str:
    """The `facefuse` console script installed beside this interpreter; FACEFUSE_BIN overrides."""
    override = os.environ.get("FACEFUSE_BIN")
    if override:
        return override
    return str(Path(sys.executable).parent / "facefuse")


def http_json(method: str, url: str, timeout: float = 5.0) -> tuple[int, object]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        with error:
            body = error.read()
        return error.code, json.loads(body) if body else None


class ServerProcess:
    """`facefuse serve` on a free loopback port, with its output kept in a log file."""

    def __init__(self, log_path: Path, chain: str = "invert") -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        command = [
            facefuse_executable(), "serve",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--ice-host", "127.0.0.1",
            "--chain", chain,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)

    def log_tail(self, chars: int = 4000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=1) as response:
                    if response.status == 200:
                        return
            time.sleep(0.1)
        raise TimeoutError(f"server not ready after {timeout} s:\n{self.log_tail()}")

    def terminate(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, then wait; returns the exit code, or None if it had to be killed."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    return self.process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
                    return None
            return self.process.returncode
        finally:
            self._log.close()


# ---- the browser ------------------------------------------------------------------------------


def chromium_flags(y4m: Path, user_data_dir: Path) -> list[str]:
    """Exactly the flags that worked headless as root (streaming.md), with a 30 fps fake camera."""
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={user_data_dir}",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream=fps=30",
        f"--use-file-for-fake-video-capture={y4m}",
        "--allow-loopback-in-peer-connection",
        "--disable-features=WebRtcHideLocalIpsWithMdns",
        "--autoplay-policy=no-user-gesture-required",
    ]


@contextlib.contextmanager
def chromium(flags: list[str]) -> Iterator[object]:
    """A headless Chromium webdriver with `flags`; always quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # never let selenium-manager try to download a driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM_BINARY
    for flag in flags:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER_BINARY), options=options)
    try:
        driver.set_script_timeout(15)
        yield driver
    finally:
        driver.quit()


# In-page helpers, run with execute_async_script / execute_script.

INBOUND_VIDEO_STATS_JS = """
const done = arguments[arguments.length - 1];
const pc = window.facefuse && window.facefuse.pc;
if (!pc) { done(null); return; }
pc.getStats().then((report) => {
  let found = null;
  report.forEach((s) => {
    if (s.type === "inbound-rtp" && (s.kind || s.mediaType) === "video") {
      found = {framesDecoded: s.framesDecoded || 0, frameWidth: s.frameWidth || null,
               frameHeight: s.frameHeight || null};
    }
  });
  done(found);
}, (error) => done({error: String(error)}));
"""

# Draws both <video> elements into 64x48 canvases and returns their grey values (row-major).
VIDEO_GREY_JS = """
const [w, h] = [64, 48];
const grey = (id) => {
  const video = document.getElementById(id);
  if (!video || video.readyState < 2 || !video.videoWidth) return null;
  const canvas = document.createElement("canvas");
  canvas.width = w; canvas.height = h;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  ctx.drawImage(video, 0, 0, w, h);
  const rgba = ctx.getImageData(0, 0, w, h).data;
  const out = new Array(w * h);
  for (let i = 0; i < w * h; i++) {
    out[i] = 0.299 * rgba[4 * i] + 0.587 * rgba[4 * i + 1] + 0.114 * rgba[4 * i + 2];
  }
  return out;
};
return {local: grey("local-video"), remote: grey("remote-video")};
"""

# Every ICE candidate pair the browser knows: addresses, state, whether the transport selected it,
# and the bytes it carried.
CANDIDATE_PAIRS_JS = """
const done = arguments[arguments.length - 1];
const pc = window.facefuse && window.facefuse.pc;
if (!pc) { done(null); return; }
pc.getStats().then((report) => {
  const byId = new Map();
  report.forEach((s) => byId.set(s.id, s));
  const selected = new Set();
  report.forEach((s) => {
    if (s.type === "transport" && s.selectedCandidatePairId) selected.add(s.selectedCandidatePairId);
  });
  const pairs = [];
  report.forEach((s) => {
    if (s.type !== "candidate-pair") return;
    const local = byId.get(s.localCandidateId), remote = byId.get(s.remoteCandidateId);
    pairs.push({
      local: local.address || local.ip, remote: remote.address || remote.ip, state: s.state,
      selected: selected.has(s.id) || s.selected === true,
      bytes: (s.bytesSent || 0) + (s.bytesReceived || 0),
    });
  });
  done(pairs);
}, (error) => done({error: String(error)}));
"""

# Wraps the page's fetch so that the answer to /api/offer carries a wrong ICE password: every
# connectivity check the browser makes then fails, as when no media path exists.
BREAK_ICE_JS = """
const originalFetch = window.fetch;
window.fetch = async (url, init) => {
  const response = await originalFetch(url, init);
  if (url !== "/api/offer" || !response.ok) return response;
  const answer = await response.json();
  answer.sdp = answer.sdp.replace(/^a=ice-pwd:.*$/gm, "a=ice-pwd:wrongwrongwrongwrongwrong");
  return new Response(JSON.stringify(answer), {status: 200, headers: {"Content-Type": "application/json"}});
};
"""
