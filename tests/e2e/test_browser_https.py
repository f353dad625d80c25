"""The camera page over https in a real headless Chromium (issue #28's TLS test): `facefuse serve
--tls-cert --tls-key` with a certificate the test's own CA signs, the page reached by a name that is
not loopback, so that only https makes it a secure context (http://127.0.0.1 and http://localhost
are secure contexts by themselves; http://facefuse.test is not, and has no camera). Chromium maps
the name to 127.0.0.1 and trusts the certificate's key alone (--ignore-certificate-errors-spki-list,
in this test only); the fake camera streams and the processed (inverted) video comes back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.browser import (
    ServerProcess,
    alert_text,
    assert_media_on_loopback,
    assert_remote_frames_keep_coming,
    chromium,
    chromium_flags,
    face_path,
    served,
    started_session,
    stop_and_see_the_session_end,
    wait_for,
    wait_remote_inverted,
    write_y4m,
)
from support.certificates import MadeCertificates, make_certificates

pytestmark = pytest.mark.browser

NAME = "facefuse.test"  # a reserved name (RFC 6761) that resolves nowhere but through Chromium's rule here


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> MadeCertificates:
    return make_certificates(tmp_path_factory.mktemp("tls"), names=(NAME, "127.0.0.1"))


@pytest.fixture(scope="module")
def server(certificates: MadeCertificates, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tls = ("--tls-cert", str(certificates.cert_file), "--tls-key", str(certificates.key_file))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSL_CERT_FILE", str(certificates.ca_file))  # the test's urllib calls trust its CA
        log = tmp_path_factory.mktemp("server") / "server.log"
        with served(log, chain="invert", extra_args=(*tls, "--public-host", NAME), scheme="https") as process:
            yield process


def test_the_camera_page_works_over_https(
    server: ServerProcess, certificates: MadeCertificates, tmp_path: Path
) -> None:
    camera = write_y4m(face_path("obama.jpg"), tmp_path / "obama.y4m", frames=30)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    flags = [
        *chromium_flags(camera, profile),
        f"--host-resolver-rules=MAP {NAME} 127.0.0.1",
        f"--ignore-certificate-errors-spki-list={certificates.spki_sha256_base64()}",
    ]
    with chromium(flags) as driver:
        driver.get(f"https://{NAME}:{server.port}/")
        page = driver.execute_script(
            "return {protocol: location.protocol, secure: window.isSecureContext, "
            "camera: !!(navigator.mediaDevices && navigator.mediaDevices.getUserMedia)};"
        )
        assert page == {"protocol": "https:", "secure": True, "camera": True}, page

        driver.find_element("id", "face-file").send_keys(str(face_path("biden.jpg")))
        face_id = wait_for(lambda: driver.execute_script("return window.facefuse.faceId;"), 10, "face upload")
        assert alert_text(driver).strip() == ""
        started_session(driver, server, face_id)
        assert_remote_frames_keep_coming(driver)

        wait_remote_inverted(driver)  # the remote picture is the processed (inverted) local one
        assert_media_on_loopback(driver)
        stop_and_see_the_session_end(driver, server)
