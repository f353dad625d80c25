"""A real aiortc client <-> the real server, both in this event loop, media on 127.0.0.1."""

import numpy as np
import pytest

from client.facefuse_client import FacefuseClient
from client.frame_stamp import read_stamp, split_value
from client.image_track import ImageTrack
from support.server import face_rgb, loopback_settings, running_server, wait_until


def luma(frame) -> np.ndarray:
    """The Y plane as sent (no range conversion)."""
    return frame.to_ndarray(format="yuv420p")[: frame.height].astype(np.int16)


@pytest.mark.parametrize("codec", ["VP8", "H264"])
async def test_passthrough_returns_the_photo_in_order(codec):
    photo = face_rgb("obama.jpg")
    async with running_server(loopback_settings("passthrough")) as (url, app):
        async with FacefuseClient(url) as client:
            source = ImageTrack(photo, tag=7)
            session = await client.connect(source, codec=codec)
            try:
                await wait_until(lambda: session.frames_received >= 150, timeout=30)
                received = list(session.received)
                stamps = [read_stamp(item.frame) for item in received]
                assert all(stamp is not None and not stamp[1] for stamp in stamps), "every frame keeps its stamp"
                tags, indices = zip(*(split_value(value) for value, _ in stamps))
                assert set(tags) == {7}
                assert all(a < b for a, b in zip(indices, indices[1:])), "frames come back in order"
                pts = [item.frame.pts for item in received]
                assert all(a < b for a, b in zip(pts, pts[1:]))

                # content intact within codec error: compare below the stamp rows
                last = received[-1].frame
                assert (last.width, last.height) == (640, 480)
                sent = source._image[:480].astype(np.int16)
                difference = np.abs(luma(last)[32:] - sent[32:]).mean()
                assert difference < 4, f"mean luma error {difference:.2f}"

                stats = await client.request("GET", f"/api/sessions/{session.session_id}")
                assert stats["codec"].upper() == codec
                assert stats["frames_out"] > 0 and stats["width"] == 640
                assert stats["latency_ms"]["p50"] is not None
                events = [event for event in session.events if event["type"] == "stats"]
                assert events, "stats arrive on the data channel once a second"
            finally:
                await session.close()
