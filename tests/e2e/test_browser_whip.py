"""Chromium publishes over WHIP with our own page (/publish): its camera (a still y4m of Obama) is
a session under the stream name, swapped to Grace Hopper's face (by SFace identity) on the video
that comes back on the same transceiver, and Stop ends the session with a DELETE."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from support.browser import (
    VIDEO_GREY_JS,
    ServerProcess,
    alert_text,
    assert_media_on_loopback,
    chromium,
    chromium_flags,
    face_path,
    http_json,
    live_sessions,
    served,
    wait_for,
    write_y4m,
)
from support.face_identity import identity
from support.server import face_rgb
from support.stream_pages import go_live, video_frame_rgb

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def mesh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with served(
        tmp_path_factory.mktemp("whip-page") / "server.log", chain="mesh", ready_timeout=60, stop_timeout=10
    ) as process:
        yield process


def frames_in(server: ServerProcess, session_id: str) -> int:
    status, snapshot = http_json("GET", f"{server.base_url}/api/sessions/{session_id}")
    assert status == 200, snapshot
    return snapshot["frames_in"]


# The video frames the publish page's connection has sent (getStats' outbound-rtp framesSent).
FRAMES_SENT_JS = """
const done = arguments[arguments.length - 1];
const pc = window.facefuse.pc;
if (!pc) { done(null); return; }
pc.getStats().then((report) => {
  let sent = 0;
  report.forEach((s) => { if (s.type === "outbound-rtp" && s.kind === "video") sent += s.framesSent || 0; });
  done(sent);
});
"""


def frames_sent(driver) -> int:
    sent = driver.execute_async_script(FRAMES_SENT_JS)
    assert sent is not None, "the page has no peer connection"
    return sent


def test_the_publish_page_goes_live_over_whip_and_gets_the_swap_back(mesh_server: ServerProcess, tmp_path: Path):
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=30)
    profile = tmp_path / "profile"
    profile.mkdir()
    with chromium(chromium_flags(clip, profile)) as driver:
        page = go_live(driver, mesh_server.base_url, "studio-1", "grace_hopper.jpg")
        assert page["lastStatus"] == 201, page
        session_id = page["sessionId"]
        assert page["sessionUrl"] == f"/whip/studio-1/{session_id}", page
        assert [s["session_id"] for s in live_sessions(mesh_server)] == [session_id]

        # the camera keeps arriving: what the server counts in over 2 s is what the browser sent
        # in them (its own count, the reference), short of the few in flight at either end
        first_in, first_sent = frames_in(mesh_server, session_id), frames_sent(driver)
        time.sleep(2.0)
        second_in, second_sent = frames_in(mesh_server, session_id), frames_sent(driver)
        arrived, sent = second_in - first_in, second_sent - first_sent
        print(f"\nin 2 s the browser sent {sent} frames, the server took in {arrived}")
        assert sent > 0 and arrived >= 0.8 * sent, (arrived, sent)
        status, streams = http_json("GET", f"{mesh_server.base_url}/api/streams")
        assert (
            status == 200
            and {"stream": "studio-1", "live": True, "session_id": session_id}.items()
            <= next(s for s in streams["streams"] if s["stream"] == "studio-1").items()
        ), streams

        def swapped() -> tuple[float, float] | None:
            frames = driver.execute_script(VIDEO_GREY_JS)
            if not frames["local"] or not frames["remote"]:
                return None
            local = np.asarray(frames["local"]).reshape(48, 64)
            remote = np.asarray(frames["remote"]).reshape(48, 64)
            r = float(np.corrcoef(local.ravel(), remote.ravel())[0, 1])
            face = float(np.abs(remote - local)[6:30, 16:48].mean())  # upper middle: the face
            return (r, face) if face > 4 else None  # a passthrough measures 1-2 grey levels (codec noise)

        r, face = wait_for(swapped, 30, "the returned video shows a changed face", 0.5)
        print(f"local/remote correlation {r:.2f}, face change {face:.1f}")
        assert r > 0.6, "the same scene comes back (not inverted, not another picture)"
        shown = video_frame_rgb(driver, "remote-video")
        assert shown is not None
        to_source = float(identity(shown) @ identity(face_rgb("grace_hopper.jpg")))
        to_target = float(identity(shown) @ identity(face_rgb("obama.jpg")))
        print(f"shown face: SFace {to_source:.3f} to the source (Grace Hopper), {to_target:.3f} to the target (Obama)")
        assert to_source > to_target, "the returned video shows the source's identity"
        assert_media_on_loopback(driver)

        driver.find_element("id", "stop").click()
        wait_for(lambda: not live_sessions(mesh_server), 5, "no live session after Stop")
        wait_for(lambda: driver.execute_script("return document.body.dataset.state;") == "stopped", 5, "page stopped")
        assert driver.execute_script("return window.facefuse.pc;") is None
        assert alert_text(driver).strip() == ""
        status, snapshot = http_json("GET", f"{mesh_server.base_url}/api/sessions/{session_id}")
        assert status == 404 or snapshot["close_reason"], snapshot
        # ended by the page's DELETE, not by its peer connection going away
        deletes = [r for r in mesh_server.requests("/whip/") if r[0] == "DELETE" and r[1].endswith(session_id)]
        assert deletes == [("DELETE", f"/whip/studio-1/{session_id}", 200)], deletes
        reason = mesh_server.closing_reason(session_id)
        print(f"closed by: {reason}")
        assert reason == "ended by its WHIP client", reason


def test_a_publish_the_server_refuses_is_said_on_the_page(mesh_server: ServerProcess, tmp_path: Path):
    """The server's 404 for an unknown face is shown as the page's error, with the camera closed."""
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=2)
    profile = tmp_path / "profile"
    profile.mkdir()
    with chromium(chromium_flags(clip, profile)) as driver:
        before = {session["session_id"] for session in live_sessions(mesh_server)}
        driver.get(f"{mesh_server.base_url}/publish")
        driver.execute_script("window.facefuse.faceId = 'no-such-face';")  # as if the server lost it
        driver.find_element("id", "go-live").click()
        wait_for(lambda: driver.execute_script("return document.body.dataset.state;") == "error", 15, "error state")
        assert driver.execute_script("return window.facefuse.lastStatus;") == 404
        assert "face_not_found" in alert_text(driver), alert_text(driver)
        assert driver.execute_script("return window.facefuse.pc;") is None
        assert {session["session_id"] for session in live_sessions(mesh_server)} <= before, "no session was made"


def test_a_session_the_server_ends_is_said_on_the_page(mesh_server: ServerProcess, tmp_path: Path):
    """WHIP has no channel for the server to say it ended a session (here: deleted through the
    API, as when another publisher takes the name); the page finds out and says so."""
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=2)
    profile = tmp_path / "profile"
    profile.mkdir()
    with chromium(chromium_flags(clip, profile)) as driver:
        page = go_live(driver, mesh_server.base_url, "studio-2", None)
        status, _ = http_json("DELETE", f"{mesh_server.base_url}/api/sessions/{page['sessionId']}")
        assert status == 200
        wait_for(lambda: driver.execute_script("return document.body.dataset.state;") == "ended", 10, "ended state")
        assert "The stream ended" in alert_text(driver), alert_text(driver)
        assert driver.execute_script("return [window.facefuse.pc, window.facefuse.sessionUrl];") == [None, None]
        assert driver.find_element("id", "go-live").is_enabled()
