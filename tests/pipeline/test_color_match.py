"""The warped source's colours moved onto the target's skin (pipeline/swap/color_match.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.swap.color_match import STD_RATIO, masked_stats, match_colour, rgb_to_ycc
from support.photos import face_rgb

SIZE = 192


def square_photo(name: str) -> torch.Tensor:
    """[1, 3, 192, 192] float RGB of the photo's top square (where its face is)."""
    photo = torch.from_numpy(face_rgb(name)).permute(2, 0, 1).float() / 255.0
    side = min(photo.shape[1:])
    return F.interpolate(
        photo[None, :, :side, :side], size=(SIZE, SIZE), mode="bilinear", antialias=True, align_corners=False
    )


def disc() -> torch.Tensor:
    """[1, 1, 192, 192]: a soft-edged disc, like a face's skin mask."""
    axis = torch.arange(SIZE) + 0.5 - SIZE / 2
    radius = (axis[None] ** 2 + axis[:, None] ** 2).sqrt()
    return ((SIZE * 0.4 - radius) / 4).clamp(0, 1)[None, None]


def test_the_source_takes_the_targets_skin_statistics() -> None:
    source, target, weight = square_photo("biden.jpg"), square_photo("obama.jpg"), disc()
    moved = match_colour(source, target, weight)
    got_mean, got_std = masked_stats(rgb_to_ycc(moved), weight)
    want_mean, want_std = masked_stats(rgb_to_ycc(target), weight)
    src_std = masked_stats(rgb_to_ycc(source), weight)[1]
    reachable = want_std.clamp(src_std * STD_RATIO[0], src_std * STD_RATIO[1])  # the spread's limits
    assert float((got_mean - want_mean).abs().max()) * 255 < 1.5  # within a grey level or so
    assert float((got_std - reachable).abs().max()) * 255 < 1.5
    before = float((masked_stats(rgb_to_ycc(source), weight)[0] - want_mean).abs().max()) * 255
    assert before > 5.0  # the photos' skins really differ: the test could fail


def test_an_empty_mask_keeps_the_colours_and_a_batch_equals_single_faces() -> None:
    source = torch.cat((square_photo("biden.jpg"), square_photo("grace_hopper.jpg")))
    target = torch.cat((square_photo("obama.jpg"), square_photo("astronaut.png")))
    weight = torch.cat((disc(), torch.zeros(1, 1, SIZE, SIZE)))
    batch = match_colour(source, target, weight)
    assert torch.allclose(batch[1:], source[1:].clamp(0, 1), atol=1e-6)
    single = match_colour(source[:1], target[:1], weight[:1])
    assert torch.allclose(batch[:1], single, atol=1e-6)
    assert float(batch.min()) >= 0.0 and float(batch.max()) <= 1.0
