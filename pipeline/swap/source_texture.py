"""The prepared source: an uploaded face redrawn once, at upload, as a clean texture in a frontal
frame, which every frame's warp then reads instead of the photo's crop.

1. Frontal frame: the face's own 3D mesh turned to face the camera (frontal_pose.py), its points
   made mirror-symmetric and laid out in a square texture like the crop (TEXTURE_MARGIN). Each
   texel is drawn from the photo piecewise-affinely through the mesh's triangles
   (mesh_triangles.py), so the photo's foreshortened far cheek is spread back to its full width.
2. Seen or not: a triangle the photo shows edge-on or from behind (its area in the photo against
   its frontal area), or hidden behind a nearer part of the face (hidden_points.py), or outside the
   photo, is not seen; nor is what covers the face (source_occlusion.py: hair, glasses, hands).
3. Completion: what is not seen comes from the mirrored texel, the layout being symmetric (a
   horizontal flip), the hand-over feathered so no seam shows; what neither side shows is filled
   harmonically from around (harmonic_fill.py), never left dark or stretched.
4. Lighting: the photo's own slope of light across the face is divided out (shading.py); each
   frame the target's is put on instead (mesh_swapper.py).

The features (eyes, brows, lower nose, lips) are drawn as the photo shows them unless occluded;
the shading taken out is a plane across the whole face, so they keep their contrast.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pipeline.swap.feature_regions import feature_regions
from pipeline.swap.frontal_pose import frontal_points, symmetric_layout
from pipeline.swap.harmonic_fill import harmonic_fill
from pipeline.swap.hidden_points import hidden_points
from pipeline.swap.masks import box_blur, polygon_masks
from pipeline.swap.mesh_triangles import FACE_TRIANGLES
from pipeline.swap.shading import source_shading
from pipeline.swap.source_occlusion import occlusion_map
from pipeline.swap.source_skin import colourless_edges, forehead_hair, source_skin
from pipeline.swap.topology import FACE_OVAL

# Texture side / the frontal mesh's larger extent (as the crop's SOURCE_MARGIN).
TEXTURE_MARGIN = 1.5
# A triangle is seen fully when the photo shows at least SEEN_FULLY of its frontal area, not at
# all below SEEN_FROM (about 70 and 55 degrees from head-on): the photo's pixels there are too
# few to spread over the frontal triangle without smearing.
SEEN_FROM, SEEN_FULLY = 0.35, 0.65
# The hand-over between a texel's own pixels and its mirror's, feathered over this share of the
# face's width (box_blur's radius).
SEAM_FEATHER = 0.02
# How far round each feature (a share of the face's width) nothing counts as occluded.
FEATURE_MARGIN = 0.035


@dataclass(frozen=True, eq=False)
class SourceTexture:
    """image [3, T, T] RGB in [0, 1], the face's albedo as near as the photo tells it; points
    [468, 2] in its pixels (mirror-symmetric about x = T / 2); skin [1, T, T] in [0, 1]: where the
    warp may show it (the outline's inset weight, source_skin.py). For inspection, each [1, T, T]:
    seen (how far each texel comes from the photo at that place), mirrored (from the mirrored
    place), filled (filled from around), occluded (found covered) and shading (the photo's own,
    divided out)."""

    image: torch.Tensor
    points: torch.Tensor
    skin: torch.Tensor
    seen: torch.Tensor
    mirrored: torch.Tensor
    filled: torch.Tensor
    occluded: torch.Tensor
    shading: torch.Tensor

    def to(self, device: torch.device | str) -> SourceTexture:
        if self.image.device == torch.device(device):
            return self  # each batch asks for each face's source: no op where it is already
        return SourceTexture(*(getattr(self, name).to(device) for name in self.__dataclass_fields__))


def layout_points(points: torch.Tensor, size: int) -> torch.Tensor:
    """points [468, 3] of the photo -> [468, 2]: the frontal, symmetric layout in the pixels of an
    S x S texture (the midline at x = S / 2, the mesh's box centred, its larger side S / margin)."""
    layout = symmetric_layout(frontal_points(points.float()))
    low, high = layout.amin(dim=0), layout.amax(dim=0)
    scale = size / (float((high - low).amax()) * TEXTURE_MARGIN)
    centre = torch.tensor([0.0, float(low[1] + high[1]) / 2], device=points.device)
    return (layout - centre) * scale + size / 2


def rasterise(layout: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """layout [468, 2] in texel pixels -> (triangle [S, S] long: the mesh triangle each texel
    centre lies in, -1 outside; barycentric [S, S, 3]). Once per upload, a loop over the ~850
    triangles' bounding boxes on the host."""
    xy = layout.detach().double().cpu()
    triangle = torch.full((size, size), -1, dtype=torch.long)
    barycentric = torch.zeros(size, size, 3, dtype=torch.float64)
    for index, (a, b, c) in enumerate(FACE_TRIANGLES):
        pa, pb, pc = xy[a], xy[b], xy[c]
        low = torch.minimum(torch.minimum(pa, pb), pc)
        high = torch.maximum(torch.maximum(pa, pb), pc)
        x0, y0 = max(0, int(low[0] - 0.5)), max(0, int(low[1] - 0.5))
        x1, y1 = min(size, int(high[0] + 0.5) + 1), min(size, int(high[1] + 0.5) + 1)
        if x1 <= x0 or y1 <= y0:
            continue
        ys, xs = torch.meshgrid(
            torch.arange(y0, y1, dtype=torch.float64) + 0.5,
            torch.arange(x0, x1, dtype=torch.float64) + 0.5,
            indexing="ij",
        )
        v0, v1 = pb - pa, pc - pa
        det = float(v0[0] * v1[1] - v0[1] * v1[0])
        if abs(det) < 1e-9:
            continue
        dx, dy = xs - pa[0], ys - pa[1]
        u = (dx * v1[1] - dy * v1[0]) / det
        v = (v0[0] * dy - v0[1] * dx) / det
        inside = (u >= -1e-9) & (v >= -1e-9) & (u + v <= 1 + 1e-9)
        window = triangle[y0:y1, x0:x1]
        window[inside] = index
        bary = barycentric[y0:y1, x0:x1]
        bary[inside] = torch.stack((1 - u - v, u, v), dim=-1)[inside]
    return triangle.to(layout.device), barycentric.float().to(layout.device)


def triangle_seen(points: torch.Tensor, layout: torch.Tensor) -> torch.Tensor:
    """points [468, 3] of the photo; layout [468, 2] -> [F] in [0, 1] per mesh triangle: how well
    the photo shows it (its area there against its frontal area, both in the photo's scale; 0 when
    turned away or hidden behind a nearer part of the face)."""
    corners = torch.tensor(FACE_TRIANGLES, device=points.device)  # [F, 3]

    def areas(xy: torch.Tensor) -> torch.Tensor:
        a, b, c = xy[corners[:, 0]], xy[corners[:, 1]], xy[corners[:, 2]]
        return ((b - a)[:, 0] * (c - a)[:, 1] - (b - a)[:, 1] * (c - a)[:, 0]) / 2

    photo = areas(points[:, :2].float())
    frontal = areas(layout.float())
    scale = photo.abs().sum() / frontal.abs().sum().clamp_min(1e-9)  # the layout's texels -> photo pixels
    # the frontal layout is the face seen head-on: a triangle's share of it there is the most
    # the photo can show; both keep their winding unless the photo sees it from behind
    ratio = photo / (frontal * scale).where(frontal.abs() > 1e-9, torch.ones_like(frontal))
    ratio = ratio / ratio.median().clamp_min(1e-6)  # the typical triangle as seen head-on
    seen = ((ratio - SEEN_FROM) / (SEEN_FULLY - SEEN_FROM)).clamp(0.0, 1.0)
    hidden = hidden_points(points[None].float())[0]  # [468]
    return seen * (1.0 - hidden[corners].amax(dim=1))


def photo_hair(image: torch.Tensor, points: torch.Tensor, in_photo: torch.Tensor) -> torch.Tensor:
    """[1, S, S] {0, 1}: hair over the crop's forehead and grey hair at its temples, found on the
    photo as source_skin.py finds them (a fringe is one broad dark mass, which the texture's
    skin model, learned partly under it, misses at its edges)."""
    oval = polygon_masks(points[None, list(FACE_OVAL), :2].float(), image.shape[-1]) * (in_photo[None] > 0.99)
    return torch.maximum(forehead_hair(image, points, oval), colourless_edges(image, points, oval))[0]


def prepare_texture(
    image: torch.Tensor, points: torch.Tensor, in_photo: torch.Tensor | None = None, size: int | None = None
) -> SourceTexture:
    """image [3, S, S] the source crop, RGB in [0, 1]; points [468, 3] the mesh in its pixels
    (FaceMesh's depth in the same units); in_photo [1, S, S]: where the crop holds the photo
    (analyse_source's fourth channel) -> the prepared texture, S x S unless `size` is given."""
    device = image.device
    size = size or image.shape[-1]
    layout = layout_points(points, size)
    triangle, barycentric = rasterise(layout, size)
    on_mesh = triangle >= 0
    corners = torch.tensor(FACE_TRIANGLES, device=device)[triangle.clamp_min(0)]  # [T, T, 3]
    at = (barycentric[..., None] * points[:, :2].float()[corners]).sum(dim=2)  # [T, T, 2] photo pixels
    height, width = image.shape[-2:]
    grid = at / torch.tensor([width / 2, height / 2], device=device) - 1.0
    photo = torch.ones_like(image[:1]) if in_photo is None else in_photo
    hair = photo_hair(image, points, photo)
    sources = torch.cat((image, photo, hair))[None]
    drawn = F.grid_sample(sources, grid[None], mode="bilinear", padding_mode="border", align_corners=False)
    own, in_photo_drawn, hair_drawn = drawn.split((3, 1, 1), dim=1)
    seen = torch.where(on_mesh, triangle_seen(points, layout)[triangle.clamp_min(0)], torch.zeros_like(at[..., 0]))
    seen = seen[None, None] * (in_photo_drawn > 0.99)

    face_width = float(layout[:, 0].amax() - layout[:, 0].amin())
    face = polygon_masks(layout[None, list(FACE_OVAL)], size)
    features = feature_regions(layout, size)
    # the skin model judges nothing near a feature: a brow's outer hairs and a nostril's shadow
    # reach past the mesh's contours, and taken for hair they were filled (and the swap lost the
    # source's brows: SFace 8 of 12 pairs nearer the source, 9 with a 5 % margin, the rest of the
    # texture as it was then; bench/results/2026-12-04-source-texture.md); 3.5 % keeps a strand
    # across a low forehead within reach (test_source_texture.py)
    near_features = feature_regions(layout, size, FEATURE_MARGIN)
    occluded = torch.maximum(occlusion_map(own, face, near_features, seen, face_width), (hair_drawn > 0.5).float())
    seen = seen * (1.0 - occluded)

    # the hand-over feathered, then each texel from its own place first, from the mirror after
    radius = max(1, round(SEAM_FEATHER * face_width))
    mesh = on_mesh[None, None].float()
    # blurred, then cut by itself: soft inside what is seen, never reaching into what is not
    own_share = (box_blur(seen, radius) / box_blur(mesh, radius).clamp_min(1e-6)).clamp(0.0, 1.0) * seen
    mirror_share = (1.0 - own_share) * own_share.flip(-1)
    total = own_share + mirror_share
    combined = (own * own_share + own.flip(-1) * mirror_share) / total.clamp_min(1e-6)
    known = total > 0.5
    filled_in = harmonic_fill(combined, known)
    confidence = (total / 0.5).clamp(0.0, 1.0)
    texture = combined * confidence + filled_in * (1.0 - confidence)

    # the shading read where the photo shows skin (its own or mirrored): a filled patch holds no light of its own
    shading = source_shading(texture, face * (1.0 - features) * (confidence > 0.99).float())
    texture = (texture / shading).clamp(0.0, 1.0)
    # what was filled from around is the face's best guess, not the person: the warp shows it
    # faintly at most, so a fringe's place takes the target's own forehead (as source_skin.py did)
    filled = (1.0 - box_blur(confidence, radius)) * (1.0 - near_features)
    skin = source_skin(layout, size) * (1.0 - filled)[0]
    return SourceTexture(
        image=texture[0].contiguous(),
        points=layout.contiguous(),
        skin=skin,
        seen=own_share[0],
        mirrored=(mirror_share / total.clamp_min(1e-6) * confidence)[0],
        filled=(1.0 - confidence)[0],
        occluded=occluded[0],
        shading=shading[0],
    )
