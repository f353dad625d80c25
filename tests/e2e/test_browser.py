"""End to end with a real headless Chromium: the page at / uploads a face, sends the fake camera
(a still y4m of a real face) to `facefuse serve --chain invert`, and shows the processed video and
the live numbers. The invert chain makes the processed frame the colour negative of the camera's,
so the remote picture must correlate strongly negatively with the local one."""

from __future__ import annotations

import contextlib
import glob
import itertools
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.select import Select

from support.browser import (
    BREAK_ICE_JS,
    INBOUND_VIDEO_STATS_JS,
    ServerProcess,
    alert_text,
    assert_live_numbers_shown,
    assert_media_on_loopback,
    assert_remote_frames_keep_coming,
    chromium,
    chromium_flags,
    face_path,
    http_json,
    live_sessions,
    served,
    started_session,
    stop_and_see_the_session_end,
    text_of,
    wait_for,
    wait_remote_inverted,
    write_y4m,
)
from support.photos import face_rgb

pytestmark = pytest.mark.browser

# ---- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def camera_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("camera")
    return write_y4m(face_path("obama.jpg"), directory / "obama.y4m", frames=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with served(tmp_path_factory.mktemp("server") / "server.log", chain="invert") as process:
        yield process


OpenBrowser = Callable[..., WebDriver]


@pytest.fixture
def browser(camera_clip: Path, tmp_path: Path) -> Iterator[OpenBrowser]:
    """A factory: browser(edit=None) opens a headless Chromium with the standard flags (or
    `edit(flags)`), on the fake camera clip and a fresh profile; every one is quit at teardown."""
    counter = itertools.count()
    with contextlib.ExitStack() as stack:

        def open_browser(edit: Callable[[list[str]], list[str]] | None = None) -> WebDriver:
            profile = tmp_path / f"chromium-profile-{next(counter)}"
            profile.mkdir()
            flags = chromium_flags(camera_clip, profile)
            if edit is not None:
                flags = edit(flags)
            return stack.enter_context(chromium(flags))

        yield open_browser


# ---- tests -----------------------------------------------------------------------------------


def test_camera_to_server_and_back_shows_processed_video_and_stats(server: ServerProcess, browser: OpenBrowser) -> None:
    driver = browser()
    driver.get(f"{server.base_url}/")

    driver.find_element("id", "face-file").send_keys(str(face_path("biden.jpg")))
    face_id = wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 10, "face upload")
    assert alert_text(driver).strip() == ""

    session_id = started_session(driver, server, face_id)
    assert_remote_frames_keep_coming(driver)

    wait_remote_inverted(driver)  # the remote picture is the processed (inverted) local one

    assert_live_numbers_shown(driver, session_id)
    stop_and_see_the_session_end(driver, server)


def test_media_stays_on_loopback(server: ServerProcess, browser: OpenBrowser) -> None:
    """The network rule (CONTRIBUTING.md): media stays on loopback (see assert_media_on_loopback)."""
    driver = browser()
    driver.get(f"{server.base_url}/")
    driver.find_element("id", "start").click()
    wait_for(
        lambda: (driver.execute_async_script(INBOUND_VIDEO_STATS_JS) or {}).get("framesDecoded"),
        15,
        "first decoded remote frame",
    )
    time.sleep(2.0)  # Chromium may switch pairs after the first one connects
    assert_media_on_loopback(driver)
    driver.find_element("id", "stop").click()
    wait_for(lambda: not live_sessions(server), 5, "no live session after Stop")


def test_failed_connection_shows_a_message_and_ends_the_session(server: ServerProcess, browser: OpenBrowser) -> None:
    driver = browser()
    driver.get(f"{server.base_url}/")
    driver.execute_script(BREAK_ICE_JS)
    driver.find_element("id", "start").click()
    wait_for(lambda: driver.execute_script("return window.facefuse.sessionId;"), 15, "session id")
    # Chromium gives up on ICE about 15 s after the answer.
    shown = wait_for(lambda: alert_text(driver).strip(), 30, "an error in role=alert", 0.25)
    assert "connection to the server failed" in shown.lower(), shown
    assert "failed" in text_of(driver, "status").lower()
    # said once on screen: the alert box, not the status line above it as well
    assert not driver.find_element("id", "status").is_displayed()
    assert driver.execute_script("return window.facefuse.pc;") is None
    assert driver.find_element("id", "start").is_enabled()
    wait_for(lambda: not live_sessions(server), 5, "the failed session was ended")


def test_rejected_upload_shows_the_servers_message(server: ServerProcess, browser: OpenBrowser, tmp_path: Path) -> None:
    not_an_image = tmp_path / "notes.txt"
    not_an_image.write_text("this is not a photo\n")
    # What the server says about these bytes, to find it on the page.
    request = urllib.request.Request(
        f"{server.base_url}/api/faces",
        data=not_an_image.read_bytes(),
        headers={"Content-Type": "text/plain"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as rejected:
        urllib.request.urlopen(request, timeout=5)
    with rejected.value as response:
        status, message = response.code, json.loads(response.read())["error"]["message"]
    assert status == 415

    driver = browser()
    driver.get(f"{server.base_url}/")
    driver.find_element("id", "face-file").send_keys(str(not_an_image))
    shown = wait_for(lambda: alert_text(driver).strip(), 10, "an error in role=alert")
    assert message in shown
    assert "415" in shown
    assert driver.execute_script("return window.facefuse.faceId;") is None

    # the same with the reference photo, then a good one: the error leaves the status line too
    Select(driver.find_element("id", "swap-mode")).select_by_value("reference")
    driver.find_element("id", "reference-file").send_keys(str(not_an_image))
    wait_for(lambda: "415" in alert_text(driver), 10, "the reference photo's 415")
    driver.find_element("id", "reference-file").send_keys(str(face_path("biden.jpg")))
    wait_for(lambda: driver.execute_script("return window.facefuse.referenceId;"), 10, "the good photo uploaded")
    assert alert_text(driver).strip() == ""
    assert driver.execute_script("return document.getElementById('status').dataset.kind;") != "error", text_of(
        driver, "status"
    )
    assert driver.find_element("id", "status").is_displayed()


def test_a_face_the_server_no_longer_has_is_asked_for_again(server: ServerProcess, browser: OpenBrowser) -> None:
    """A photo uploaded before a server restart (or deleted elsewhere) is gone: Start says so and
    clears the choice, so choosing the file again uploads it again."""
    driver = browser()
    driver.get(f"{server.base_url}/")
    driver.find_element("id", "face-file").send_keys(str(face_path("biden.jpg")))
    face_id = wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 10, "face upload")
    assert http_json("DELETE", f"{server.base_url}/api/faces/{face_id}")[0] == 200
    driver.find_element("id", "start").click()
    shown = wait_for(lambda: alert_text(driver).strip(), 15, "an error in role=alert")
    assert "404" in shown, shown
    assert "choose it again" in text_of(driver, "face-state")
    assert driver.execute_script("return window.facefuse.faceId;") is None
    assert driver.execute_script("return document.getElementById('face-file').value;") == ""
    driver.find_element("id", "face-file").send_keys(str(face_path("biden.jpg")))
    again = wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 10, "uploaded again")
    session_id = started_session(driver, server, again)
    assert session_id
    stop_and_see_the_session_end(driver, server)


def test_offer_refused_by_server_shows_its_message(server: ServerProcess, browser: OpenBrowser) -> None:
    driver = browser()
    driver.get(f"{server.base_url}/")
    # A face id the server never issued: the offer is answered 404 with a JSON error.
    driver.execute_script("window.facefuse.faceId = 'no-such-face';")
    driver.find_element("id", "start").click()
    shown = wait_for(lambda: alert_text(driver).strip(), 15, "an error in role=alert")
    assert "404" in shown, shown
    assert "connection failed" in shown.lower(), shown
    assert driver.execute_script("return window.facefuse.pc;") is None
    assert driver.find_element("id", "start").is_enabled()
    assert not live_sessions(server)


def test_camera_denied_shows_a_message(server: ServerProcess, browser: OpenBrowser) -> None:
    def deny_camera(flags: list[str]) -> list[str]:
        return ["--use-fake-ui-for-media-stream=deny" if f == "--use-fake-ui-for-media-stream" else f for f in flags]

    driver = browser(deny_camera)
    driver.get(f"{server.base_url}/")
    driver.find_element("id", "start").click()
    shown = wait_for(lambda: alert_text(driver).strip(), 10, "an error in role=alert")
    assert "denied" in shown.lower(), shown
    assert "denied" in text_of(driver, "status").lower()
    assert driver.find_element("id", "start").is_enabled()
    assert not live_sessions(server)


@pytest.mark.skipif(bool(glob.glob("/dev/video*")), reason="this machine has a real camera")
def test_no_camera_shows_a_message(server: ServerProcess, browser: OpenBrowser) -> None:
    def no_fake_camera(flags: list[str]) -> list[str]:
        return [f for f in flags if not f.startswith(("--use-fake-device-for-media-stream", "--use-file-for-fake"))]

    driver = browser(no_fake_camera)
    driver.get(f"{server.base_url}/")
    driver.find_element("id", "start").click()
    shown = wait_for(lambda: alert_text(driver).strip(), 10, "an error in role=alert")
    assert "no camera" in shown.lower(), shown
    assert driver.find_element("id", "start").is_enabled()
    assert not live_sessions(server)


def test_a_face_chosen_mid_stream_is_swapped_to_at_once(server: ServerProcess, browser: OpenBrowser) -> None:
    """Choosing another photo while the camera runs switches the session's face (the data-channel
    command), without a restart; clearing the choice stops the swap."""
    driver = browser()
    driver.get(f"{server.base_url}/")
    file_input = driver.find_element("id", "face-file")
    file_input.send_keys(str(face_path("biden.jpg")))
    first = wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 10, "first face upload")
    session_id = started_session(driver, server, first)
    assert_remote_frames_keep_coming(driver)

    def session_face() -> str | None:
        status, snapshot = http_json("GET", f"{server.base_url}/api/sessions/{session_id}")
        assert status == 200, snapshot
        return snapshot["face_id"]

    file_input.send_keys(str(face_path("grace_hopper.jpg")))  # a new choice replaces the old
    second = wait_for(
        lambda: (lambda f: f if f and f != first else None)(driver.execute_script("return window.facefuse.faceId;")),
        10,
        "second face upload",
    )
    wait_for(lambda: session_face() == second, 5, "the session swaps to the new face")
    wait_for(lambda: "swapping now" in text_of(driver, "face-state"), 5, "the page says the new face is in use")
    # the replaced photo no longer takes a place in the server's face library
    wait_for(lambda: http_json("GET", f"{server.base_url}/api/faces/{first}")[0] == 404, 5, "the first face deleted")
    assert http_json("GET", f"{server.base_url}/api/faces/{second}")[0] == 200
    assert driver.execute_script("return window.facefuse.sessionId;") == session_id, "the same session, not a restart"

    driver.execute_script("arguments[0].value = ''; arguments[0].dispatchEvent(new Event('change'));", file_input)
    wait_for(lambda: session_face() is None, 5, "no face: the swap stops")
    assert alert_text(driver).strip() == ""
    stop_and_see_the_session_end(driver, server)


# Holds the page's photo uploads until the test lets each go, in order (the real server answers
# each one once let go): a slow upload, made deterministic.
HOLD_PHOTO_UPLOADS_JS = """
window.heldUploads = [];
const realFetch = window.fetch.bind(window);
window.fetch = (url, init) => {
  if (url === "/api/faces" && init && init.method === "POST") {
    return new Promise((resolve, reject) => {
      window.heldUploads.push(() => realFetch(url, init).then(resolve, reject));
    });
  }
  return realFetch(url, init);
};
window.letUploadGo = () => window.heldUploads.shift()();
window.letNewestUploadGo = () => window.heldUploads.pop()();
"""


def held_uploads(driver: WebDriver) -> int:
    return driver.execute_script("return window.heldUploads.length;")


def start_waiting_on_two_held_photos(server: ServerProcess, browser: OpenBrowser) -> WebDriver:
    """A page whose Start waits on biden.jpg's upload, replaced meanwhile by grace_hopper.jpg's:
    both requests held (window.letUploadGo, letNewestUploadGo)."""
    driver = browser()
    driver.get(f"{server.base_url}/")
    driver.execute_script(HOLD_PHOTO_UPLOADS_JS)
    file_input = driver.find_element("id", "face-file")
    file_input.send_keys(str(face_path("biden.jpg")))
    wait_for(lambda: held_uploads(driver) == 1, 5, "the first upload held")
    driver.find_element("id", "start").click()
    wait_for(lambda: "Waiting for the face upload" in text_of(driver, "status"), 5, "Start waiting for the upload")
    file_input.send_keys(str(face_path("grace_hopper.jpg")))
    wait_for(lambda: held_uploads(driver) == 2, 5, "the second upload held")
    return driver


def test_a_photo_chosen_while_start_waits_is_the_one_used(server: ServerProcess, browser: OpenBrowser) -> None:
    """Start waits for the face upload; a newer choice made meanwhile replaces it. The first upload's
    end must not start the session as if the chosen photo had been refused."""
    driver = start_waiting_on_two_held_photos(server, browser)
    driver.execute_script("window.letUploadGo();")  # the replaced photo's upload ends first
    time.sleep(1.0)
    assert alert_text(driver).strip() == "", "no error: the newer photo is still on its way"
    assert driver.execute_script("return window.facefuse.pc;") is None, "no session before the chosen photo is in"
    driver.execute_script("window.letUploadGo();")
    session_id = wait_for(
        lambda: driver.execute_script("return document.body.dataset.sessionId || null;"), 15, "session"
    )
    face_id = driver.execute_script("return window.facefuse.faceId;")
    status, snapshot = http_json("GET", f"{server.base_url}/api/sessions/{session_id}")
    assert status == 200 and face_id and snapshot["face_id"] == face_id, snapshot
    status, face = http_json("GET", f"{server.base_url}/api/faces/{face_id}")
    height, width = face_rgb("grace_hopper.jpg").shape[:2]
    assert status == 200 and (face["width"], face["height"]) == (width, height), "the newer photo's face"
    assert alert_text(driver).strip() == ""
    stop_and_see_the_session_end(driver, server)


def test_a_newer_photo_does_not_wait_for_the_one_it_replaced(server: ServerProcess, browser: OpenBrowser) -> None:
    """The replaced photo's upload may hang: once the newer one is in, the session starts with it."""
    driver = start_waiting_on_two_held_photos(server, browser)
    driver.execute_script("window.letNewestUploadGo();")  # the first stays held: a stalled request
    session_id = wait_for(
        lambda: driver.execute_script("return document.body.dataset.sessionId || null;"), 15, "session"
    )
    face_id = driver.execute_script("return window.facefuse.faceId;")
    status, face = http_json("GET", f"{server.base_url}/api/faces/{face_id}")
    height, width = face_rgb("grace_hopper.jpg").shape[:2]
    assert status == 200 and (face["width"], face["height"]) == (width, height), "the newer photo's face"
    status, snapshot = http_json("GET", f"{server.base_url}/api/sessions/{session_id}")
    assert status == 200 and snapshot["face_id"] == face_id, snapshot
    driver.execute_script("window.letUploadGo();")  # the replaced one ends at last: it changes nothing
    time.sleep(1.0)
    assert driver.execute_script("return window.facefuse.faceId;") == face_id
    assert alert_text(driver).strip() == ""
    stop_and_see_the_session_end(driver, server)


def test_stop_cancels_a_start_that_waits_for_an_upload(server: ServerProcess, browser: OpenBrowser) -> None:
    driver = browser()
    driver.get(f"{server.base_url}/")
    driver.execute_script(HOLD_PHOTO_UPLOADS_JS)
    driver.find_element("id", "face-file").send_keys(str(face_path("biden.jpg")))
    wait_for(lambda: held_uploads(driver) == 1, 5, "the upload held")
    driver.find_element("id", "start").click()
    wait_for(lambda: "Waiting for the face upload" in text_of(driver, "status"), 5, "Start waiting for the upload")
    stop = driver.find_element("id", "stop")
    assert stop.is_enabled(), "Stop is the way out of a wait"
    stop.click()
    wait_for(lambda: "cancelled" in text_of(driver, "status"), 5, "the page says Start was cancelled")
    assert driver.find_element("id", "start").is_enabled() and not stop.is_enabled()
    driver.execute_script("window.letUploadGo();")
    wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 10, "the upload still ends")
    time.sleep(1.0)
    assert driver.execute_script("return window.facefuse.pc;") is None, "no session after a cancelled Start"
    assert not live_sessions(server)
    assert alert_text(driver).strip() == ""


def test_which_faces_to_swap_is_chosen_on_the_page(server: ServerProcess, browser: OpenBrowser) -> None:
    """The page's choice of faces goes into the offer: 'only one person' needs a photo of them (a
    clear message without one); with it, the session carries the reference photo's id. Changed
    during a session, the choice goes to it at once."""
    driver = browser()
    driver.get(f"{server.base_url}/")
    assert not driver.find_element("id", "reference-file").is_displayed()
    Select(driver.find_element("id", "swap-mode")).select_by_value("reference")
    assert driver.find_element("id", "reference-file").is_displayed()

    driver.find_element("id", "start").click()
    shown = wait_for(lambda: alert_text(driver).strip(), 10, "an error in role=alert")
    assert "reference photo" in shown.lower(), shown
    assert driver.execute_script("return window.facefuse.pc;") is None and not live_sessions(server)

    driver.find_element("id", "reference-file").send_keys(str(face_path("obama2.jpg")))
    reference = wait_for(lambda: driver.execute_script("return window.facefuse.referenceId;"), 10, "reference upload")
    session_id = started_session(driver, server, None)
    status, snapshot = http_json("GET", f"{server.base_url}/api/sessions/{session_id}")
    assert status == 200 and snapshot["options"] == {"swap": "reference", "reference_face_id": reference}, snapshot
    stop_and_see_the_session_end(driver, server)

    Select(driver.find_element("id", "swap-mode")).select_by_value("largest")
    session_id = started_session(driver, server, None)
    status, snapshot = http_json("GET", f"{server.base_url}/api/sessions/{session_id}")
    assert status == 200 and snapshot["options"] == {"swap": "largest"}, snapshot

    # changed while the camera runs: the session takes it at once (set_swap), no restart
    def options_now() -> dict:
        return http_json("GET", f"{server.base_url}/api/sessions/{session_id}")[1]["options"]

    Select(driver.find_element("id", "swap-mode")).select_by_value("all")
    wait_for(lambda: options_now() == {"swap": "all"}, 5, "options changed")
    wait_for(lambda: text_of(driver, "swap-mode-hint") == "Now swapping every face.", 5, "the page says so")
    Select(driver.find_element("id", "swap-mode")).select_by_value("reference")  # its photo is still there
    wait_for(lambda: options_now() == {"swap": "reference", "reference_face_id": reference}, 5, "reference")
    assert driver.execute_script("return window.facefuse.sessionId;") == session_id and alert_text(driver).strip() == ""

    # another reference photo: the session takes it, and the replaced one leaves the face library
    driver.find_element("id", "reference-file").send_keys(str(face_path("biden.jpg")))
    second = wait_for(
        lambda: (lambda r: r if r and r != reference else None)(
            driver.execute_script("return window.facefuse.referenceId;")
        ),
        10,
        "second reference upload",
    )
    wait_for(lambda: options_now() == {"swap": "reference", "reference_face_id": second}, 5, "the new reference")
    wait_for(
        lambda: http_json("GET", f"{server.base_url}/api/faces/{reference}")[0] == 404, 5, "the replaced photo deleted"
    )
    assert http_json("GET", f"{server.base_url}/api/faces/{second}")[0] == 200
    stop_and_see_the_session_end(driver, server)
