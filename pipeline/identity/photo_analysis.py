"""What an uploaded face photo is analysed into, once, when POST /api/faces takes it: the app builds
one for its chain (pipeline.chains.create_photo_analysis) and the routes call it, not the chain."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class PhotoAnalysis(Protocol):
    def analyse(self, image_rgb: np.ndarray) -> object | None:
        """What the chain needs of an uploaded photo ([H, W, 3] uint8 RGB), kept with it in the
        face library; None: no face in it. Raises pipeline.faces.FaceTooSmall for a face too small
        to swap from. May run on a thread of its own while the chain runs a batch."""

    def check(self, analysis: object) -> object | None:
        """How usable the analysed photo is, for the face's description (an object with
        describe() -> {"checks", "warnings"}), or None where the chain checks nothing. Raises
        pipeline.faces.UnusableFace for a photo the swap cannot use."""


class AnyPhoto:
    """For chains that use no source face: any image will do (its size stands for the analysis)."""

    def analyse(self, image_rgb: np.ndarray) -> object | None:
        return image_rgb.shape

    def check(self, analysis: object) -> object | None:
        return None
