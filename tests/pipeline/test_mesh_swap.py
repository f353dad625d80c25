"""The `mesh` swapper (pipeline/swap) on real photographs, with landmarks from the real
FaceDetector and FaceMesher: only the masked face changes, the target's geometry survives the
swap, batching changes nothing, a self-swap is close to identity."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline.detect import FaceDetector
from pipeline.landmarks import FaceMesher
from pipeline.swap import MeshSwapper, SourceFace, analyse_source
from pipeline.swap.masks import apertures, face_masks, polygon_masks
from pipeline.swap.source import mesh_points
from pipeline.swap.topology import EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, EYE_OUTER_CORNERS, INNER_LIPS
from pipeline.swap.warp import FEATURE_POINTS, SPLINE_CONTROLS, spline_controls
from support.photos import face_rgb

FRAME_H, FRAME_W = 480, 640
FACE_SIDE = 200  # face box side in the test frames, frame pixels
CPU = torch.device("cpu")


@functools.cache
def detector() -> FaceDetector:
    return FaceDetector(CPU)


@functools.cache
def mesher() -> FaceMesher:
    return FaceMesher(CPU)


@functools.cache
def source(name: str) -> SourceFace:
    found = analyse_source(face_rgb(name), detector(), mesher())
    assert found is not None, name
    return found


def landmarks(frame: torch.Tensor) -> torch.Tensor:
    """[1, 468, 3] mesh points (frame pixels) of the largest face in one frame [H, W, 3] uint8."""
    found = detector().detect(frame[None])[0]
    assert len(found) >= 1
    best = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
    points, scores = mesh_points(
        frame[None],
        found.boxes[best : best + 1],
        found.keypoints[best : best + 1, :2],
        torch.zeros(1, dtype=torch.long),
        mesher(),
    )
    assert float(scores[0]) > 0.5
    return points


@functools.cache
def target(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A 640 x 480 webcam-like frame [H, W, 3] uint8 of the photo, its face ~200 px, and its mesh points."""
    photo = torch.from_numpy(face_rgb(name))
    box = detector().detect(photo[None])[0].boxes[0]
    height, width = photo.shape[:2]
    scale = max(FACE_SIDE / float((box[2:] - box[:2]).amax()), FRAME_W / width, FRAME_H / height)
    size = (max(FRAME_H, round(height * scale)), max(FRAME_W, round(width * scale)))
    small = F.interpolate(
        photo.permute(2, 0, 1)[None].float(), size=size, mode="bilinear", antialias=True, align_corners=False
    )[0]
    cx, cy = ((box[:2] + box[2:]) / 2 * scale).round().long().tolist()
    x0 = max(0, min(size[1] - FRAME_W, cx - FRAME_W // 2))
    y0 = max(0, min(size[0] - FRAME_H, cy - FRAME_H // 2))
    frame = (
        small[:, y0 : y0 + FRAME_H, x0 : x0 + FRAME_W]
        .round()
        .clamp(0, 255)
        .to(torch.uint8)
        .permute(1, 2, 0)
        .contiguous()
    )
    return frame, landmarks(frame)


def as_float(frame: torch.Tensor) -> torch.Tensor:
    return frame.permute(2, 0, 1)[None].float() / 255.0


def as_uint8(frames: torch.Tensor) -> torch.Tensor:
    return (frames[0] * 255.0).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous()


def inter_ocular(points: torch.Tensor) -> float:
    return float((points[0, EYE_OUTER_CORNERS[0], :2] - points[0, EYE_OUTER_CORNERS[1], :2]).norm())


# masks drawn at the region's side, and at half of it as the chain does on the CPU (masks.py)
MASK_RESOLUTIONS = pytest.mark.parametrize("mask_resolution", [None, 128], ids=["full-masks", "half-masks"])


@MASK_RESOLUTIONS
@pytest.mark.parametrize(("source_name", "target_name"), [("biden.jpg", "obama.jpg"), ("obama.jpg", "biden.jpg")])
def test_swap_changes_the_face_only_and_keeps_its_geometry(
    source_name: str, target_name: str, mask_resolution: int | None
) -> None:
    frame, points = target(target_name)
    frames = as_float(frame)
    result = MeshSwapper(CPU, mask_resolution=mask_resolution).render(
        frames, points, torch.tensor([0]), [source(source_name)]
    )
    out = result.frames
    assert out.shape == frames.shape and torch.isfinite(out).all()
    assert frames.equal(as_float(frame)), "the input frames were modified"

    diff = (out - frames).abs().mean(dim=1, keepdim=True) * 255.0
    outside = result.support == 0
    inside = result.support > 0.99
    assert outside.sum() > 0.5 * outside.numel() and inside.sum() > 1000
    assert float(diff[outside].mean()) < 1.0
    assert float(diff[outside].max()) < 1e-3  # exactly unchanged, up to float rounding
    changed = float(diff[inside].mean())
    assert changed > 5.0, f"inside the mask the face changed by only {changed:.2f} grey levels"

    # the target's geometry and expression: FaceMesher on the output finds the target's mesh
    after = landmarks(as_uint8(out))
    error = float((after[0, :, :2] - points[0, :, :2]).norm(dim=-1).mean()) / inter_ocular(points)
    print(f"\n{source_name} -> {target_name}: mean change inside {changed:.1f} grey levels; "
          f"landmark error after swap {100 * error:.2f} % of the inter-ocular distance")  # fmt: skip
    assert error < 0.05


def test_a_batch_of_faces_from_two_frames_equals_single_calls() -> None:
    (frame_a, points_a), (frame_b, points_b) = target("obama.jpg"), target("biden.jpg")
    swapper = MeshSwapper(CPU)
    frames = torch.cat((as_float(frame_a), as_float(frame_b)))
    # the faces in the opposite order of their frames: frame_index does the routing
    batch = swapper.swap(
        frames, torch.cat((points_b, points_a)), torch.tensor([1, 0]), [source("obama.jpg"), source("biden.jpg")]
    )
    single_a = swapper.swap(as_float(frame_a), points_a, torch.tensor([0]), [source("biden.jpg")])
    single_b = swapper.swap(as_float(frame_b), points_b, torch.tensor([0]), [source("obama.jpg")])
    assert torch.isfinite(batch).all()
    # the same up to float rounding (the window a batch reads is as large as its largest face's)
    singles = torch.cat((single_a, single_b))
    torch.testing.assert_close(batch, singles, atol=2e-3, rtol=0)  # half a grey level
    assert float((batch - singles).abs().mean()) < 1e-5


def test_a_swap_within_the_window_it_reaches_equals_the_whole_frames_swap() -> None:
    """The chain swaps only the window `reach` gives (a fifth of a 640x480 frame for one face)."""
    frame, points = target("obama.jpg")
    swapper, faces = MeshSwapper(CPU), [source("biden.jpg")]
    frames = as_float(frame)
    whole = swapper.render(frames, points, torch.tensor([0]), faces)
    top, bottom, left, right = swapper.reach(points, *frames.shape[2:])
    assert 0 <= top < bottom <= frames.shape[2] and 0 <= left < right <= frames.shape[3]
    assert (bottom - top) * (right - left) < 0.6 * frames.shape[2] * frames.shape[3]
    window = swapper.swap(frames[:, :, top:bottom, left:right], points, torch.tensor([0]), faces, origin=(top, left))
    assert torch.equal(window, whole.frames[:, :, top:bottom, left:right])  # the same arithmetic, bit for bit
    outside = whole.support.clone()
    outside[:, :, top:bottom, left:right] = 0
    assert float(outside.abs().max()) == 0.0  # nothing outside the window changes


def test_a_face_cut_by_the_frames_edge_swaps_what_is_inside_and_nothing_else() -> None:
    frame, points = target("obama.jpg")
    left = int(points[0, :, 0].min() + 0.4 * (points[0, :, 0].max() - points[0, :, 0].min()))
    frames = as_float(frame)[:, :, :, left:].contiguous()  # the face's image-left 40 % is gone
    points = points.clone()
    points[..., 0] -= left
    swapper, faces = MeshSwapper(CPU), [source("biden.jpg")]
    result = swapper.render(frames, points, torch.tensor([0]), faces)
    assert torch.isfinite(result.frames).all()
    changed = (result.frames - frames).abs().amax(dim=1, keepdim=True)
    assert float(changed[result.support == 0].max()) < 1e-3 and float(changed[result.support > 0.99].mean()) > 0.02
    top, bottom, left, right = swapper.reach(points, *frames.shape[2:])
    assert left == 0  # the faces' window is clipped to the frame
    window = swapper.swap(frames[:, :, top:bottom, left:right], points, torch.tensor([0]), faces, origin=(top, left))
    assert torch.equal(window, result.frames[:, :, top:bottom, left:right])


def test_swapping_a_face_with_itself_changes_little() -> None:
    frame, points = target("obama3.jpg")
    frames = as_float(frame)
    result = MeshSwapper(CPU).render(frames, points, torch.tensor([0]), [source("obama3.jpg")])
    diff = (result.frames - frames).abs().mean(dim=1, keepdim=True) * 255.0
    inside = result.support > 0.99
    other = MeshSwapper(CPU).render(frames, points, torch.tensor([0]), [source("biden.jpg")])
    other_diff = float(((other.frames - frames).abs().mean(dim=1, keepdim=True) * 255.0)[inside].mean())
    self_diff = float(diff[inside].mean())
    print(f"\nself-swap: mean change inside {self_diff:.2f} grey levels (biden onto the same frame: {other_diff:.2f})")
    assert self_diff < 4.0
    assert self_diff < other_diff / 3


@MASK_RESOLUTIONS
def test_an_open_mouth_keeps_the_targets_mouth(mask_resolution: int | None) -> None:
    frame, points = target("obama.jpg")  # smiling, teeth showing
    assert float(apertures(points)[0, 2]) > 0.1
    frames = as_float(frame)
    kept = MeshSwapper(CPU, keep_eyes_mouth=True, mask_resolution=mask_resolution).render(
        frames, points, torch.tensor([0]), [source("biden.jpg")]
    )
    replaced = MeshSwapper(CPU, keep_eyes_mouth=False, mask_resolution=mask_resolution).swap(
        frames, points, torch.tensor([0]), [source("biden.jpg")]
    )
    # the mouth opening, shrunk a little, in frame pixels
    mouth = polygon_masks(kept.regions.to_region(points[:, INNER_LIPS]), kept.regions.size)
    mouth = 1.0 - F.max_pool2d(1.0 - mouth, 9, stride=1, padding=4)
    from pipeline.swap.region import add_to_frames

    opening = add_to_frames(torch.zeros_like(frames[:, :1]), kept.regions, mouth) > 0.99
    assert opening.sum() > 200
    change_kept = float(((kept.frames - frames).abs() * 255.0).mean(dim=1, keepdim=True)[opening].mean())
    change_replaced = float(((replaced - frames).abs() * 255.0).mean(dim=1, keepdim=True)[opening].mean())
    assert change_kept < 3.0 < change_replaced, (change_kept, change_replaced)


def test_no_faces_and_no_face_found() -> None:
    frame, _ = target("obama.jpg")
    frames = as_float(frame)
    out = MeshSwapper(CPU).swap(frames, torch.zeros(0, 468, 2), torch.zeros(0, dtype=torch.long), [])
    assert out.equal(frames) and out is not frames
    curtain = np.ascontiguousarray(face_rgb("obama.jpg")[:300, :300])  # flag and curtain, no face
    assert analyse_source(curtain, detector(), mesher()) is None


def test_source_face_is_a_square_crop_with_its_mesh() -> None:
    face = source("biden.jpg")
    assert face.image.shape[0] == 3 and face.image.shape[1] == face.image.shape[2]
    assert face.points.shape == (468, 2)
    assert 0.0 <= float(face.image.min()) and float(face.image.max()) <= 1.0
    assert bool(((face.points > 0) & (face.points < face.image.shape[-1])).all())


@pytest.mark.parametrize("name", ["grace_hopper.jpg", "biden.jpg"])
@pytest.mark.parametrize("turns", [1, 2, 3])
def test_a_photo_on_its_side_or_upside_down_gives_the_upright_photos_source(name: str, turns: int) -> None:
    """Read as it lay, a photo a quarter turn clockwise gave a mesh that tore the swap (SFace 0.19
    to the source, 0.49 to the target) and an upside-down one no face at all."""
    turned = np.ascontiguousarray(np.rot90(face_rgb(name), turns))
    found = analyse_source(turned, detector(), mesher())
    assert found is not None
    torch.testing.assert_close(found.points, source(name).points, rtol=0, atol=1e-3)
    torch.testing.assert_close(found.image, source(name).image, rtol=0, atol=1e-6)


def test_an_upright_photo_is_detected_once(monkeypatch) -> None:
    calls = []
    model = FaceDetector(CPU)
    monkeypatch.setattr(
        model, "detect", lambda *args, **kwargs: calls.append(1) or FaceDetector.detect(model, *args, **kwargs)
    )
    assert analyse_source(face_rgb("obama.jpg"), model, mesher()) is not None
    assert len(calls) == 1, "no turns tried for an upright face"


def test_the_spline_goes_through_every_feature_point_and_points_spread_over_the_face() -> None:
    face = source("biden.jpg")
    controls = face.controls.tolist()
    assert len(controls) == SPLINE_CONTROLS and controls == sorted(set(controls))
    assert set(FEATURE_POINTS) <= set(controls)
    assert spline_controls(face.points).tolist() == controls  # the same choice every time
    # every mesh point lies nearer to a control point than it does to a feature point alone
    xy = face.points
    to_features = torch.cdist(xy, xy[list(FEATURE_POINTS)]).amin(dim=1)
    to_controls = torch.cdist(xy, xy[controls]).amin(dim=1)
    assert float(to_controls.max()) < 0.5 * float(to_features.max())


@pytest.mark.parametrize("size", [256, 192], ids=["256-to-128", "192-to-96 as the CPU chain"])
def test_masks_drawn_at_half_the_side_keep_their_shape(size: int) -> None:
    """The CPU chain draws the masks at half the region's side and scales them up (masks.py):
    the same maps up to their edges, the open eyes and mouth still taken out, their feathered
    rims smooth (not the half-size staircase)."""
    frame, points = target("obama.jpg")  # eyes and mouth open
    swapper = MeshSwapper(CPU, region_size=size)
    region_points = swapper.render(as_float(frame), points, torch.tensor([0]), [source("biden.jpg")]).regions.to_region(
        points
    )
    full = face_masks(region_points, size)
    half = face_masks(region_points, size, resolution=size // 2)
    holes = torch.cat(
        [polygon_masks(region_points[:, part], size) for part in (EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, INNER_LIPS)], 1
    )
    holes = holes.amax(dim=1, keepdim=True)
    rims = (F.max_pool2d(holes, 13, stride=1, padding=6) - (1 - F.max_pool2d(1 - holes, 13, stride=1, padding=6))) > 0
    for name in ("alpha", "hard", "skin", "support"):
        a, b = getattr(full, name), getattr(half, name)
        assert b.shape == a.shape == (1, 1, size, size)
        assert float(b.min()) >= 0.0 and float(b.max()) <= 1.0
        difference = (a - b).abs()
        # within 3 pixels of where the full-size map changes by more than half: its edges
        edges = (F.max_pool2d(a, 7, stride=1, padding=3) + F.max_pool2d(-a, 7, stride=1, padding=3)) > 0.5
        elsewhere = float(difference[~edges & ~rims].max())
        print(
            f"\n{name}: mean difference {float(difference.mean()):.4f}, at most {elsewhere:.3f} off the edges and rims"
        )
        assert float(difference.mean()) < 0.02, name
        assert elsewhere < 0.25, name

    def roughness(alpha: torch.Tensor) -> float:  # a staircase shows as second differences along the rows
        return float((alpha[..., 2:] - 2 * alpha[..., 1:-1] + alpha[..., :-2]).abs()[rims[..., 1:-1]].mean())

    print(
        f"rims of the eyes and mouth: roughness {roughness(half.alpha):.4f} at half size, {roughness(full.alpha):.4f} at full size"
    )
    assert roughness(half.alpha) < 1.5 * roughness(full.alpha)
    mouth = polygon_masks(region_points[:, INNER_LIPS], size)
    mouth = 1.0 - F.max_pool2d(1.0 - mouth, 5, stride=1, padding=2)  # well inside the opening
    assert float(half.hard[mouth > 0.5].max()) < 0.05 and float(half.alpha[mouth > 0.5].max()) < 0.05


@pytest.mark.parametrize(
    "size, resolution", [(256, None), (192, 96)], ids=["256 as on CUDA", "192 at 96 as the CPU chain"]
)
def test_open_eyes_keep_the_targets_opening_and_the_sources_lids(size: int, resolution: int | None) -> None:
    """The target's open eye is its opening: inside, the target shows; from 2 px past the lids the
    source's face is all but fully blended in (alpha; within the first 1.5 px the target's own lid
    still shows). The wider kept rim before put the target's lashes on every swapped face, and with
    them much of who it is (SFace: 18 of 24 pairs nearer the source, 20 without it)."""
    frame, points = target("obama.jpg")  # eyes open
    swapper = MeshSwapper(CPU, region_size=size)
    region_points = swapper.render(as_float(frame), points, torch.tensor([0]), [source("biden.jpg")]).regions.to_region(
        points
    )
    masks = face_masks(region_points, size, resolution=resolution)
    unit = size / 256
    for eye in (EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT):
        opening = polygon_masks(region_points[:, eye], size)
        within = 1.0 - F.max_pool2d(1.0 - opening, 5, stride=1, padding=2)  # 2 px inside the lids
        grown = lambda px, opening=opening: F.max_pool2d(opening, 2 * px + 1, stride=1, padding=px)  # noqa: E731
        lids = (grown(round(5 * unit)) - grown(round(2 * unit))) > 0.5  # from 2 px out to 5 (at 256)
        inside, rim = float(masks.alpha[within > 0.5].max()), float(masks.alpha[lids].mean())
        print(f"\nalpha of the swapped face: at most {inside:.3f} inside the opening, {rim:.3f} on the lids round it")
        assert inside < 0.05, "the target's eye shows inside its opening"
        assert rim > 0.9, "the lids round it are the source's"


def _depth_to(alpha: torch.Tensor, start: torch.Tensor, end: torch.Tensor, level: float) -> float:
    """How far (region px) from `start` towards `end` a [1, 1, R, R] alpha first reaches `level`."""
    steps = torch.linspace(0.0, 1.0, 400)[:, None]
    line = start + (end - start) * steps  # [400, 2], region pixels
    grid = ((line / alpha.shape[-1]) * 2 - 1)[None, None]
    values = F.grid_sample(alpha, grid, mode="bilinear", align_corners=False)[0, 0, 0]
    reached = torch.nonzero(values >= level)
    assert len(reached), "never reached"
    return float(steps[reached[0, 0], 0] * (end - start).norm())


@pytest.mark.parametrize("degrees", [0, 30, 90], ids=["upright", "tilted 30 degrees", "on its side"])
@pytest.mark.parametrize(
    "size, resolution", [(256, None), (192, 96)], ids=["256 as on CUDA", "192 at 96 as the CPU chain"]
)
def test_the_forehead_fades_in_over_a_wider_band_than_the_cheeks(
    degrees: int, size: int, resolution: int | None
) -> None:
    """Where a lined forehead met a smooth one, the narrow band of the cheeks left a line across
    it (masks.py); across the forehead's upper part the swap fades in more slowly (about 1.5 times
    as far in; as far as at the cheeks before), on a tilted head along its own up (on its side, a
    fade by the image's up would widen the cheek's band instead)."""
    frame, points = target("obama.jpg")
    swapper = MeshSwapper(CPU, region_size=size)
    region_points = swapper.render(as_float(frame), points, torch.tensor([0]), [source("biden.jpg")]).regions.to_region(
        points
    )
    angle = torch.tensor(degrees * torch.pi / 180)
    turn = torch.tensor([[angle.cos(), -angle.sin()], [angle.sin(), angle.cos()]])
    centre = torch.tensor([size / 2, size / 2])
    region_points = (region_points[..., :2] - centre) @ turn.T + centre
    alpha = face_masks(region_points, size, resolution=resolution).alpha
    xy = region_points[0]
    forehead = _depth_to(alpha, xy[10], xy[9], 0.9)  # the outline's top, down to the brows' middle
    cheeks = [_depth_to(alpha, xy[side], xy[1], 0.9) for side in (234, 454)]  # the outline's sides, in to the nose tip
    print(
        f"\nalpha reaches 0.9 at {forehead:.1f} px in from the forehead's top, {cheeks[0]:.1f} and {cheeks[1]:.1f} from the cheeks'"
    )
    assert forehead > 1.3 * max(cheeks)


def test_a_nan_at_the_brows_middle_leaves_the_masks_finite() -> None:
    """The forehead's fade is measured from the brows' middle; a NaN there must not spoil every pixel."""
    frame, points = target("obama.jpg")
    swapper = MeshSwapper(CPU, region_size=256)
    region_points = swapper.render(as_float(frame), points, torch.tensor([0]), [source("biden.jpg")]).regions.to_region(
        points
    )
    broken = region_points[..., :2].clone()
    broken[0, 9] = float("nan")
    masks, reference = face_masks(broken, 256), face_masks(region_points[..., :2], 256)
    assert bool(torch.isfinite(masks.alpha).all())
    assert float((masks.alpha - reference.alpha).abs().mean()) < 0.01  # the cheeks' feather there instead


def test_a_sources_highlight_gets_no_brighter_than_the_targets_own_skin(monkeypatch) -> None:
    """biden.jpg's skin has little spread and obama.jpg's more: the colour match's std ratio
    stretched Biden's nose-tip highlight onto Obama's brighter skin as a white patch. The matched
    face's luma is eased down to the target skin's own brightest; under the knee nothing moves."""
    import pipeline.swap.color_match as color_match
    from pipeline.swap.color_match import HIGHLIGHT_KNEE, HIGHLIGHT_QUANTILE, rgb_to_ycc
    from pipeline.swap.region import read_regions

    frame, points = target("obama.jpg")
    index = torch.zeros(1, dtype=torch.long)
    swapper = MeshSwapper(CPU)
    eased = swapper.render(as_float(frame), points, index, [source("biden.jpg")])
    monkeypatch.setattr(color_match, "_no_brighter_than", lambda moved, *_: moved)
    plain = swapper.render(as_float(frame), points, index, [source("biden.jpg")])
    skin = ((eased.masks.skin * eased.source_skin) > 0.5)[0, 0]
    base = read_regions(as_float(frame), eased.regions, (0, 0))
    own = float(torch.quantile(rgb_to_ycc(base)[0, 0][skin], HIGHLIGHT_QUANTILE))
    plain_luma, eased_luma = rgb_to_ycc(plain.warped)[0, 0][skin], rgb_to_ycc(eased.warped)[0, 0][skin]
    print(
        f"\nthe face's luma, target skin's own brightest {own:.3f}: {float(plain_luma.max()):.3f} plain,"
        f" {float(eased_luma.max()):.3f} eased; {int((plain_luma > own).sum())} px above it"
    )
    assert int((plain_luma > own + 0.05).sum()) > 20, "the plain match does overshoot here: the test could fail"
    assert float(eased_luma.max()) <= own + 0.01  # the ceiling is read on every second pixel
    under = plain_luma < own - HIGHLIGHT_KNEE - 0.01
    assert torch.allclose(eased_luma[under], plain_luma[under], atol=1e-5)
