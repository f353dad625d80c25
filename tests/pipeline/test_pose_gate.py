"""The pose gate: frontal faces get the full swap, strongly turned ones fade out smoothly."""

import numpy as np
import torch

from pipeline.detect import FaceDetector
from pipeline.landmarks import FaceMesher
from pipeline.swap.pose_gate import pose_weight, turn
from pipeline.swap.source import mesh_points
from support.photos import PEOPLE, face_rgb


def test_every_portrait_is_frontal_enough_for_the_full_swap():
    detector, mesher = FaceDetector(torch.device("cpu")), FaceMesher("cpu")
    for name in PEOPLE:
        rgb = torch.from_numpy(np.ascontiguousarray(face_rgb(name)))[None]
        found = detector.detect(rgb)[0]
        points, _ = mesh_points(rgb, found.boxes[:1], found.keypoints[:1, :2], torch.zeros(1, dtype=torch.long), mesher)
        print(f"{name}: turn {float(turn(points)[0]):+.3f}")
        assert float(pose_weight(points)[0]) == 1.0


def face(nose_shift: float) -> torch.Tensor:
    """A schematic mesh: eye corners 100 px apart, the nose moved sideways by `nose_shift` of that."""
    points = torch.zeros(1, 468, 2)
    points[0, 33] = torch.tensor([100.0, 100.0])
    points[0, 263] = torch.tensor([200.0, 100.0])
    points[0, 1] = torch.tensor([150.0 + 100.0 * nose_shift, 150.0])
    return points


def test_weight_fades_smoothly_with_the_turn_either_way():
    shifts = np.linspace(-0.9, 0.9, 37)
    weights = [float(pose_weight(face(s))[0]) for s in shifts]
    assert weights[len(shifts) // 2] == 1.0
    assert weights[0] == 0.0 and weights[-1] == 0.0
    steps = np.abs(np.diff(weights))
    assert steps.max() <= 0.25, "no jumps: the swap fades"
    assert weights == weights[::-1], "symmetric for left and right turns"
