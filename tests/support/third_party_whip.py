"""A WHIP client we did not write, for the interoperability tests: medooze's whip.js (npm package
`whip-whep`, by a co-author of the WHIP RFC) publishing headless Chromium's fake camera.

Why not Debian's simple-whip-client (GStreamer webrtcbin), which issue #25 asked for: on Debian 12
it aborts at start ("libsoup2 symbols detected"): it links libsoup2, while webrtcbin's own chain,
libgstwebrtc -> libgstwebrtcnice -> libnice -> libgupnp-igd -> libgupnp-1.6, brings libsoup3, so no
plugin path leaves the offender out. Past that, libnice never gathers loopback candidates
(nice_interfaces_get_local_ips(FALSE)) and the client has no option to add one, so its media could
not stay on 127.0.0.1 as the tests' rule asks.

whip.js is fetched with npm (`npm pack`, npm's own cache serves later runs), checked against the
SHA-512 the registry published for it, and run in the page as a module. The page is one of the
server's own (/healthz), so the client's requests are same-origin as a page served with the
server would make them."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.browser import chromium, chromium_flags, write_y4m

WHIP_WHEP_PACKAGE = "whip-whep@1.2.0"
# the registry's dist.integrity for that version (`npm view whip-whep@1.2.0 dist.integrity`)
WHIP_WHEP_SHA512 = "CP+Tht3O/N6QLebW5LxsNKgzFN5KX6WinLr1SLs74feagYu+Gqy+0dw48p5RQuE+FlrM4xyOlOdW2UOQwljImA=="


def whip_js_source(workdir: Path) -> str:
    """whip.js of the pinned whip-whep release, its tarball's SHA-512 checked."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            "npm is not installed (apt-get install npm, as tests/run.sh does); the third-party WHIP test needs it"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    packed = subprocess.run(
        [npm, "pack", WHIP_WHEP_PACKAGE, "--pack-destination", str(workdir), "--prefer-offline", "--silent"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert packed.returncode == 0, f"npm pack {WHIP_WHEP_PACKAGE} failed:\n{packed.stdout}\n{packed.stderr}"
    tarball = workdir / packed.stdout.strip().splitlines()[-1]
    digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    assert digest == WHIP_WHEP_SHA512, f"{tarball.name}: SHA-512 {digest}, expected {WHIP_WHEP_SHA512}"
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/whip.js")
        assert member is not None
        return member.read().decode()


# Loads whip.js as a module and publishes the camera with it, as its README does. fetch is wrapped
# only to record each request and its status for failure messages.
PUBLISH_JS = """
const [source, url, done] = arguments;
const log = window.whipLog = [];
const fetchAsIs = window.fetch;
window.fetch = async (resource, init = {}) => {
  try {
    const response = await fetchAsIs(resource, init);
    log.push(`${init.method || "GET"} ${resource} -> ${response.status}`);
    return response;
  } catch (error) {
    log.push(`${init.method || "GET"} ${resource} -> ${error}`);
    throw error;
  }
};
window.addEventListener("unhandledrejection", (event) => log.push(`unhandled rejection: ${event.reason}`));
(async () => {
  const module = await import(URL.createObjectURL(new Blob([source], {type: "text/javascript"})));
  const camera = await navigator.mediaDevices.getUserMedia({video: true});
  const pc = window.whipPc = new RTCPeerConnection({bundlePolicy: "max-bundle"});
  pc.addEventListener("connectionstatechange", () => log.push(`connection ${pc.connectionState}`));
  for (const track of camera.getTracks()) pc.addTransceiver(track, {direction: "sendonly"});
  const client = window.whipClient = new module.WHIPClient();
  await client.publish(pc, url);
  return String(client.resourceURL);
})().then((resource) => done({resource}), (error) => done({error: String(error)}));
"""

STOP_JS = """
const done = arguments[arguments.length - 1];
window.whipClient.stop().then(() => done(null), (error) => done(String(error)));
"""


@dataclass
class ThirdPartyWhipClient:
    """The publishing page; `resource` is the WHIP session's URL the client was given."""

    driver: Any
    resource: str
    camera_clip: Path  # what its camera shows (a y4m clip)

    def output(self) -> str:
        """What the client did: each request with its status, connection states, rejections."""
        lines = self.driver.execute_script("return window.whipLog || [];")
        return "\n".join(["whip.js:", *lines])

    def connection_state(self) -> str:
        return self.driver.execute_script("return window.whipPc ? window.whipPc.connectionState : 'none';")

    def stop(self) -> None:
        """whip.js's own stop(): closes its peer connection, then DELETEs the resource."""
        error = self.driver.execute_async_script(STOP_JS)
        assert error is None, f"stop() failed: {error}\n{self.output()}"


@contextlib.contextmanager
def whip_js_publisher(whip_url: str, photo: Path, workdir: Path) -> Iterator[ThirdPartyWhipClient]:
    """Chromium with `photo` as its camera publishing to `whip_url` (…/whip/{stream}) through
    whip.js; the browser quits on exit (without a DELETE unless the test called stop())."""
    source = whip_js_source(workdir / "npm")
    clip = write_y4m(photo, workdir / "camera.y4m", frames=30)
    profile = workdir / "profile"
    profile.mkdir(parents=True, exist_ok=True)
    origin = whip_url.split("/whip/")[0]
    with chromium(chromium_flags(clip, profile)) as driver:
        driver.get(f"{origin}/healthz")  # a page of the server's origin to run the client in
        published = driver.execute_async_script(PUBLISH_JS, source, whip_url)
        client = ThirdPartyWhipClient(driver, published.get("resource", ""), clip)
        assert "error" not in published, f"whip.js could not publish: {published['error']}\n{client.output()}"
        yield client
