"""pipeline/sampling.py: the separable affine grid equals torch's, and crops of frames taken in
place equal crops of the gathered frames."""

import torch
import torch.nn.functional as F

from pipeline.sampling import affine_grid, frames_per_crop


def test_the_affine_grid_equals_torchs() -> None:
    generator = torch.Generator().manual_seed(3)
    theta = torch.randn(5, 2, 3, generator=generator)
    for size in (1, 7, 192):
        expected = F.affine_grid(theta, [5, 3, size, size], align_corners=False)
        torch.testing.assert_close(affine_grid(theta, size), expected, atol=1e-5, rtol=1e-5)


def test_frames_are_used_in_place_only_when_each_crop_is_of_its_own_frame() -> None:
    frames = torch.rand(3, 3, 8, 10)
    assert frames_per_crop(frames, torch.arange(3)) is frames
    for index in ([2, 1, 0], [0, 0, 1], [1], [0, 1, 2, 2]):
        gathered = frames_per_crop(frames, torch.tensor(index))
        assert gathered.shape[0] == len(index) and torch.equal(gathered, frames[index])
