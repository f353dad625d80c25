"""pipeline/rgb_frames.py: frames converted from I420 only where they are read, and the extents
the readers ask for (face crops, hand crops) holding every pixel they sample."""

import math

import av
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pipeline.rgb_frames as rgb_frames
from pipeline.color import i420_to_rgb
from pipeline.hands.hand_landmarks import INPUT_SIZE, Rois, _crop_grid
from pipeline.landmarks import crop_extents, crop_faces
from pipeline.rgb_frames import RgbFrames
from support.photos import face_rgb


@pytest.fixture
def batch() -> torch.Tensor:
    frames = [
        av.VideoFrame.from_ndarray(face_rgb(name), format="rgb24").reformat(320, 240, format="yuv420p").to_ndarray()
        for name in ("obama.jpg", "biden.jpg", "obama2.jpg")
    ]
    return torch.from_numpy(np.stack(frames))


@pytest.fixture
def conversions(monkeypatch) -> list[tuple[int, ...]]:
    """Each conversion RgbFrames makes: (frames, top, bottom, left, right)."""
    made = []
    convert = rgb_frames.i420_window_to_rgb

    def counted(i420, top, bottom, left, right):
        made.append((i420.shape[0], top, bottom, left, right))
        return convert(i420, top, bottom, left, right)

    monkeypatch.setattr(rgb_frames, "i420_window_to_rgb", counted)
    return made


def test_a_window_is_converted_once_with_what_bilinear_reads_around_it(batch, conversions) -> None:
    frames = RgbFrames.from_i420(batch, lazy=True)
    whole = i420_to_rgb(batch)
    frames.window([1], 100.5, 50.2, 180.0, 120.7)
    assert conversions == [(1, 48, 124, 98, 182)]  # one pixel more each side, then even bounds
    assert torch.equal(frames.tensor[1, :, 48:124, 98:182], whole[1, :, 48:124, 98:182])
    frames.window([1], 110, 60, 170, 110)  # inside: nothing more
    frames.window([0, 1, 2], 300, 230, 400, 300)  # clipped to the frame's corner, for all three
    frames.window(None, 500, 500, 600, 600)  # wholly outside: nothing
    assert conversions == [(1, 48, 124, 98, 182), (3, 228, 240, 298, 320)]
    assert torch.equal(frames.tensor[:, :, 228:, 298:], whole[:, :, 228:, 298:])


def test_a_window_with_bounds_that_are_not_finite_converts_nothing(batch, conversions) -> None:
    frames = RgbFrames.from_i420(batch, lazy=True)
    frames.window(None, float("nan"), 10, 50, 50)
    frames.window([0], 10, 10, float("inf"), 50)
    assert conversions == []


def test_whole_frames_and_windows_of_some_frames_convert_only_those(batch, conversions) -> None:
    frames = RgbFrames.from_i420(batch, lazy=True)
    whole = i420_to_rgb(batch)
    frames.whole([2])
    frames.window(None, 10, 10, 50, 50)  # frame 2 has it already
    frames.whole([0, 2, 1])  # frames 0 and 1 at once
    assert conversions == [(1, 0, 240, 0, 320), (2, 8, 52, 8, 52), (2, 0, 240, 0, 320)]
    assert torch.equal(frames.tensor, whole)
    assert torch.equal(frames.tensor[:2, :, 8:52, 8:52], whole[:2, :, 8:52, 8:52])


def test_frames_converted_at_once_need_no_more(batch, conversions) -> None:
    eager = RgbFrames.from_i420(batch, lazy=False)
    assert torch.equal(eager.tensor, i420_to_rgb(batch))
    ready = RgbFrames.converted(eager.tensor.clone())
    for frames in (eager, ready):
        frames.whole([0, 1])
        frames.window(None, 0, 0, 320, 240)
    assert conversions == []
    assert torch.equal(ready.tensor, eager.tensor)


def sampled(grid: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """grid_sample coordinates [N, h, w, 2] (align_corners=False) -> frame pixels [N, h*w, 2]
    (continuous: pixel (i, j) covers [i, i+1) x [j, j+1), as crops.py counts them)."""
    return ((grid + 1) * torch.tensor([width / 2, height / 2])).flatten(1, 2)


@pytest.mark.parametrize("degrees", [0.0, 20.0, -35.0, 90.0])
def test_a_face_crops_extent_holds_every_pixel_it_samples(degrees) -> None:
    boxes = torch.tensor([[100.0, 80.0, 180.0, 190.0], [10.0, 20.0, 60.0, 60.0]])
    angle = math.radians(degrees)
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    direction = torch.tensor([math.cos(angle), math.sin(angle)]) * 20
    eyes = torch.stack((centres - direction, centres + direction), dim=1)
    height, width, size = 240, 320, 64
    frames = torch.rand(1, 3, height, width)
    _, transforms = crop_faces(frames, boxes, torch.zeros(2, dtype=torch.long), eyes=eyes, size=size)
    corners = torch.tensor([[0.0, 0.0, 1.0], [size, 0.0, 1.0], [0.0, size, 1.0], [size, size, 1.0]])
    points = corners @ transforms.transpose(1, 2)  # [N, 4, 2] frame pixels
    extents = crop_extents(boxes, eyes)
    assert torch.allclose(points.amin(dim=1), extents[:, :2], atol=1e-3)  # tight
    assert torch.allclose(points.amax(dim=1), extents[:, 2:], atol=1e-3)


@pytest.mark.parametrize("turn", [0.0, 0.4, -1.2, math.pi])
def test_a_hand_crops_extent_holds_every_pixel_it_samples(turn) -> None:
    rois = Rois(torch.tensor([[150.0, 100.0]]), torch.tensor([90.0]), torch.tensor([turn]))
    grid = _crop_grid(rois.centres, rois.sides, rois.turns, 240, 320)
    assert grid.shape == (1, INPUT_SIZE, INPUT_SIZE, 2)
    points = sampled(grid, 240, 320)
    x0, y0, x1, y1 = rois.extents()[0].tolist()
    assert float(points[..., 0].min()) >= x0 - 1e-3 and float(points[..., 0].max()) <= x1 + 1e-3
    assert float(points[..., 1].min()) >= y0 - 1e-3 and float(points[..., 1].max()) <= y1 + 1e-3
    # and the crop sampled from frames made ready only over that extent is the whole frame's
    batch = torch.randint(0, 256, (1, 360, 320), dtype=torch.uint8)
    lazy = RgbFrames.from_i420(batch, lazy=True)
    lazy.tensor.fill_(float("nan"))  # what was never converted would show
    lazy.window([0], x0, y0, x1, y1)
    crop = F.grid_sample(lazy.tensor, grid, mode="bilinear", align_corners=False)
    assert torch.equal(crop, F.grid_sample(i420_to_rgb(batch), grid, mode="bilinear", align_corners=False))


def test_a_crop_read_from_its_window_alone_equals_the_whole_frames(batch) -> None:
    """What the chain relies on: a face crop sampled from frames made ready only over its extent."""
    boxes, eyes = torch.tensor([[90.0, 40.0, 200.0, 170.0]]), torch.tensor([[[110.0, 90.0], [180.0, 100.0]]])
    index = torch.tensor([1])
    lazy = RgbFrames.from_i420(batch, lazy=True)
    lazy.tensor.fill_(float("nan"))  # what was never converted would show
    lazy.window([1], *crop_extents(boxes, eyes)[0].tolist())
    crops, _ = crop_faces(lazy.tensor, boxes, index, eyes=eyes)
    expected, _ = crop_faces(i420_to_rgb(batch), boxes, index, eyes=eyes)
    assert not crops.isnan().any()
    assert torch.equal(crops, expected)
    # a smaller window leaves pixels the crop reads unconverted: the check above could fail
    narrow = RgbFrames.from_i420(batch, lazy=True)
    narrow.tensor.fill_(float("nan"))
    narrow.window([1], 120, 80, 170, 130)
    assert crop_faces(narrow.tensor, boxes, index, eyes=eyes)[0].isnan().any()
