"""The server with the `mesh` chain: face analysis at upload, swapped video back, switching faces."""

import io

import av
import numpy as np
import pytest

from signaling.client import FacefuseClient, ServerError
from stream.image_track import ImageTrack
from support import face_path, face_rgb, loopback_settings, running_server, wait_until

pytestmark = pytest.mark.slow


def png_of(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="image2pipe") as output:
        stream = output.add_stream("png")
        stream.height, stream.width = rgb.shape[:2]
        stream.pix_fmt = "rgb24"
        for packet in [*stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")), *stream.encode()]:
            output.mux(packet)
    return buffer.getvalue()


def face_change(received, sent_luma: np.ndarray) -> float:
    """Mean luma change in the middle of the frame (where the face is) between sent and received."""
    luma = received.frame.to_ndarray(format="yuv420p")[:480].astype(np.int16)
    return float(np.abs(luma[120:360, 220:420] - sent_luma[120:360, 220:420]).mean())


async def test_upload_analyses_the_face_and_the_session_gets_swapped_video():
    async with running_server(loopback_settings("mesh")) as (url, app):
        async with FacefuseClient(url) as client:
            with pytest.raises(ServerError) as caught:
                await client.upload_face(png_of(np.full((240, 320, 3), 90, np.uint8)), "image/png")
            assert caught.value.status == 422 and caught.value.code == "no_face"
            biden = await client.upload_face(face_path("biden.jpg").read_bytes())

            source = ImageTrack(face_rgb("obama.jpg"))
            sent = source._image[:480].astype(np.int16)
            session = await client.connect(source, face_id=biden)
            try:
                await wait_until(lambda: session.frames_received >= 15, timeout=60)
                stats = await client.request("GET", f"/api/sessions/{session.session_id}")
                assert stats["frames_processed"] > 0, stats
                swapped = face_change(session.received[-1], sent)
                print(f"mean luma change in the face area: {swapped:.1f}")
                assert swapped > 4, "the face is swapped"

                await client.request("POST", f"/api/sessions/{session.session_id}/face", json={"face_id": None})
                before = session.frames_received
                await wait_until(lambda: session.frames_received >= before + 30, timeout=30)
                assert face_change(session.received[-1], sent) < 3, "no face chosen: the original video"
                with pytest.raises(ServerError) as caught:
                    await client.request("POST", f"/api/sessions/{session.session_id}/face", json={"face_id": "nope"})
                assert caught.value.status == 404
            finally:
                await session.close()
