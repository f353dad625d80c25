"""FFmpeg's WHIP muxer publishes to a server process for over a minute: it answers no ICE consent
checks, and its media keeps the connection (aioice alone cut it 33 s after ICE completed); its
end DELETEs the session. bench/whip_soak.py runs the same for ten minutes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.browser import face_path, live_sessions, served, wait_for
from support.ffmpeg_whip import ffmpeg_publishing

pytestmark = pytest.mark.slow

STREAM = "ffmpeg"
PUBLISH_S = 70  # FFmpeg's input ends then, and it DELETEs its session
HELD_S = 60  # the session must be live and taking frames this long after it went live
POLL_S = 5.0
WHIP_DELETE_REASON = "ended by its WHIP client"  # signaling/routes/whip.py's close for a DELETE


def the_session(server) -> dict | None:
    return next((s for s in live_sessions(server) if s["stream"] == STREAM), None)


def test_ffmpeg_publishes_past_a_minute_without_answering_consent_checks_and_its_end_deletes(tmp_path: Path):
    with served(tmp_path / "server.log", chain="invert") as server:
        with ffmpeg_publishing(
            face_path("obama.jpg"), f"{server.base_url}/whip/{STREAM}", PUBLISH_S, tmp_path / "ffmpeg.log"
        ) as ffmpeg:

            def what_happened() -> str:
                return f"ffmpeg:\n{(tmp_path / 'ffmpeg.log').read_text(errors='replace')[-2000:]}\nserver:\n{server.log_tail()}"

            session = wait_for(
                lambda: (s := the_session(server)) and s["state"] == "live" and s, 30, "FFmpeg's session live"
            )
            session_id, live_at = session["session_id"], time.monotonic()
            frames = [session["frames_in"]]
            while time.monotonic() - live_at < HELD_S:
                time.sleep(POLL_S)
                now = the_session(server)
                assert now is not None and now["session_id"] == session_id and now["state"] == "live", (
                    f"the session ended {time.monotonic() - live_at:.0f} s after it went live: "
                    f"{server.closing_reason(session_id)}\n{what_happened()}"
                )
                frames.append(now["frames_in"])
                assert frames[-1] > frames[-2], f"no frames in the last {POLL_S:g} s: {frames}"
            print(f"\nFFmpeg's session live {time.monotonic() - live_at:.0f} s, frames_in every {POLL_S:g} s: {frames}")

            assert ffmpeg.wait(timeout=PUBLISH_S + 30) == 0, what_happened()
        wait_for(lambda: the_session(server) is None, 10, "the session gone after FFmpeg's end")
        deletes = [r for r in server.requests("/whip/") if r[0] == "DELETE"]
        assert deletes == [("DELETE", f"/whip/{STREAM}/{session_id}", 200)], deletes
        assert server.closing_reason(session_id) == WHIP_DELETE_REASON, what_happened()
