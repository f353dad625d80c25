"""Debian's simple-whip-client (GStreamer webrtcbin, trickling with PATCH) publishes a test
pattern and Opus to the server; an aiortc viewer plays it back over WHEP. A WHIP client that is
not ours, as installed by tests/run.sh.

Two things of the Debian package are worked around, both outside facefuse: its libnice pulls
libsoup 3 in beside the client's libsoup 2, which aborts it at start (support/no_upnp/ builds a
stand-in for the UPnP library in between), and libnice offers no loopback addresses (the run
happens in a network namespace with a private network, support/private_network.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.private_network import can_make_namespace
from support.required import cannot_run_here

SUPPORT = Path(__file__).resolve().parents[1] / "support"
# the pattern's colour (R 48, G 96, B 192) through the invert chain
INVERTED = (255 - 48, 255 - 96, 255 - 192)
COLOUR_TOLERANCE = 20  # VP8 and I420 <-> RGB twice
WHIP_DELETE_REASON = "ended by its WHIP client"  # signaling/routes/whip.py's close for a DELETE


@pytest.fixture(scope="module")
def no_upnp_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("no_upnp")
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-Wl,-soname,libgupnp-igd-1.0.so.4", "-o", folder / "libgupnp-igd-1.0.so.4"]
        + [SUPPORT / "no_upnp" / "gupnp_igd.c"],
        check=True,
    )
    return folder


def test_simple_whip_client_publishes_and_a_whep_viewer_plays_it(no_upnp_dir: Path) -> None:
    assert shutil.which("whip-client"), "simple-whip-client is not installed: tests/run.sh installs it"
    ok, why = can_make_namespace()
    if not ok:
        cannot_run_here(f"this machine does not let a process make a network namespace: {why}")

    done = subprocess.run(
        ["unshare", "--net", "--map-root-user", sys.executable, SUPPORT / "simple_whip_client_run.py"]
        + ["--no-upnp-dir", str(no_upnp_dir)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    print("\n" + json.dumps({k: v for k, v in seen.items() if k != "client_log_tail"}, indent=1))
    log = "\n".join(seen["client_log_tail"])

    session = seen["live_session"]
    assert session is not None, f"no live session for the client's stream\n{log}"
    assert session["codec"] == "VP8" and (session["width"], session["height"]) == (320, 240)
    assert seen["whep_status"] == 201
    assert seen["video_frames"] >= 30, log
    assert seen["audio_frames"] > 0, "the client's Opus did not reach the viewer"
    assert seen["frame_size"] == [320, 240]
    for got, want in zip(seen["mean_rgb"], INVERTED, strict=True):
        assert abs(got - want) <= COLOUR_TOLERANCE, (seen["mean_rgb"], INVERTED)  # processed, not passed through
    assert seen["client_exit"] == 0, log
    assert seen["session_gone"], f"the session outlived the client's DELETE\n{log}"
    assert seen["close_reason"] == WHIP_DELETE_REASON, f"ended by {seen['close_reason']!r}, not the DELETE\n{log}"
