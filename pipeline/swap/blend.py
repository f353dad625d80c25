"""Seamless blend of the swapped face into its region: a multi-band (Laplacian pyramid) blend,
batched over regions.

Written as a change to the target: blend(A, B, m) - B = collapse(Laplacian(A - B) * Gauss(m)),
so where every level of the mask is 0 nothing changes. Fine detail switches over within the
feathered edge; the low frequencies (lighting, colour drift) fade over a band that widens with
each level, which hides the seam that a single alpha ramp leaves when the two skins differ.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _down(x: torch.Tensor) -> torch.Tensor:
    """Binomial blur (edges replicated), then every second pixel; computed only at the pixels
    kept, as strided sums along each axis (a depthwise convolution took five times as long on a CPU)."""
    return _halve(_halve(x, -1), -2)


def _halve(x: torch.Tensor, dim: int) -> torch.Tensor:
    """(1 4 6 4 1) / 16 along `dim` (even length; edges replicated), at every second pixel."""
    length = x.shape[dim]
    first, last = x.narrow(dim, 0, 1), x.narrow(dim, length - 1, 1)
    padded = torch.cat((first, first, x, last, last), dim=dim)

    def tap(k: int) -> torch.Tensor:
        return padded.narrow(dim, k, length).unfold(dim, 1, 2).squeeze(-1)

    out = tap(0) + tap(4)
    out.add_(tap(1) + tap(3), alpha=4.0).add_(tap(2), alpha=6.0)
    return out.mul_(1.0 / 16.0)


def _up(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


def gaussian_pyramid(x: torch.Tensor, levels: int) -> list[torch.Tensor]:
    pyramid = [x]
    for _ in range(levels):
        pyramid.append(_down(pyramid[-1]))
    return pyramid


def multiband_change(face: torch.Tensor, base: torch.Tensor, alpha: torch.Tensor, levels: int = 3) -> torch.Tensor:
    """The change [N, C, R, R] that blends `face` into `base` (both [N, C, R, R]) under the
    feathered `alpha` [N, 1, R, R], band by band. `face` should equal `base` wherever it holds no
    valid face (so that no foreign content leaks into the coarse bands)."""
    pyramid = gaussian_pyramid(torch.cat((face - base, alpha), dim=1), levels)  # both in one pass
    channels = face.shape[1]
    out = pyramid[-1][:, :channels] * pyramid[-1][:, channels:]
    for level in range(levels - 1, -1, -1):
        diff, weight = pyramid[level][:, :channels], pyramid[level][:, channels:]
        # band = diff - up(coarser diff); out = up(coarser out) + band * weight: one upsampling for both
        coarser = _up(torch.cat((out, pyramid[level + 1][:, :channels]), dim=1), diff.shape[-2:])
        coarser_out, coarser_diff = coarser.split(channels, dim=1)
        out = coarser_out + (diff - coarser_diff) * weight
    return out


def alpha_change(face: torch.Tensor, base: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """The plain alpha blend's change: alpha * (face - base)."""
    return alpha * (face - base)
