"""Faces looked for in frames turned by quarter turns (pipeline/detect/turned.py)."""

import numpy as np
import pytest
import torch

from pipeline.detect import FaceDetector
from pipeline.detect.turned import detect_turned, turned_back_points, upright_turns
from support.photos import face_rgb


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
def test_a_point_of_a_turned_frame_goes_back_where_it_was(turns):
    """A marked pixel of a 7 x 5 frame, turned by np.rot90: its centre in the turned frame, turned
    back, is its centre in the frame."""
    height, width, y, x = 5, 7, 1, 5
    frame = np.zeros((height, width), np.uint8)
    frame[y, x] = 1
    ty, tx = np.argwhere(np.rot90(frame, turns))[0]
    back = turned_back_points(torch.tensor([[tx + 0.5, ty + 0.5]]), turns, height, width)[0]
    assert back.tolist() == [x + 0.5, y + 0.5]


@pytest.mark.parametrize("turns", [1, 2, 3])
def test_a_face_on_its_side_or_upside_down_is_found_where_it_is(turns):
    """biden.jpg turned a quarter or half turn: looked at with the turn undone, the face is found
    at the box and key points it has upright, turned with the photo."""
    detector = FaceDetector(torch.device("cpu"))
    upright = torch.from_numpy(np.ascontiguousarray(face_rgb("biden.jpg")))[None]
    height, width = upright.shape[1:3]
    [expected] = detector.detect(upright)
    frame = torch.rot90(upright, turns, dims=(1, 2)).contiguous()  # as a camera on its side sends it
    [found] = detect_turned(detector, frame, 4 - turns)
    assert len(found) == len(expected) == 1
    turned_height, turned_width = frame.shape[1:3]
    assert (turned_height, turned_width) == ((width, height) if turns % 2 else (height, width))
    # the upright photo is the turned frame turned 4 - turns more: its points, turned back from
    # there, are where the face lies in the turned frame
    where = turned_back_points(expected.keypoints[0], 4 - turns, turned_height, turned_width)
    assert torch.allclose(found.keypoints[0], where, atol=2.0), (found.keypoints[0], where)
    side = float((expected.boxes[0, 2:] - expected.boxes[0, :2]).amax())
    corners = turned_back_points(expected.boxes[0].view(2, 2), 4 - turns, turned_height, turned_width)
    assert torch.allclose(found.boxes[0], torch.cat((corners.amin(dim=0), corners.amax(dim=0))), atol=0.02 * side)


@pytest.mark.parametrize(
    "degrees, turns", [(5, 0), (44, 0), (46, 1), (80, 1), (-85, 3), (-145, 2), (179, 2), (-175, 2)]
)
def test_the_turn_that_shows_a_face_upright(degrees, turns):
    """A face whose eye line lies at `degrees` in the image (y down): turned `turns` quarter turns
    counter-clockwise, its eye line lies within 45 degrees of level."""
    points = torch.zeros(468, 2)
    points[263] = torch.tensor([np.cos(np.radians(degrees)), np.sin(np.radians(degrees))])
    assert upright_turns(points) == turns


def test_a_broken_mesh_is_looked_for_upright():
    assert upright_turns(torch.full((468, 2), float("nan"))) == 0
