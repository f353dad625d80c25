"""Debian's simple-whip-client (whip-client) publishing to a real server, played back over WHEP.

Run inside a network namespace of its own (tests/e2e/test_simple_whip_client.py starts it with
`unshare --net --map-root-user`): libnice, the client's ICE agent, never offers loopback
addresses, so the namespace's private network (support/private_network.py) carries its media.
The server runs in this process on 127.0.0.1 for HTTP, with host candidates on 127.0.0.1 (the
aiortc viewer) and on the private network (the client). Prints one JSON object of what it saw;
the test judges it.

    python tests/support/simple_whip_client_run.py --no-upnp-dir DIR   # DIR holds libgupnp-igd-1.0.so.4
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]

from signaling.app_keys import SESSIONS  # noqa: E402
from stream.ice import IceSettings  # noqa: E402
from support.private_network import PRIVATE_NET, SERVER_ADDRESS, bring_up  # noqa: E402
from support.server import loopback_settings, running_server  # noqa: E402
from support.whep_viewer import whep_viewer  # noqa: E402

STREAM = "gst"
# A flat colour (R 48, G 96, B 192), VP8, and Opus, as the client's README shows its pipelines.
VIDEO = (
    "videotestsrc is-live=true pattern=solid-color foreground-color=0xff3060c0 ! "
    "video/x-raw,width=320,height=240,framerate=30/1 ! videoconvert ! queue ! "
    "vp8enc deadline=1 ! rtpvp8pay pt=96 ssrc=2 ! queue ! application/x-rtp,media=video,encoding-name=VP8,payload=96"
)
AUDIO = (
    "audiotestsrc is-live=true wave=sine ! audioconvert ! audioresample ! queue ! opusenc ! "
    "rtpopuspay pt=111 ssrc=1 ! queue ! application/x-rtp,media=audio,encoding-name=OPUS,payload=111"
)
FRAMES_WANTED = 30
WAIT_S = 30.0


async def _poll(condition, timeout: float, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await condition()
        if value:
            return value
        await asyncio.sleep(every)
    return None


async def run(no_upnp_dir: str) -> dict[str, object]:
    bring_up()
    ice = IceSettings(hosts=("127.0.0.1", SERVER_ADDRESS), allowed_remote=("127.0.0.0/8", PRIVATE_NET))
    seen: dict[str, object] = {}
    settings = loopback_settings("invert")
    settings = dataclasses.replace(settings, stream=dataclasses.replace(settings.stream, ice=ice))
    async with running_server(settings) as (url, app):
        client_log = Path(no_upnp_dir) / "whip-client.log"
        env = dict(os.environ, LD_LIBRARY_PATH=no_upnp_dir)
        with client_log.open("w") as log:
            client = subprocess.Popen(
                ["whip-client", "-u", f"{url}/whip/{STREAM}", "-V", VIDEO, "-A", AUDIO, "-o"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        try:
            async with aiohttp.ClientSession() as http:

                async def live_session():
                    async with http.get(f"{url}/api/sessions") as response:
                        sessions = (await response.json())["sessions"]
                    return next((s for s in sessions if s["stream"] == STREAM and s["state"] == "live"), None)

                seen["live_session"] = await _poll(live_session, WAIT_S)
                held = None if seen["live_session"] is None else app[SESSIONS].get(seen["live_session"]["session_id"])
                if seen["live_session"] is not None:
                    async with whep_viewer(http, f"{url}/whep/{STREAM}") as viewer:
                        seen["whep_status"] = viewer.status
                        await _poll(_async(lambda: viewer.video_frames >= FRAMES_WANTED), WAIT_S)
                        seen["video_frames"] = viewer.video_frames
                        seen["audio_frames"] = viewer.audio_frames
                        if viewer.last_video is not None:
                            rgb = viewer.last_video.to_ndarray(format="rgb24")
                            seen["mean_rgb"] = [round(float(v), 1) for v in rgb.reshape(-1, 3).mean(axis=0)]
                            seen["frame_size"] = [viewer.last_video.width, viewer.last_video.height]
                # Ctrl-C: the client sends its DELETE and stops
                client.send_signal(signal.SIGINT)
                seen["client_exit"] = await asyncio.to_thread(client.wait, 15)

                async def gone():
                    return await live_session() is None

                seen["session_gone"] = bool(await _poll(gone, 10.0))
                # why it ended: the DELETE's reason, or the connection's when the client only hung up
                seen["close_reason"] = held and held.close_reason
        finally:
            with contextlib.suppress(ProcessLookupError):
                client.kill()
    seen["client_log_tail"] = client_log.read_text(errors="replace").splitlines()[-15:]
    return seen


def _async(predicate):
    async def check():
        return predicate()

    return check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-upnp-dir", required=True, help="folder with the libgupnp-igd stand-in")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.no_upnp_dir))))


if __name__ == "__main__":
    main()
