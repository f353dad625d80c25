"""The camera page gives its RTCPeerConnection the server's STUN/TURN servers (GET
/api/ice-servers), so that a browser behind a strict NAT can reach the server through TURN."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.browser import NUMBER, chromium, chromium_flags, face_path, served, text_of, wait_for, write_y4m
from support.server import free_port

pytestmark = pytest.mark.browser


def fps_out(driver) -> float:
    match = NUMBER.match(text_of(driver, "stat-fps-out"))
    return float(match.group(0)) if match else 0.0


def test_the_page_uses_the_servers_stun_and_turn_servers(tmp_path: Path):
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=30)
    profile = tmp_path / "profile"
    profile.mkdir()
    stun = f"stun:127.0.0.1:{free_port()}"  # nothing answers there: host candidates still connect
    with (
        served(tmp_path / "server.log", chain="invert", extra_args=("--ice-server", stun)) as server,
        chromium(chromium_flags(clip, profile)) as driver,
    ):
        driver.get(f"{server.base_url}/")
        driver.find_element("id", "start").click()
        wait_for(lambda: fps_out(driver) > 0, 40, "the session's video")
        configured = driver.execute_script("return window.facefuse.pc.getConfiguration().iceServers;")
        assert [server["urls"] for server in configured] in ([stun], [[stun]]), configured
