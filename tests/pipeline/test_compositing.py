"""Writing changed pixels back into I420 frames (pipeline/compositing.py): only where the change
covers, converted as the whole frame would be, everything else bit-exact."""

from __future__ import annotations

import torch

from pipeline.badge import badge_geometry
from pipeline.color import rgb_to_i420
from pipeline.compositing import bounding_window, even_window, i420_planes, write_badge, write_window
from pipeline.rgb_frames import RgbFrames
from pipeline.stage_timer import StageTimer

HEIGHT, WIDTH = 48, 64


def random_i420(frames: int = 2) -> torch.Tensor:
    generator = torch.Generator().manual_seed(7)
    return torch.randint(0, 256, (frames, HEIGHT * 3 // 2, WIDTH), dtype=torch.uint8, generator=generator)


def test_windows_are_grown_to_even_bounds_inside_the_frame():
    assert even_window(3, 10, 5, 9, HEIGHT, WIDTH) == (2, 10, 4, 10)
    assert even_window(0, HEIGHT, 1, WIDTH, HEIGHT, WIDTH) == (0, HEIGHT, 0, WIDTH)
    support = torch.zeros(2, 1, HEIGHT, WIDTH, dtype=torch.bool)
    assert bounding_window(support) is None
    support[0, 0, 5, 7] = True
    support[1, 0, 20, 30] = True  # another frame's pixel widens the window of all
    assert bounding_window(support) == (4, 22, 6, 32)


def test_a_window_is_written_where_its_support_is_set_and_nowhere_else():
    frames = random_i420()
    before = frames.clone()
    rgb = torch.rand(2, 3, HEIGHT, WIDTH)
    support = torch.zeros(2, 1, HEIGHT, WIDTH, dtype=torch.bool)
    support[0, 0, 10:15, 20:27] = True  # odd bounds: chroma blocks half covered are written too
    support[1, 0, 30, 41] = True
    window = bounding_window(support)
    write_window(frames, rgb, support, window)

    expected = rgb_to_i420(rgb.contiguous())  # what converting the whole frames gives
    y, u, v = i420_planes(frames, HEIGHT, WIDTH)
    old_y, old_u, old_v = i420_planes(before, HEIGHT, WIDTH)
    new_y, new_u, new_v = i420_planes(expected, HEIGHT, WIDTH)
    luma = support[:, 0]
    assert torch.equal(y[luma], new_y[luma]) and torch.equal(y[~luma], old_y[~luma])
    chroma = luma.view(2, HEIGHT // 2, 2, WIDTH // 2, 2).any(dim=4).any(dim=2)
    assert int(chroma.sum()) == 3 * 4 + 1  # rows 10-14 and columns 20-26: 3 x 4 blocks; one block in frame 1
    for new, old, written in ((new_u, old_u, u), (new_v, old_v, v)):
        assert torch.equal(written[chroma], new[chroma]) and torch.equal(written[~chroma], old[~chroma])


def test_a_window_given_with_an_origin_lands_there():
    frames = random_i420(1)
    before = frames.clone()
    rgb = torch.rand(1, 3, 8, 10)  # covers frame pixels from (top 20, left 30) on
    support = torch.ones(1, 1, 8, 10, dtype=torch.bool)
    write_window(frames, rgb, support, (0, 8, 0, 10), origin=(20, 30))
    changed = (frames != before)[0, :HEIGHT]
    assert not changed[:20].any() and not changed[28:].any() and not changed[:, :30].any() and not changed[:, 40:].any()
    assert torch.equal(frames[0, 20:28, 30:40], i420_planes(rgb_to_i420(rgb), 8, 10)[0][0])


def test_the_badge_changes_its_plate_only():
    frames = random_i420()
    before = frames.clone()
    rgb = RgbFrames.from_i420(frames.clone(), lazy=True)
    write_badge(frames, rgb, StageTimer())
    top, left, plate_h, plate_w = badge_geometry(HEIGHT, WIDTH)
    y = i420_planes(frames, HEIGHT, WIDTH)[0]
    changed = y != i420_planes(before, HEIGHT, WIDTH)[0]
    plate = torch.zeros_like(changed)
    plate[:, top : top + plate_h, left : left + plate_w] = True
    assert changed[plate].float().mean() > 0.5, "the badge is drawn"
    assert not changed[~plate].any(), "nothing outside its plate"
