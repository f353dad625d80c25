"""FaceMesh in torch: agreement with a numpy interpreter of the shipped .tflite graph, and
behaviour on real photographs (scores, landmark order, batching, mirroring, crops)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from numpy.lib.stride_tricks import sliding_window_view

from pipeline.landmarks import FaceMesher, MeshResult, boxes_from_points, crop_faces, to_frame_coords
from pipeline.landmarks.facemesh import face_landmark_file, load_facemesh
from pipeline.landmarks.tflite_file import TfliteFileError, TfliteGraph, read_tflite
from support.photos import face_rgb

# Face boxes (x0, y0, x1, y1: cheek to cheek, forehead to chin), measured once by eye on the photos.
FACE_BOXES = {
    "obama.jpg": (370, 140, 620, 390),
    "obama2.jpg": (205, 260, 480, 625),
    "obama3.jpg": (630, 280, 910, 630),
    "biden.jpg": (410, 200, 710, 540),
}
PHOTOS = tuple(FACE_BOXES)

# MediaPipe mesh indices (image-left/right as seen in a frontal photo)
EYE_OUTER_LEFT, EYE_OUTER_RIGHT = 33, 263
NOSE_TIP, UPPER_LIP, LOWER_LIP, CHIN, FOREHEAD = 1, 13, 14, 152, 10
MOUTH_LEFT, MOUTH_RIGHT = 61, 291
# the eye contours, image-left eye against image-right eye, walked the same way round
MIRROR_PAIRS = tuple(
    zip(
        (33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173, 61, 78),
        (263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398, 291, 308),
        strict=True,
    )
)
MIDLINE = (1, 4, 10, 13, 14, 152, 0, 17)


@pytest.fixture(scope="module")
def mesher() -> FaceMesher:
    return FaceMesher("cpu")


def photo_crop(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The 192x192 crop [1, 3, 192, 192] of one photo's face, and its transform [1, 2, 3]."""
    frame = torch.from_numpy(face_rgb(name))[None]
    return crop_faces(frame, torch.tensor([FACE_BOXES[name]], dtype=torch.float32), torch.tensor([0]))


def non_face_crops() -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    flat = torch.full((1, 3, 192, 192), 0.5)
    noise = torch.rand((1, 3, 192, 192), generator=generator)
    curtain = torch.from_numpy(face_rgb("obama.jpg")[:300, 0:300])[None]  # flag and curtain, no face
    background, _ = crop_faces(curtain, torch.tensor([[50.0, 50.0, 250.0, 250.0]]), torch.tensor([0]), scale=1.0)
    return torch.cat((flat, noise, background))


# --- a numpy interpreter for the operators of the .tflite graph (NHWC, float64) --------------


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _windows(x: np.ndarray, kernel: tuple[int, int], options: dict) -> np.ndarray:
    """[N, H', W', C, kh, kw] windows of x [N, H, W, C] with TFLite padding and strides."""
    if options["padding"] == "SAME":
        pad_h = _same_padding(x.shape[1], kernel[0], options["stride_h"])
        pad_w = _same_padding(x.shape[2], kernel[1], options["stride_w"])
        x = np.pad(x, ((0, 0), pad_h, pad_w, (0, 0)))
    windows = sliding_window_view(x, kernel, axis=(1, 2))
    return windows[:, :: options["stride_h"], :: options["stride_w"]]


def run_reference(graph: TfliteGraph, image: np.ndarray) -> dict[str, np.ndarray]:
    """Interprets the graph on one NHWC image; returns the output tensors by name."""
    values: dict[int, np.ndarray] = {
        t.index: t.data.astype(np.float64) if t.data.dtype.kind == "f" else t.data
        for t in graph.tensors
        if t.data is not None
    }
    values[graph.inputs[0]] = image.astype(np.float64)
    for op in graph.operators:
        args = [values[i] for i in op.inputs]
        options = dict(op.options)
        assert options.get("activation", "NONE") == "NONE"
        if op.kind == "CONV_2D":
            x, kernel, bias = args  # kernel OHWI
            windows = _windows(x, kernel.shape[1:3], options)
            out = np.einsum("nhwcij,oijc->nhwo", windows, kernel) + bias
        elif op.kind == "DEPTHWISE_CONV_2D":
            x, kernel, bias = args  # kernel 1HWC (depth multiplier 1)
            assert options["depth_multiplier"] == 1
            windows = _windows(x, kernel.shape[1:3], options)
            out = np.einsum("nhwcij,ijc->nhwc", windows, kernel[0]) + bias
        elif op.kind == "MAX_POOL_2D":
            windows = _windows(args[0], (options["filter_h"], options["filter_w"]), options)
            out = windows.max(axis=(4, 5))
        elif op.kind == "PRELU":
            x, alpha = args
            out = np.where(x >= 0, x, x * alpha)
        elif op.kind == "ADD":
            out = args[0] + args[1]
        elif op.kind == "PAD":
            out = np.pad(args[0], [tuple(p) for p in args[1]])
        else:
            raise AssertionError(f"the reference does not interpret {op.kind}")
        (output,) = op.outputs
        assert out.shape == graph.tensors[output].shape, (op.kind, out.shape, graph.tensors[output].shape)
        values[output] = out
    return {graph.tensors[i].name: values[i] for i in graph.outputs}


def test_port_matches_numpy_reference_of_the_tflite_graph(mesher: FaceMesher) -> None:
    graph = read_tflite(face_landmark_file())
    assert {op.kind for op in graph.operators} == {"CONV_2D", "DEPTHWISE_CONV_2D", "PRELU", "ADD", "MAX_POOL_2D", "PAD"}
    assert all(t.data.dtype == np.float32 for t in graph.tensors if t.data is not None and t.data.dtype.kind == "f")
    crop, _ = photo_crop("obama2.jpg")
    reference = run_reference(graph, crop.permute(0, 2, 3, 1).numpy())
    result = mesher.landmarks(crop)
    ref_points = reference["conv2d_20"].reshape(468, 3)
    ref_logit = reference["conv2d_30"].item()
    # float32 against float64: seen 4e-5 px of 192 at most (a wrong SAME padding is off by ~30 px)
    assert np.abs(result.points[0].numpy() - ref_points).max() < 5e-4
    assert result.scores.item() == pytest.approx(1 / (1 + math.exp(-ref_logit)), abs=1e-6)
    # the logit too, where it is not saturated: on a non-face crop
    noise = non_face_crops()[1:2]
    noise_logit = run_reference(graph, noise.permute(0, 2, 3, 1).numpy())["conv2d_30"].item()
    assert load_facemesh()(noise)[1].item() == pytest.approx(noise_logit, abs=1e-4 * max(1.0, abs(noise_logit)))


# --- behaviour on real photographs -------------------------------------------------------------


@pytest.mark.parametrize("name", PHOTOS)
def test_face_presence_is_high_on_portraits(mesher: FaceMesher, name: str) -> None:
    crop, _ = photo_crop(name)
    assert mesher.landmarks(crop).scores.item() > 0.5


def test_face_presence_is_low_on_non_faces(mesher: FaceMesher) -> None:
    scores = mesher.landmarks(non_face_crops()).scores
    assert scores.shape == (3,)
    assert (scores < 0.5).all(), scores


@pytest.mark.parametrize("name", PHOTOS)
def test_landmarks_are_in_anatomical_order_inside_the_face_box(mesher: FaceMesher, name: str) -> None:
    crop, transform = photo_crop(name)
    result = mesher.landmarks(crop)
    assert result.points.shape == (1, 468, 3) and result.points.dtype == torch.float32
    assert torch.isfinite(result.points).all()
    assert ((result.points[..., :2] >= 0) & (result.points[..., :2] <= 192)).all()
    p = to_frame_coords(result.points, transform)[0, :, :2].numpy()
    x, y = p[:, 0], p[:, 1]
    assert x[EYE_OUTER_LEFT] < x[NOSE_TIP] < x[EYE_OUTER_RIGHT]
    assert x[MOUTH_LEFT] < x[UPPER_LIP] < x[MOUTH_RIGHT]
    assert y[FOREHEAD] < min(y[EYE_OUTER_LEFT], y[EYE_OUTER_RIGHT])
    assert max(y[EYE_OUTER_LEFT], y[EYE_OUTER_RIGHT]) < y[NOSE_TIP] < y[UPPER_LIP]
    x0, y0, x1, y1 = FACE_BOXES[name]
    assert y[UPPER_LIP] <= y[LOWER_LIP] + 0.02 * (x1 - x0)  # closed lips touch (or overlap by a hair)
    assert y[LOWER_LIP] < y[CHIN]
    margin = 0.1 * (x1 - x0)
    for i in (EYE_OUTER_LEFT, EYE_OUTER_RIGHT, NOSE_TIP, UPPER_LIP, LOWER_LIP, CHIN, FOREHEAD):
        assert x0 - margin <= x[i] <= x1 + margin and y0 - margin <= y[i] <= y1 + margin, (i, p[i])
    eye_distance = np.hypot(*(p[EYE_OUTER_RIGHT] - p[EYE_OUTER_LEFT]))
    assert 0.3 * (x1 - x0) < eye_distance < 0.8 * (x1 - x0)


def test_crops_of_float_frames_equal_crops_of_uint8_frames() -> None:
    """The chain crops from float RGB frames (model_input.py), uploads from uint8."""
    frame = torch.from_numpy(face_rgb("obama.jpg"))[None]
    box, first = torch.tensor([FACE_BOXES["obama.jpg"]], dtype=torch.float32), torch.tensor([0])
    from_u8, transform_u8 = crop_faces(frame, box, first)
    from_float, transform_float = crop_faces(frame.permute(0, 3, 1, 2).float() / 255.0, box, first)
    assert torch.allclose(from_u8, from_float, atol=1e-6) and torch.equal(transform_u8, transform_float)
    with pytest.raises(ValueError, match="float or"):
        crop_faces(frame.float(), box, first)  # float, but laid out as uint8 frames are


def test_a_batch_equals_single_runs(mesher: FaceMesher) -> None:
    crops = torch.cat([photo_crop(name)[0] for name in PHOTOS] + [non_face_crops()])
    batch = mesher.landmarks(crops)
    assert batch.points.shape == (7, 468, 3) and batch.scores.shape == (7,)
    for i in range(len(crops)):
        single = mesher.landmarks(crops[i : i + 1])
        torch.testing.assert_close(batch.points[i : i + 1], single.points, atol=1e-3, rtol=0)
        torch.testing.assert_close(batch.scores[i : i + 1], single.scores, atol=1e-5, rtol=0)


def test_channels_last_and_channels_first_crops_agree(mesher: FaceMesher) -> None:
    crop, _ = photo_crop("obama.jpg")
    first = mesher.landmarks(crop)
    last = mesher.landmarks(crop.permute(0, 2, 3, 1).contiguous())
    torch.testing.assert_close(first.points, last.points, atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", PHOTOS)
def test_a_mirrored_face_gives_mirrored_landmarks(mesher: FaceMesher, name: str) -> None:
    crop, _ = photo_crop(name)
    result = mesher.landmarks(torch.cat((crop, crop.flip(3))))
    points = result.points[0].numpy()
    mirrored = result.points[1].numpy().copy()
    mirrored[:, 0] = 192 - mirrored[:, 0]  # back into the original's frame
    assert result.scores[1] > 0.5
    error = [np.abs(points[a, :2] - mirrored[b, :2]).max() for pair in MIRROR_PAIRS for a, b in (pair, pair[::-1])]
    error += [np.abs(points[i, :2] - mirrored[i, :2]).max() for i in MIDLINE]
    assert max(error) < 6.0  # pixels of 192 (the mesh is not exactly symmetric in training)
    assert np.median(error) < 2.5
    # all 468 points: each mirrored point lies close to some point of the original mesh
    distances = np.linalg.norm(points[None, :, :2] - mirrored[:, None, :2], axis=2).min(axis=1)
    assert np.median(distances) < 2.0


def test_bad_crops_are_refused(mesher: FaceMesher) -> None:
    with pytest.raises(ValueError):
        mesher.landmarks(torch.zeros(1, 3, 128, 128))
    with pytest.raises(TypeError):
        mesher.landmarks(torch.zeros(1, 3, 192, 192, dtype=torch.uint8))
    empty = mesher.landmarks(torch.zeros(0, 3, 192, 192))
    assert isinstance(empty, MeshResult) and empty.points.shape == (0, 468, 3) and empty.scores.shape == (0,)


def test_a_file_that_is_not_tflite_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "face_landmark.tflite"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(TfliteFileError):
        load_facemesh(junk)


# --- crops and the way back to the frame -------------------------------------------------------


def test_crop_pixels_come_from_where_the_transform_says() -> None:
    height, width = 90, 160
    ys, xs = np.mgrid[0:height, 0:width]
    frame = np.stack((xs, ys, (xs + 2 * ys) % 256), axis=-1).astype(np.uint8)  # encodes its position
    frames = torch.from_numpy(np.stack((frame, 255 - frame)))
    boxes = torch.tensor([[40.0, 20.0, 80.0, 60.0], [30.0, 30.0, 70.0, 50.0]])
    eyes = torch.tensor([[[45.0, 35.0], [75.0, 35.0]], [[40.0, 45.0], [60.0, 35.0]]])  # level; tilted
    crops, transforms = crop_faces(frames, boxes, torch.tensor([0, 1]), eyes=eyes, scale=1.0, size=40)
    assert crops.shape == (2, 3, 40, 40) and transforms.shape == (2, 2, 3)
    # the crop's centre is the box's centre; a crop pixel's centre maps onto the frame pixel it shows
    centres = to_frame_coords(torch.full((2, 1, 2), 20.0), transforms)[:, 0]
    torch.testing.assert_close(centres, (boxes[:, :2] + boxes[:, 2:]) / 2)
    # crop 0 is axis-aligned, one frame pixel per crop pixel: exact copies
    expected = frames[0, 20:60, 40:80].permute(2, 0, 1).float() / 255
    torch.testing.assert_close(crops[0], expected, atol=1e-6, rtol=0)
    # crop 1 is rotated so its x axis runs along the eye line
    direction = to_frame_coords(torch.tensor([[[0.0, 20.0], [40.0, 20.0]]]), transforms[1:])[0]
    along = direction[1] - direction[0]
    assert math.atan2(along[1], along[0]) == pytest.approx(math.atan2(-10, 20), abs=1e-5)
    sampled_x = 255 - crops[1, 0] * 255  # frame 1 is inverted
    pixel_centres = torch.stack(torch.meshgrid(torch.arange(40.0), torch.arange(40.0), indexing="xy"), -1) + 0.5
    where = to_frame_coords(pixel_centres.view(1, -1, 2), transforms[1:])[0].view(40, 40, 2)
    torch.testing.assert_close(sampled_x, where[..., 0] - 0.5, atol=1e-3, rtol=0)


def test_tracking_from_the_mesh_finds_the_same_points_in_a_turned_frame(mesher: FaceMesher) -> None:
    """Mesh -> next crop from the points (rotated by the eye line) -> the same face points again,
    also in the frame turned a quarter: exercises crop_faces' rotation and to_frame_coords."""
    name = "obama.jpg"
    crop, transform = photo_crop(name)
    first = to_frame_coords(mesher.landmarks(crop).points, transform)

    image = face_rgb(name)
    turned = torch.from_numpy(np.ascontiguousarray(np.rot90(image)))[None]  # counter-clockwise
    xy = first[..., :2]
    turned_points = torch.stack((xy[..., 1], image.shape[1] - xy[..., 0]), dim=-1)  # (x, y) -> (y, W - x)
    found = []
    for frame, points in ((torch.from_numpy(image)[None], xy), (turned, turned_points)):
        boxes, eyes = boxes_from_points(points)
        crops, transforms = crop_faces(frame, boxes, torch.tensor([0]), eyes=eyes)
        again = mesher.landmarks(crops)
        assert again.scores.item() > 0.5
        found.append(to_frame_coords(again.points, transforms)[..., :2])
        error = (found[-1] - points).norm(dim=-1)
        assert error.median() < 0.02 * (FACE_BOXES[name][2] - FACE_BOXES[name][0]), error.median()
    # the turned frame gives the same crop, so the same points, turned
    upright, turned_found = found
    expected = torch.stack((upright[..., 1], image.shape[1] - upright[..., 0]), dim=-1)
    torch.testing.assert_close(turned_found, expected, atol=0.05, rtol=0)


def test_no_faces_give_empty_crops() -> None:
    frames = torch.zeros(2, 32, 32, 3, dtype=torch.uint8)
    crops, transforms = crop_faces(frames, torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))
    assert crops.shape == (0, 3, 192, 192) and transforms.shape == (0, 2, 3)


# --- CUDA ---------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu_and_half_precision_stays_finite(mesher: FaceMesher) -> None:
    frames = torch.stack([torch.from_numpy(face_rgb("obama.jpg"))] * 2)
    boxes = torch.tensor([FACE_BOXES["obama.jpg"]] * 2, dtype=torch.float32)
    index = torch.tensor([0, 1])
    cpu_crops, _ = crop_faces(frames, boxes, index)
    gpu_crops, _ = crop_faces(frames.cuda(), boxes.cuda(), index.cuda())
    torch.testing.assert_close(gpu_crops.cpu(), cpu_crops, atol=1e-4, rtol=0)
    crops = torch.cat((cpu_crops, non_face_crops()))
    expected = mesher.landmarks(crops)
    full = FaceMesher("cuda").landmarks(crops.cuda())
    assert full.points.is_cuda
    # cuDNN convolutions run in TF32 by default (torch.backends.cudnn.allow_tf32): ~1e-3 relative
    torch.testing.assert_close(full.points.cpu(), expected.points, atol=0.5, rtol=0)
    torch.testing.assert_close(full.scores.cpu(), expected.scores, atol=1e-2, rtol=0)
    half = FaceMesher("cuda", half=True).landmarks(crops.cuda())
    assert half.points.dtype == torch.float32 and torch.isfinite(half.points).all()
    assert torch.isfinite(half.scores).all()
    assert (half.points[:2].cpu() - expected.points[:2]).abs().max() < 2.0  # pixels of 192
    assert (half.scores.cpu() > 0.5).tolist() == (expected.scores > 0.5).tolist()
