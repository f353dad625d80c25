"""The server with the `mesh` chain: face analysis at upload, swapped video back, switching faces."""

import av
import numpy as np
import pytest

from client.facefuse_client import FacefuseClient, ServerError
from client.image_track import ImageTrack
from client.still_picture import top_at_aspect
from support.face_identity import identity
from support.phone_photos import sideways_phone_jpeg
from support.photos import encode_still
from support.server import face_path, face_rgb, loopback_settings, running_server, wait_until

pytestmark = pytest.mark.slow


def face_change(received, sent_luma: np.ndarray) -> float:
    """Mean luma change in the middle of the frame (where the face is) between sent and received."""
    luma = received.frame.to_ndarray(format="yuv420p")[:480].astype(np.int16)
    return float(np.abs(luma[120:360, 220:420] - sent_luma[120:360, 220:420]).mean())


async def test_upload_analyses_the_face_and_the_session_gets_swapped_video():
    async with running_server(loopback_settings("mesh")) as (url, app):
        async with FacefuseClient(url) as client:
            with pytest.raises(ServerError) as caught:
                await client.upload_face(encode_still(np.full((240, 320, 3), 90, np.uint8), "png"), "image/png")
            assert caught.value.status == 422 and caught.value.code == "no_face"
            tiny = (
                av.VideoFrame.from_ndarray(face_rgb("obama.jpg"), format="rgb24")
                .reformat(72, 90)
                .to_ndarray(format="rgb24")
            )
            with pytest.raises(ServerError) as caught:  # a face about 24 px across
                await client.upload_face(encode_still(tiny, "png"), "image/png")
            assert caught.value.status == 422 and caught.value.code == "face_too_small", caught.value
            assert "at least 40 px" in str(caught.value)
            hopper = await client.upload_face(face_path("grace_hopper.jpg").read_bytes())
            described = await client.request("GET", f"/api/faces/{hopper}")
            assert 150 < described["face_size"] < 260, described  # grace_hopper.jpg (512x600): the face about 200 px

            source = ImageTrack(top_at_aspect(face_rgb("obama.jpg"), 640, 480))  # as a webcam frames him
            sent = source._image[:480].astype(np.int16)
            session = await client.connect(source, face_id=hopper)
            try:
                await wait_until(lambda: session.frames_received >= 15, timeout=60)
                stats = await client.request("GET", f"/api/sessions/{session.session_id}")
                assert stats["frames_processed"] > 0, stats
                stages = (await client.request("GET", "/healthz"))["chain_stages_ms"]
                assert {"upload", "convert", "landmarks", "swap", "download"} <= set(stages), stages
                swapped = face_change(session.received[-1], sent)
                print(f"mean luma change in the face area: {swapped:.1f}")
                assert swapped > 4, "the face is swapped"
                received = session.received[-1].frame.to_ndarray(format="rgb24")
                to_source = float(identity(received) @ identity(face_rgb("grace_hopper.jpg")))
                to_target = float(identity(received) @ identity(face_rgb("obama.jpg")))
                print(
                    f"received face: SFace {to_source:.3f} to the source (Grace Hopper), {to_target:.3f} to the target"
                )
                assert to_source > to_target, "the received face has the source's identity"

                await client.request("POST", f"/api/sessions/{session.session_id}/face", json={"face_id": None})
                before = session.frames_received
                await wait_until(lambda: session.frames_received >= before + 30, timeout=30)
                assert face_change(session.received[-1], sent) < 3, "no face chosen: the original video"
                with pytest.raises(ServerError) as caught:
                    await client.request("POST", f"/api/sessions/{session.session_id}/face", json={"face_id": "nope"})
                assert caught.value.status == 404
            finally:
                await session.close()


class OddSizedCamera(ImageTrack):
    """Sends a 683x385 picture, as a browser does when it scales a 1366x770 capture by half
    (VP8 carries odd sizes; I420 arrays cannot hold them)."""

    def __init__(self, rgb: np.ndarray) -> None:
        super().__init__(rgb)
        picture = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(683, 385)
        self._picture = picture.to_ndarray(format="rgb24")

    async def recv(self) -> av.VideoFrame:
        timed = await super().recv()
        frame = av.VideoFrame.from_ndarray(self._picture, format="rgb24")
        frame.pts, frame.time_base = timed.pts, timed.time_base
        return frame


async def test_a_camera_with_an_odd_frame_size_gets_swapped_video():
    async with running_server(loopback_settings("mesh")) as (url, app):
        async with FacefuseClient(url) as client:
            hopper = await client.upload_face(face_path("grace_hopper.jpg").read_bytes())
            session = await client.connect(
                OddSizedCamera(top_at_aspect(face_rgb("obama.jpg"), 683, 385)), face_id=hopper
            )
            try:
                await wait_until(lambda: session.frames_received >= 15, timeout=60)
                stats = await client.request("GET", f"/api/sessions/{session.session_id}")
                assert stats["frames_processed"] > 0 and stats["frames_failed"] == 0, stats
                assert (stats["width"], stats["height"]) == (683, 385), "the server decoded the odd size"
                received = session.received[-1].frame
                assert (received.width, received.height) == (682, 384)  # the last column and row dropped
                to_source = float(
                    identity(received.to_ndarray(format="rgb24")) @ identity(face_rgb("grace_hopper.jpg"))
                )
                to_target = float(identity(received.to_ndarray(format="rgb24")) @ identity(face_rgb("obama.jpg")))
                print(f"odd-sized camera: SFace {to_source:.3f} to the source, {to_target:.3f} to the target")
                assert to_source > to_target
            finally:
                await session.close()


async def test_a_phone_photo_taken_sideways_is_swapped_upright():
    """EXIF orientation 8 (stored a quarter turn clockwise, shown turned back): read as stored, the
    face lay on its side and the swap came out as a torn face nearer the target than the source."""
    async with running_server(loopback_settings("mesh")) as (url, app):
        async with FacefuseClient(url) as client:
            hopper = face_rgb("grace_hopper.jpg")
            face_id = await client.upload_face(sideways_phone_jpeg(hopper))
            described = await client.request("GET", f"/api/faces/{face_id}")
            assert (described["height"], described["width"]) == hopper.shape[:2], "stored upright"
            session = await client.connect(ImageTrack(top_at_aspect(face_rgb("obama.jpg"), 640, 480)), face_id=face_id)
            try:
                await wait_until(lambda: session.frames_received >= 15, timeout=60)
                received = session.received[-1].frame.to_ndarray(format="rgb24")
                to_source, to_target = (
                    float(identity(received) @ identity(hopper)),
                    float(identity(received) @ identity(face_rgb("obama.jpg"))),
                )
                print(f"sideways phone photo: SFace {to_source:.3f} to the source, {to_target:.3f} to the target")
                assert to_source > to_target
            finally:
                await session.close()
