"""The smooth fill of missing texels (pipeline/swap/harmonic_fill.py)."""

import torch

from pipeline.swap.harmonic_fill import harmonic_fill


def test_a_linear_ramp_is_filled_exactly_and_known_pixels_stay():
    """A linear function is harmonic: a hole in a ramp comes back as the ramp."""
    side = 64
    ramp = torch.linspace(0.1, 0.9, side)[None, None, None, :].expand(1, 2, side, side).clone()
    known = torch.ones(1, 1, side, side, dtype=torch.bool)
    known[..., 10:50, 20:44] = False
    holed = torch.where(known, ramp, torch.zeros_like(ramp))
    filled = harmonic_fill(holed, known)
    assert torch.equal(filled[known.expand_as(filled)], ramp[known.expand_as(ramp)])
    assert float((filled - ramp).abs().max()) < 2e-3


def test_a_hole_takes_the_colours_around_it_not_black():
    """A dark patch's place inside bright skin comes back bright, between its surroundings' values."""
    side = 80
    skin = torch.full((1, 3, side, side), 0.7)
    skin[:, 0] = 0.8
    known = torch.ones(1, 1, side, side, dtype=torch.bool)
    known[..., 30:50, 5:75] = False
    filled = harmonic_fill(torch.where(known, skin, torch.zeros_like(skin)), known)
    assert float((filled - skin).abs().max()) < 1e-3


def test_nothing_known_gives_zeros():
    assert float(harmonic_fill(torch.rand(1, 1, 16, 16), torch.zeros(1, 1, 16, 16)).abs().max()) == 0.0
