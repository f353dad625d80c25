"""The models behind an uploaded face's checks (source_checks.py): FaceMesh run again on the
source crop for its depth, which the analysis does not keep, and the hand models, for a hand in
front of the face. Run once per upload, one at a time (the face analysis holds its lock)."""

from __future__ import annotations

import torch

from pipeline.hands import HandLandmarker, PalmDetector, hand_masks
from pipeline.identity.source_checks import SourceChecks, measure, smoothed_hands
from pipeline.landmarks import FaceMesher, boxes_from_points, crop_faces, to_frame_coords
from pipeline.swap.source import SourceFace


class SourceInspection:
    def __init__(self, mesher: FaceMesher) -> None:
        self.mesher = mesher
        self._palms: PalmDetector | None = None  # loaded with the first upload: a server may never take one
        self._hands: HandLandmarker | None = None

    def inspect(self, source: SourceFace) -> SourceChecks:
        """The checks of an analysed source face (its crop, mesh, skin and face size)."""
        return measure(source.image, self.depth_points(source), source.skin, source.face_size, self.hands(source))

    def depth_points(self, source: SourceFace) -> torch.Tensor:
        """[468, 3]: the mesh of the source crop with FaceMesh's depth, in the crop's pixels."""
        boxes, eyes = boxes_from_points(source.points[None])
        frame_index = torch.zeros(1, dtype=torch.long, device=source.image.device)
        crops, transforms = crop_faces(source.image[None], boxes, frame_index, eyes=eyes)
        return to_frame_coords(self.mesher.landmarks(crops).points, transforms)[0]

    def hands(self, source: SourceFace) -> torch.Tensor | None:
        """[S, S] in [0, 1] where a hand lies over the crop, or None."""
        device = source.image.device
        if self._palms is None or self._hands is None:
            self._palms, self._hands = PalmDetector(device), HandLandmarker(device)
        frame = source.image[None]
        (found,) = self._hands.landmarks(frame, self._palms.detect(frame))
        size = source.image.shape[-1]
        return smoothed_hands(hand_masks([found], size, size, device))
