"""The disclosure badge: drawn where it says, legible, and nothing else touched."""

import pytest
import torch

from pipeline.badge import badge_geometry, draw_badge


@pytest.mark.parametrize("height, width", [(480, 640), (720, 1280), (240, 320), (1000, 60), (48, 32)])
def test_badge_is_drawn_in_the_corner_only(height, width):
    """Tall, narrow frames too (a 60x1000 frame once got none, and the chain's write of its plate
    failed every frame of the batch)."""
    frames = torch.rand(2, 3, height, width)
    before = frames.clone()
    draw_badge(frames)
    top, left, plate_h, plate_w = badge_geometry(height, width)
    assert left >= 0
    changed = (frames != before).any(dim=1)
    inside = torch.zeros_like(changed)
    inside[:, top : top + plate_h, left : left + plate_w] = True
    assert changed[inside].any(), "the badge is drawn"
    assert not changed[~inside].any(), "nothing outside the badge changes"
    assert left + plate_w <= width and top + plate_h <= height
    assert plate_h >= min(height / 30, width / 2), "legible: at least ~1/30 of the frame height, as the width allows"


def test_a_frame_too_small_for_one_pixel_letters_is_left_alone():
    frames = torch.rand(1, 3, 12, 16)
    assert badge_geometry(12, 16) is None
    assert torch.equal(draw_badge(frames.clone()), frames)


def test_letters_stand_out_on_a_white_frame():
    frames = torch.ones(1, 3, 480, 640)
    draw_badge(frames)
    top, left, plate_h, plate_w = badge_geometry(480, 640)
    plate = frames[0, :, top : top + plate_h, left : left + plate_w].mean(dim=0)
    ink, background = plate.max(), plate.min()
    assert ink == 1.0 and background < 0.4, "white letters on a dark plate"
    assert (plate > 0.9).float().mean() > 0.15, "enough ink to read"
