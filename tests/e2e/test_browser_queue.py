"""Issue #36: the camera page on a full node: it shows the user's place in line and the wait, their
own video comes back unprocessed meanwhile, and the swap starts by itself when a place frees."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from client.facefuse_client import FacefuseClient
from support.browser import (
    NUMBER,
    chromium,
    chromium_flags,
    face_path,
    http_json,
    served,
    text_of,
    wait_for,
    write_y4m,
)
from support.cluster_nodes import camera

pytestmark = pytest.mark.browser

ADMIN = "admin-key-for-the-queue-test"
# 4 ms a batch and 25 ms a frame: one 30 fps session fits at the 24 fps floor, a second does not.
ONE_SESSION_FITS = "fixed-cost:4:25"


def fps_out(driver) -> float:
    match = NUMBER.match(text_of(driver, "stat-fps-out"))
    return float(match.group(0)) if match else 0.0


class OtherUser:
    """An aiortc peer on its own thread and loop, holding the node's one place until told to leave."""

    def __init__(self, url: str, api_key: str) -> None:
        self.url = url
        self.api_key = api_key
        self.session_id: str | None = None
        self.processing = threading.Event()
        self._leave: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._run(),), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        self._loop, self._leave = asyncio.get_running_loop(), asyncio.Event()
        async with FacefuseClient(self.url, api_key=self.api_key) as client:
            session = await client.connect(camera(1))
            self.session_id = session.session_id
            while session.frames_received < 10:
                await asyncio.sleep(0.05)
            self.processing.set()
            await self._leave.wait()
            await client.request("DELETE", f"/api/sessions/{session.session_id}")
            await session.close()

    def leave(self) -> None:
        self._loop.call_soon_threadsafe(self._leave.set)
        self._thread.join(timeout=15)


def test_a_full_node_shows_the_place_in_line_then_starts_the_swap_by_itself(tmp_path: Path):
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=30)
    profile = tmp_path / "profile"
    profile.mkdir()
    with (
        served(tmp_path / "server.log", chain=ONE_SESSION_FITS, extra_args=("--admin-key", ADMIN)) as server,
        chromium(chromium_flags(clip, profile)) as driver,
    ):
        keys = {}
        for name in ("early", "late"):
            status, account = http_json(
                "POST",
                f"{server.base_url}/api/admin/accounts",
                body={"id": name, "tier": "paid", "balance": 1000},
                token=ADMIN,
            )
            assert status == 201, account
            keys[name] = account["api_key"]
        other = OtherUser(server.base_url, keys["early"])
        assert other.processing.wait(30), server.log_tail()
        driver.set_window_size(1280, 1100)
        driver.get(f"{server.base_url}/")
        driver.find_element("id", "api-key").send_keys(keys["late"])
        driver.find_element("id", "start").click()
        notice = wait_for(lambda: "in line" in text_of(driver, "capacity") and text_of(driver, "capacity"), 20, "place")
        assert "number 1 in line" in notice and "You are next" in notice, notice
        assert "waiting in line" in text_of(driver, "status")  # not "processing" while it waits
        session_id = driver.execute_script("return document.body.dataset.sessionId || null;")
        # its own video comes back meanwhile: decoded by the page, not processed, not charged
        wait_for(lambda: fps_out(driver) > 5, 20, "the video back")
        status, waiting = http_json("GET", f"{server.base_url}/api/sessions/{session_id}", token=keys["late"])
        assert status == 200 and waiting["capacity"]["queued"] and waiting["capacity"]["position"] == 1, waiting
        assert waiting["frames_processed"] == 0 and waiting["frames_waiting"] > 0, waiting
        status, health = http_json("GET", f"{server.base_url}/healthz")
        assert health["capacity"]["waiting"] == 1 and health["capacity"]["fits_more"]["480p"] == 0, health
        driver.save_screenshot(str(tmp_path / "camera-page-queued.png"))
        print(f"\nscreenshot: {tmp_path / 'camera-page-queued.png'}\nshown: {notice!r}")

        # the operator's dashboard, in another tab, shows the line
        camera_page = driver.current_window_handle
        driver.switch_to.new_window("tab")
        driver.get(f"{server.base_url}/dashboard")
        driver.find_element("id", "key").send_keys(ADMIN)
        driver.find_element("css selector", "#sign-in-form button[type=submit]").click()
        line = wait_for(lambda: session_id in text_of(driver, "node-line") and text_of(driver, "node-line"), 15, "line")
        assert line.startswith("1 waiting of at most 16"), line
        room = text_of(driver, "node-capacity")
        assert room.startswith("1 processed at ") and "0 × 480p" in room, room
        print(f"dashboard: {line!r}; {room!r}")
        driver.close()
        driver.switch_to.window(camera_page)

        other.leave()
        started = wait_for(
            lambda: "swap has started" in text_of(driver, "capacity") and text_of(driver, "capacity"), 5, "the start"
        )
        print(f"then: {started!r}")

        def processed() -> int:
            return http_json("GET", f"{server.base_url}/api/sessions/{session_id}", token=keys["late"])[1][
                "frames_processed"
            ]

        wait_for(lambda: processed() > 10, 10, "processed frames")
