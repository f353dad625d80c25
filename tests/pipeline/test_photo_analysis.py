"""The analysis of uploaded photos (pipeline/identity): built by the app for its chain, under its own
app key, and what POST /api/faces runs. The face chains' analysis itself is tested with the chain
(test_mesh_chain.py: no face, a face too small, an upload during a batch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from client.facefuse_client import FacefuseClient, ServerError
from pipeline.chains import UnknownChain, create_photo_analysis
from pipeline.faces import FaceTooSmall
from pipeline.identity.photo_analysis import AnyPhoto
from signaling.app_keys import PHOTO_ANALYSIS
from support.server import face_path, loopback_settings, running_server


@pytest.mark.parametrize("spec", ["passthrough", "invert", "fixed-cost:1:1", "mesh:1", "no-such-chain"])
def test_chains_that_use_no_source_face_take_any_photo(spec):
    analysis = create_photo_analysis(spec, torch.device("cpu"))
    assert isinstance(analysis, AnyPhoto)
    assert analysis.analyse(np.zeros((30, 20, 3), np.uint8)) == (30, 20, 3)


def test_the_learned_swapper_needs_its_models_directory_for_the_analysis_too():
    with pytest.raises(UnknownChain, match="--models-dir"):
        create_photo_analysis("inswapper", torch.device("cpu"))


class RefusingAnalysis:
    """Stands in for a face chain's analysis: every face is too small."""

    def __init__(self) -> None:
        self.photos: list[tuple[int, ...]] = []

    def analyse(self, image_rgb: np.ndarray) -> object | None:
        self.photos.append(image_rgb.shape)
        raise FaceTooSmall("the face in the photo is 12 px across, too small to swap from")


async def test_an_upload_is_analysed_by_the_apps_photo_analysis(monkeypatch):
    """The route asks the analysis the app keeps under PHOTO_ANALYSIS (not the runner's chain)."""
    async with running_server(loopback_settings()) as (url, app):
        assert isinstance(app[PHOTO_ANALYSIS], AnyPhoto)  # the passthrough chain's
        refusing = RefusingAnalysis()
        monkeypatch.setattr(app[PHOTO_ANALYSIS], "analyse", refusing.analyse)
        async with FacefuseClient(url) as client:
            with pytest.raises(ServerError) as refused:
                await client.upload_face(face_path("obama.jpg").read_bytes())
    assert (refused.value.status, refused.value.code) == (422, "face_too_small"), refused.value
    assert "12 px across" in refused.value.message
    assert refusing.photos == [(1137, 910, 3)], "the decoded photo, analysed once"
