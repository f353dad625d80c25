"""The server's default chain swaps faces live in the page: Chromium's camera (a still y4m of
Obama) comes back with Grace Hopper's face (by SFace identity), the scene around it untouched, and
the "AI" badge. (Not Biden's: the mesh swap moves Biden onto Obama too little for SFace to tell,
at camera framing even without a codec; bench/results/2026-11-30-identity-at-camera-framing.md.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from test_face_swap_server import identity  # SFace identity of the largest face

from support.browser import (
    VIDEO_GREY_JS,
    ServerProcess,
    alert_text,
    chromium,
    chromium_flags,
    face_path,
    remote_frame_rgb,
    served,
    wait_for,
    write_y4m,
)
from support.server import face_rgb

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with served(
        tmp_path_factory.mktemp("swap") / "server.log", chain="mesh", ready_timeout=60, stop_timeout=10
    ) as process:
        yield process


def test_the_page_shows_the_swapped_face(default_server: ServerProcess, tmp_path: Path) -> None:
    clip = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=30)
    profile = tmp_path / "profile"
    profile.mkdir()
    with chromium(chromium_flags(clip, profile)) as driver:
        driver.get(f"{default_server.base_url}/")
        driver.find_element("id", "face-file").send_keys(str(face_path("grace_hopper.jpg")))
        wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 20, "face analysed and stored")
        driver.find_element("id", "start").click()

        def swapped() -> tuple[float, float, float] | None:
            frames = driver.execute_script(VIDEO_GREY_JS)
            if not frames["local"] or not frames["remote"]:
                return None
            local = np.asarray(frames["local"]).reshape(48, 64)
            remote = np.asarray(frames["remote"]).reshape(48, 64)
            r = float(np.corrcoef(local.ravel(), remote.ravel())[0, 1])
            face = float(np.abs(remote - local)[6:30, 16:48].mean())  # upper middle: the face
            badge = float(np.abs(local - remote)[:4, 59:].mean())  # top right: the badge's plate and letters
            # a passthrough measures 1-2 grey levels here (codec noise)
            return (r, face, badge) if face > 4 and badge > 8 else None

        r, face, badge = wait_for(swapped, 30, "remote video shows a swapped face and the badge", 0.5)
        print(f"local/remote correlation {r:.2f}, face change {face:.1f}, badge change {badge:.1f}")
        assert r > 0.6, "the same scene comes back (not inverted, not another picture)"
        assert alert_text(driver).strip() == ""

        # whose face it is: SFace identity of the face the page shows, against both people
        shown = remote_frame_rgb(driver)
        assert shown is not None  # its size is the browser's to choose (it scales down under load)
        to_source = float(identity(shown) @ identity(face_rgb("grace_hopper.jpg")))
        to_target = float(identity(shown) @ identity(face_rgb("obama.jpg")))
        print(f"shown face: SFace {to_source:.3f} to the source (Grace Hopper), {to_target:.3f} to the target (Obama)")
        assert to_source > to_target, "the page shows the source's identity"
