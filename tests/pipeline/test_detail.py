"""detail.py on hand-made sampling grids: a uniform warp keeps everything, a strip of the source
stretched thin or folded over fades out."""

import torch

from pipeline.swap.detail import area_ratio, detail_weight

R = 64


def identity_grid(scale: float = 1.0) -> torch.Tensor:
    """[1, R, R, 2]: each target pixel samples the source at the same place, times `scale`."""
    axis = (torch.arange(R, dtype=torch.float32) + 0.5) / R * 2 - 1
    yy, xx = torch.meshgrid(axis, axis, indexing="ij")
    return torch.stack((xx, yy), dim=-1)[None] * scale


def test_area_ratio_is_source_pixels_per_target_pixel():
    ratio = area_ratio(identity_grid(), (R, R))
    assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-4)
    half = area_ratio(identity_grid(0.5), (R, R))
    assert torch.allclose(half, torch.full_like(half, 0.25), atol=1e-4)


def test_a_uniform_warp_keeps_the_whole_face():
    skin = torch.ones(1, 1, R, R)
    weight = detail_weight(identity_grid(0.7), (R, R), skin)
    assert torch.allclose(weight, torch.ones_like(weight))


def test_a_thin_strip_stretched_wide_or_folded_fades_out():
    grid = identity_grid()
    x = grid[..., 0]
    right = x > 0.2  # the target's right part samples a strip 5 times narrower than itself
    grid[..., 0] = torch.where(right, 0.2 + (x - 0.2) / 5, x)
    weight = detail_weight(grid, (R, R), torch.ones(1, 1, R, R))[0, 0]
    assert float(weight[:, : R // 2].min()) > 0.99
    assert float(weight[:, R * 3 // 4 :].max()) < 0.01
    folded = identity_grid()
    folded[..., 0] = torch.where(x > 0.2, 0.4 - x, x)  # the source runs backwards: a fold
    weight = detail_weight(folded, (R, R), torch.ones(1, 1, R, R))[0, 0]
    assert float(weight[:, R * 3 // 4 :].max()) < 0.01
