"""The camera page shows what the server found weak in the chosen face photo next to it, and a
photo the server refuses as it shows any refused upload: in headless Chromium against a real
`mesh` server process, with real photos (tests/support/sdist_photos.py, photos.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.browser import (
    ServerProcess,
    alert_text,
    chromium,
    chromium_flags,
    face_path,
    served,
    text_of,
    wait_for,
    write_y4m,
)
from support.photos import encode_still
from support.sdist_photos import grid_tile, photo_path

pytestmark = pytest.mark.browser

SHOWN_WARNINGS_JS = """
const list = document.getElementById("face-warnings");
if (list.hidden || list.getBoundingClientRect().height === 0) return null;
return Array.from(list.querySelectorAll("li")).map((item) => item.textContent);
"""


@pytest.fixture(scope="module")
def mesh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with served(
        tmp_path_factory.mktemp("warnings") / "server.log", chain="mesh", ready_timeout=60, stop_timeout=10
    ) as process:
        yield process


def test_the_page_shows_a_photos_warnings_and_a_refusal(mesh_server: ServerProcess, tmp_path: Path) -> None:
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=5)
    profile = tmp_path / "profile"
    profile.mkdir()
    hidden_face = tmp_path / "hand-over-mouth.png"  # facetorch's hand over the mouth and nose
    hidden_face.write_bytes(encode_still(grid_tile(3, 3), "png"))
    with chromium(chromium_flags(clip, profile)) as driver:
        driver.get(f"{mesh_server.base_url}/")
        chooser = driver.find_element("id", "face-file")
        assert driver.execute_script(SHOWN_WARNINGS_JS) is None, "no photo, no warnings"

        chooser.send_keys(str(photo_path("45-m7-di-ph.jpg")))  # a head turned about 45 degrees
        shown = wait_for(lambda: driver.execute_script(SHOWN_WARNINGS_JS), 60, "the turned head's warning shown")
        print(f"\nshown next to the face: {shown}")
        assert any(line.startswith("The face is turned about") for line in shown), shown
        assert driver.execute_script("return window.facefuse.faceId;"), "the photo is used all the same"
        assert text_of(driver, "face-state").startswith("Face ready")
        assert alert_text(driver).strip() == "", "a warning is not an error"

        chooser.clear()
        chooser.send_keys(str(face_path("obama.jpg")))  # frontal, sharp, evenly lit
        wait_for(
            lambda: "obama.jpg" in text_of(driver, "face-state") and "ready" in text_of(driver, "face-state"),
            60,
            "the frontal photo taken",
        )
        assert driver.execute_script(SHOWN_WARNINGS_JS) is None, "the earlier photo's warnings are gone"

        chooser.clear()
        chooser.send_keys(str(hidden_face))
        alert = wait_for(lambda: alert_text(driver).strip(), 60, "the refusal shown")
        print(f"shown as an error: {alert}")
        assert "face_occluded" in alert and "most of the face is hidden" in alert, alert
        assert "was not accepted" in text_of(driver, "face-state")
        assert driver.execute_script(SHOWN_WARNINGS_JS) is None
