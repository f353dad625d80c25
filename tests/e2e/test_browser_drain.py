"""The camera page while its server drains for a restart (signaling/drain.py): it says so and
how long the session has, then why it ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.browser import (
    NUMBER,
    alert_text,
    chromium,
    chromium_flags,
    face_path,
    http_json,
    served,
    text_of,
    wait_for,
    write_y4m,
)

pytestmark = pytest.mark.browser

ADMIN = "admin-key-for-the-drain-test"


def fps_out(driver) -> float:
    match = NUMBER.match(text_of(driver, "stat-fps-out"))
    return float(match.group(0)) if match else 0.0


def test_the_page_says_the_server_restarts_then_that_the_session_ended(tmp_path: Path):
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=30)
    profile = tmp_path / "profile"
    profile.mkdir()
    args = ("--admin-key", ADMIN, "--drain-timeout", "4")
    with (
        served(tmp_path / "server.log", chain="invert", extra_args=args) as server,
        chromium(chromium_flags(clip, profile)) as driver,
    ):
        status, account = http_json(
            "POST",
            f"{server.base_url}/api/admin/accounts",
            body={"id": "dee", "tier": "paid", "balance": 100},
            token=ADMIN,
        )
        assert status == 201, account
        driver.get(f"{server.base_url}/")
        driver.find_element("id", "api-key").send_keys(account["api_key"])
        driver.find_element("id", "start").click()
        wait_for(lambda: fps_out(driver) > 0, 30, "the session's video")

        status, drained = http_json("POST", f"{server.base_url}/api/admin/nodes/self/drain", token=ADMIN)
        assert status == 202, drained
        restarting = wait_for(
            lambda: "restarting" in text_of(driver, "status") and text_of(driver, "status"), 5, "the drain notice"
        )
        assert "ends within 4 s" in restarting, restarting
        ended = wait_for(lambda: "shutting down" in alert_text(driver) and alert_text(driver), 15, "the end")
        print(f"\nshown: {restarting!r}, then {ended!r}")
