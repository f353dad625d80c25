"""The source face a user uploads, analysed once and cached: a square RGB crop around the face
and the face's 468 mesh points in that crop."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.detect import Detections, FaceDetector
from pipeline.landmarks import FaceMesher, boxes_from_points, crop_faces, to_frame_coords
from pipeline.swap.source_skin import source_skin
from pipeline.swap.source_texture import SourceTexture, prepare_texture
from pipeline.swap.warp import spline_controls

# Crop side / the larger side of the mesh's bounding box, and the crop's size in pixels.
SOURCE_MARGIN = 1.5
SOURCE_SIZE = 320
# FaceMesh presence below this is no face (MediaPipe's own cut).
MIN_MESH_SCORE = 0.5


@dataclass(frozen=True, eq=False)
class SourceFace:
    """image [3, S, S] float32 RGB in [0, 1]; points [468, 2] float32 in the image's pixels
    (pixel (i, j) covers [i, i+1) x [j, j+1)); both on the swapper's device. controls [K] long:
    the points the warp's spline goes through (warp.spline_controls; chosen here when not given).
    skin [1, S, S] in [0, 1]: where the image shows the face itself, not its backdrop or padding,
    from the outline, the photo's extent and, at upload, hair hanging over the forehead
    (source_skin.py; worked out here from the outline alone when not given, the whole crop taken as
    photo). face_size: the larger side of the face's mesh box in the uploaded photo's own
    pixels (None where not analysed from a photo), which says whether a swap from it can still
    look like the person (faces.MIN_FACE_SIZE)."""

    image: torch.Tensor
    points: torch.Tensor
    identity: torch.Tensor | None = None  # SFace embedding [128] (the chain adds it), for choosing faces by reference
    latent: torch.Tensor | None = None  # inswapper source latent [512], when the chain runs the learned swapper
    controls: torch.Tensor | None = None
    skin: torch.Tensor | None = None
    face_size: float | None = None
    # the prepared texture the warp reads instead of `image` (source_texture.py; made at upload)
    texture: SourceTexture | None = None

    def __post_init__(self) -> None:
        # frozen: set once, here
        if self.controls is None:
            object.__setattr__(self, "controls", spline_controls(self.points).to(self.points.device))
        if self.skin is None:
            object.__setattr__(self, "skin", source_skin(self.points, self.image.shape[-1]))

    def to(self, device: torch.device | str) -> SourceFace:
        if self.image.device == torch.device(device):
            return self  # each batch asks for each face's source: no op where it is already

        def moved(tensor: torch.Tensor | None) -> torch.Tensor | None:
            return None if tensor is None else tensor.to(device)

        return SourceFace(
            self.image.to(device),
            self.points.to(device),
            moved(self.identity),
            moved(self.latent),
            moved(self.controls),
            moved(self.skin),
            self.face_size,
            None if self.texture is None else self.texture.to(device),
        )


def mesh_points(
    frames: torch.Tensor,
    boxes: torch.Tensor,
    eyes: torch.Tensor,
    frame_index: torch.Tensor,
    mesher: FaceMesher,
    refine: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mesh points [N, 468, 3] in frame pixels and scores [N] for faces at `boxes` with `eyes`
    [N, 2, 2] in `frames` [B, H, W, 3] uint8; `refine` more passes re-crop on the mesh's own
    extent (MediaPipe's tracking ROI), which steadies the points."""
    crops, transforms = crop_faces(frames, boxes, frame_index, eyes=eyes)
    result = mesher.landmarks(crops)
    points = to_frame_coords(result.points, transforms)
    for _ in range(refine):
        boxes, eyes = boxes_from_points(points)
        crops, transforms = crop_faces(frames, boxes, frame_index, eyes=eyes)
        result = mesher.landmarks(crops)
        points = to_frame_coords(result.points, transforms)
    return points, result.scores


def analyse_source(
    image_rgb: np.ndarray,
    detector: FaceDetector,
    mesher: FaceMesher,
    *,
    size: int = SOURCE_SIZE,
    prepare: bool = True,
) -> SourceFace | None:
    """The largest face of an uploaded image [H, W, 3] uint8 RGB, or None when there is none.
    prepare: also draw its clean texture (source_texture.py), which the warp then reads."""
    device = detector.device
    upright = _upright_largest_face(image_rgb, detector)
    if upright is None:
        return None
    frame, found, best = upright.frame, upright.faces, upright.largest
    points, scores = mesh_points(
        frame,
        found.boxes[best : best + 1],
        found.keypoints[best : best + 1, :2],
        torch.zeros(1, dtype=torch.long, device=device),
        mesher,
    )
    if float(scores[0]) <= MIN_MESH_SCORE:
        return None
    xy = points[0, :, :2]
    low, high = xy.amin(dim=0), xy.amax(dim=0)
    side = max(1, math.ceil(float((high - low).amax()) * SOURCE_MARGIN))
    x0, y0 = (((low + high) / 2) - side / 2).floor().long().tolist()
    height, width = upright.image.shape[:2]
    # the square window, zero-padded where it leaves the image, then resized (antialiased); its
    # fourth channel says where the photo is (the padding must not count as the face's, source_skin.py)
    window = torch.zeros(side, side, 4, dtype=torch.uint8, device=device)
    sx0, sy0, sx1, sy1 = max(x0, 0), max(y0, 0), min(x0 + side, width), min(y0 + side, height)
    if sx1 > sx0 and sy1 > sy0:
        window[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0, :3] = frame[0, sy0:sy1, sx0:sx1]
        window[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0, 3] = 255
    image = window.permute(2, 0, 1)[None].float() / 255.0
    image = F.interpolate(image, size=(size, size), mode="bilinear", align_corners=False, antialias=side > size)[0]
    image, in_photo = image.clamp(0.0, 1.0).split((3, 1))
    crop_points = ((xy - torch.tensor([x0, y0], device=device, dtype=xy.dtype)) * (size / side)).contiguous()
    depth = points[0, :, 2:3] * (size / side)  # FaceMesh's depth, in the crop's pixels like x and y
    face_size = float((high - low).amax())
    return SourceFace(
        image.contiguous(),
        crop_points,
        skin=source_skin(crop_points, size, in_photo, image),
        face_size=face_size,
        texture=prepare_texture(image, torch.cat((crop_points, depth), dim=1), in_photo) if prepare else None,
    )


# Quarter turns tried, in order, when a photo shows no face as it is: on its side either way is
# likelier than upside down.
QUARTER_TURNS = (0, 1, 3, 2)


@dataclass(frozen=True)
class _Found:
    image: np.ndarray  # the photo, turned
    frame: torch.Tensor  # the same as [1, H, W, 3] on the detector's device
    faces: Detections
    largest: int

    @property
    def turns_to_upright(self) -> int:
        """np.rot90's k (0-3) that turns the largest face upright, from the direction eyes ->
        mouth of its key points (90 degrees in an upright face, y down)."""
        points = self.faces.keypoints[self.largest].float()
        eyes, mouth = points[:2].mean(dim=0), points[3:5].mean(dim=0)
        down = math.degrees(math.atan2(float(mouth[1] - eyes[1]), float(mouth[0] - eyes[0])))
        return round((down - 90) / 90) % 4  # rot90 by k turns a direction of angle a into a - 90k


def _upright_largest_face(image_rgb: np.ndarray, detector: FaceDetector) -> _Found | None:
    """The photo turned by quarter turns so that its largest face is upright; None when no turn
    shows a face. A photo on its side (a phone photo whose EXIF turn was lost, a turned
    screenshot) showed no face, or a face whose mesh tore the swap: RetinaFace and FaceMesh read
    upright faces. An upright photo costs one detection, as before; a photo without a face four
    (about a second for 12 MP on one CPU thread), and a false face found in a turned photo is
    analysed where the photo was refused before (the mesh's score still has to pass). After a
    correcting turn the largest face is looked up again: in a group photo it is the largest
    upright one."""
    for turns in QUARTER_TURNS:
        found = _largest_face(np.rot90(image_rgb, turns), detector)
        if found is not None:
            break
    else:
        return None
    if found.turns_to_upright:
        turned = _largest_face(np.rot90(found.image, found.turns_to_upright), detector)
        if turned is not None and turned.turns_to_upright == 0:
            return turned
    return found


def _largest_face(image: np.ndarray, detector: FaceDetector) -> _Found | None:
    image = np.ascontiguousarray(image)
    frame = torch.from_numpy(image).to(detector.device)[None]
    faces = detector.detect(frame)[0]
    if len(faces) == 0:
        return None
    sides = faces.boxes[:, 2:] - faces.boxes[:, :2]
    return _Found(image, frame, faces, int(sides.prod(dim=1).argmax()))
