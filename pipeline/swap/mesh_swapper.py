"""The `mesh` swapper: each target face keeps its geometry, pose and expression and takes its
source face's appearance, with no learned swap weights.

Per batch of faces (of any frames, any sessions), all on the device:
region around each target mesh -> thin-plate-spline backward warp of the source (its prepared
frontal texture, source_texture.py, or its crop where it has none) onto the target's 468 points
(moved part of the way to the source's proportions, shape_transfer.py; followed loosely where a
turned head hides them, hidden_points.py) -> masks (feathered oval;
open eyes and mouth kept; faded where the warp stretches the source thin, detail.py, or reaches
past the source's outline, source_skin.py) -> on a texture, whose own light was taken out, the
target's slope of light put on (shading.py) -> colour match to the target's skin -> multi-band
blend -> the change added back to the frames.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import torch

from pipeline.swap import shape_transfer
from pipeline.swap.blend import alpha_change, multiband_change
from pipeline.swap.color_match import match_colour
from pipeline.swap.detail import detail_weight
from pipeline.swap.hidden_points import hidden_on_turned_heads
from pipeline.swap.masks import FaceMasks, face_masks
from pipeline.swap.region import FaceRegions, add_to_frames, covering_window, face_regions, read_regions
from pipeline.swap.shading import target_shading
from pipeline.swap.source import SourceFace, analyse_source
from pipeline.swap.warp import source_grid, warp_sources

__all__ = ["MeshSwapper", "SourceFace", "SwapResult", "analyse_source"]

BlendMode = Literal["multiband", "alpha"]


@dataclass(frozen=True, eq=False)
class SwapResult:
    """frames [B, 3, H, W]: the swapped frames; support [B, 1, H, W]: > 0 where a face's (dilated)
    mask reaches; every pixel where it is 0 is unchanged. regions, masks, warped ([N, 3, R, R] the
    colour-matched warped source), grid ([N, R, R, 2], where each region pixel samples the padded
    source batch, warp.py), detail ([N, 1, R, R], detail.py) and source_skin ([N, 1, R, R], the
    source's face weight carried by the warp, source_skin.py) describe each face, for inspection;
    detail and source_skin are already in the masks."""

    frames: torch.Tensor
    support: torch.Tensor
    regions: FaceRegions
    masks: FaceMasks
    warped: torch.Tensor
    grid: torch.Tensor
    detail: torch.Tensor
    source_skin: torch.Tensor


class MeshSwapper:
    """Not thread-safe only in the sense of the device: it holds no state between calls."""

    def __init__(
        self,
        device: torch.device | str,
        keep_eyes_mouth: bool = True,
        *,
        region_size: int = 256,
        blend: BlendMode = "multiband",
        levels: int = 3,
        mask_resolution: int | None = None,
    ) -> None:
        if region_size % (2**levels):
            raise ValueError(f"region_size must be a multiple of {2**levels}, not {region_size}")
        self.device = torch.device(device)
        self.keep_eyes_mouth = keep_eyes_mouth
        self.region_size = region_size
        self.blend: BlendMode = blend
        self.levels = levels
        self.mask_resolution = mask_resolution  # masks.py: drawn at this side, then scaled to the region's

    def reach(self, target_points: torch.Tensor, height: int, width: int) -> tuple[int, int, int, int]:
        """(top, bottom, left, right): the box of H x W frame pixels that a swap of faces with these
        mesh points [N, 468, 2+] can change; a caller may swap within just that window of its frames."""
        regions = face_regions(
            target_points[..., :2].float(), torch.zeros(len(target_points), dtype=torch.long), self.region_size
        )
        return covering_window(regions, height, width)

    def swap(
        self,
        frames_rgb: torch.Tensor,
        target_points: torch.Tensor,
        frame_index: torch.Tensor,
        sources: list[SourceFace],
        origin: tuple[int, int] = (0, 0),
    ) -> torch.Tensor:
        """frames_rgb [B, 3, H, W] float in [0, 1]; target_points [N, 468, 2+] in frame pixels;
        frame_index [N]: the frame of each face; sources: N source faces, one per target face;
        origin (top, left): the frame pixel at frames_rgb's corner, when they are a window of the
        frames (`reach`). Returns new frames; the inputs are not modified."""
        return self.render(frames_rgb, target_points, frame_index, sources, origin).frames

    @torch.inference_mode()
    def render(
        self,
        frames_rgb: torch.Tensor,
        target_points: torch.Tensor,
        frame_index: torch.Tensor,
        sources: list[SourceFace],
        origin: tuple[int, int] = (0, 0),
    ) -> SwapResult:
        """`swap`, with the support map and the per-face intermediates."""
        if frames_rgb.dim() != 4 or frames_rgb.shape[1] != 3 or not frames_rgb.is_floating_point():
            raise ValueError(f"frames_rgb must be float [B, 3, H, W], got {tuple(frames_rgb.shape)} {frames_rgb.dtype}")
        count = target_points.shape[0]
        if (
            target_points.dim() != 3
            or target_points.shape[2] < 2
            or frame_index.shape != (count,)
            or len(sources) != count
        ):
            raise ValueError(
                f"need target_points [N, K, 2+], frame_index [N] and N sources; got {tuple(target_points.shape)}, "
                f"{tuple(frame_index.shape)}, {len(sources)}"
            )
        frames = frames_rgb.to(self.device, torch.float32)
        size = self.region_size
        points = target_points[..., :2].to(self.device, torch.float32)
        regions = face_regions(points, frame_index.to(self.device), size)
        if count == 0:
            empty = torch.zeros(0, 1, size, size, device=self.device)
            no_masks = FaceMasks(empty, empty, empty, empty)
            no_grid = torch.zeros(0, size, size, 2, device=self.device)
            return SwapResult(
                frames.clone(), torch.zeros_like(frames[:, :1]), regions, no_masks, empty, no_grid, empty, empty
            )

        images, source_points, controls, prepared = _source_batch(sources, self.device)
        region_points = regions.to_region(points)
        base = read_regions(frames, regions, origin)
        at_controls = controls[..., None].expand(-1, -1, 2)
        hidden = None
        if target_points.shape[2] >= 3:  # with FaceMesh's depth: which points a turned head hides
            hidden = hidden_on_turned_heads(target_points.to(self.device, torch.float32))
            hidden = None if hidden is None else hidden.gather(1, controls)
        spline_points = region_points
        if shape_transfer.STRENGTH > 0 and target_points.shape[2] >= 3 and all(s.texture is not None for s in sources):
            # the source's proportions, part of the way (shape_transfer.py); the masks keep the target's
            layouts = torch.stack([s.texture.points[:, :2].to(self.device, torch.float32) for s in sources])
            moved = points + shape_transfer.shape_offsets(target_points.to(self.device, torch.float32), layouts)
            spline_points = regions.to_region(moved)
        grid = source_grid(
            spline_points.gather(1, at_controls),
            source_points.gather(1, at_controls),
            images.shape[-2:],
            size,
            hidden=hidden,
        )
        masks = face_masks(region_points, size, self.keep_eyes_mouth, self.mask_resolution)
        detail = detail_weight(grid, images.shape[-2:], masks.skin)
        warped, warped_skin = warp_sources(images, grid).split((3, 1), dim=1)  # the skin weight rides along
        shown = detail * warped_skin
        masks = replace(masks, alpha=masks.alpha * shown, hard=masks.hard * shown)
        if any(
            s.texture is not None for s in sources
        ):  # a prepared texture has its own lighting taken out: it takes the target's
            shading = target_shading(base, masks.skin)
            warped = warped * torch.where(prepared[:, None, None, None], shading, torch.ones_like(shading))
        warped = match_colour(warped, base, masks.skin * warped_skin)  # not the source's backdrop
        face = base + (warped - base) * masks.hard  # nothing foreign outside the oval (scaled-up masks: a 1-2 px ramp)
        if self.blend == "multiband":
            change = multiband_change(face, base, masks.alpha, self.levels)
        else:
            change = alpha_change(face, base, masks.alpha)
        # the change and the support pasted back together: one resampling for both
        change = torch.cat((change * masks.support, masks.support), dim=1)
        pasted = add_to_frames(torch.cat((frames, torch.zeros_like(frames[:, :1])), dim=1), regions, change, origin)
        out, support = pasted[:, :3].clamp_(0.0, 1.0), pasted[:, 3:]
        return SwapResult(out, support, regions, masks, warped, grid, detail, warped_skin)


def _source_batch(
    sources: list[SourceFace], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The source pictures (each face's prepared texture where it has one, else its crop) with
    their skin weight as a fourth channel, as one zero-padded batch [N, 4, Hs, Ws], their points
    [N, 468, 2], the spline's control points [N, K] (indices into them) and which are prepared
    textures [N] bool (their lighting taken out)."""
    drawn = [s if s.texture is None else s.texture for s in sources]
    height = max(s.image.shape[1] for s in drawn)
    width = max(s.image.shape[2] for s in drawn)
    images = torch.zeros(len(sources), 4, height, width, device=device)  # one allocation; copies move devices
    for image, source in zip(images, drawn):
        image[:3, : source.image.shape[1], : source.image.shape[2]] = source.image
        image[3:, : source.skin.shape[1], : source.skin.shape[2]] = source.skin
    points = torch.stack([s.points[:, :2].to(device, torch.float32) for s in drawn])
    controls = torch.stack([s.controls.to(device) for s in sources])
    prepared = torch.tensor([s.texture is not None for s in sources], device=device)
    return images, points, controls, prepared
