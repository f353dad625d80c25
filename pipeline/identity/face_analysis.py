"""The face chains' analysis of an uploaded photo: its face (crop and mesh), measured against the
MIN_FACE_SIZE floor, with its SFace identity (what a reference photo is compared by) and, for the
learned swapper, its source latent. It also gives the chain the identity of faces in frames.

The detector, the face mesh and the embedder are the chain's too (pipeline.chains.create_chain
takes them from here): they keep no state between calls, so an upload is analysed beside the
batch in progress and a new face never waits for it. Analyses run one at a time.
"""

from __future__ import annotations

import dataclasses
import math
import threading

import numpy as np
import torch

from pipeline.detect import FaceDetector
from pipeline.faces import MIN_FACE_SIZE, FaceTooSmall
from pipeline.identity.embedder import IdentityEmbedder
from pipeline.identity.source_checks import SourceChecks, refuse_unusable
from pipeline.identity.source_inspection import SourceInspection
from pipeline.landmarks import FaceMesher
from pipeline.swap.five_points import five_points
from pipeline.swap.learned_swapper import LearnedSwapper
from pipeline.swap.source import SourceFace, analyse_source


class FaceAnalysis:
    def __init__(self, device: torch.device, *, half: bool = False, learned: LearnedSwapper | None = None) -> None:
        self.device = device
        self.learned = learned
        # fp16 for the detector and the mesh on a GPU (their own tests check it gives no NaN);
        # the warp's solve stays in float64 and blending in float32.
        self.detector = FaceDetector(device, half=half)
        self.mesher = FaceMesher(device, half=half)
        self._embedder: IdentityEmbedder | None = None  # loaded by the chain's warm-up (or the first analysis)
        self._embedder_lock = threading.Lock()
        self._analysis_lock = threading.Lock()
        self._inspection = SourceInspection(self.mesher)

    def analyse(self, image_rgb: np.ndarray) -> SourceFace | None:
        """The source face (crop and mesh) and its identity, so it can also serve as a reference;
        None for no face, FaceTooSmall for one under MIN_FACE_SIZE."""
        with self._analysis_lock, torch.inference_mode():
            source = analyse_source(image_rgb, self.detector, self.mesher)
            if source is None:
                return None
            if source.face_size is not None and source.face_size < MIN_FACE_SIZE:
                raise FaceTooSmall(
                    f"the face in the photo is {math.floor(source.face_size)} px across, too small to swap from: "
                    f"upload a photo where it is at least {MIN_FACE_SIZE} px"
                )
            crop = (source.image * 255).round().to(torch.uint8).permute(1, 2, 0)[None]
            first = torch.zeros(1, dtype=torch.long, device=self.device)
            identity = self.identities(crop, source.points[None], first)[0]
            latent = None
            if self.learned is not None:
                latent = self.learned.source_latent(crop[0], five_points(source.points[None])[0])
            return dataclasses.replace(source, identity=identity, latent=latent)

    def check(self, source: SourceFace) -> SourceChecks:
        """How usable the analysed photo is (source_checks.py); raises pipeline.faces.UnusableFace
        for a face turned too far or mostly hidden."""
        with self._analysis_lock, torch.inference_mode():
            checks = self._inspection.inspect(source)
        refuse_unusable(checks)
        return checks

    def identities(self, frames_u8: torch.Tensor, points: torch.Tensor, frame_index: torch.Tensor) -> torch.Tensor:
        """SFace embeddings [N, 128] of faces given by their mesh points (frame pixels)."""
        with self._embedder_lock:  # loaded once, by whichever thread needs it first
            if self._embedder is None:
                self._embedder = IdentityEmbedder(self.device)
        return self._embedder.embed(frames_u8, five_points(points), frame_index)
