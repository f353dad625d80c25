"""The learned swapper: inswapper_128 with an ArcFace source identity, from a models directory.

Users bring these files (they cannot ship here): inswapper_128.onnx or inswapper_128.fp16.onnx
and w600k_r50.onnx. Both run on our torch ONNX executor on the chain's device. Each file is
SHA-256 checked: against a `SHA256SUMS` file in the models directory when there is one (lines
"<digest>  <file name>", as sha256sum writes them), else against the digests models.md records
for those names. Target crops are aligned on five points (read off the tracked face mesh) to the
arcface_128 template, swapped as one batch across sessions, and pasted back.
"""

from __future__ import annotations

from pathlib import Path

import torch

from pipeline.identity.align import ARCFACE_112, align_faces
from pipeline.learned import (
    ARCFACE_128,
    KNOWN_SHA256,
    ModelFileMissing,
    load_arcface,
    load_inswapper,
    paste_back,
)

INSWAPPER_FILES = ("inswapper_128.onnx", "inswapper_128.fp16.onnx")
ARCFACE_FILE = "w600k_r50.onnx"


class LearnedSwapper:
    def __init__(self, models_dir: Path, device: torch.device) -> None:
        candidates = [models_dir / name for name in INSWAPPER_FILES]
        inswapper = next((path for path in candidates if path.is_file()), None)
        if inswapper is None:
            raise ModelFileMissing(models_dir, f"no inswapper model here: expected one of {', '.join(INSWAPPER_FILES)}")
        arcface = models_dir / ARCFACE_FILE
        digests = expected_digests(models_dir)
        self.device = device
        self.inswapper = load_inswapper(inswapper, device, digests.get(inswapper.name))
        self.arcface = load_arcface(arcface, device, digests.get(arcface.name))

    def source_latent(self, frame_u8: torch.Tensor, five: torch.Tensor) -> torch.Tensor:
        """[512] inswapper latent of the face with five points [5, 2] in frame_u8 [H, W, 3]."""
        first = torch.zeros(1, dtype=torch.long, device=self.device)
        crops, _ = align_faces(frame_u8[None], five[None], first, size=112, template=ARCFACE_112)
        return self.inswapper.latent(self.arcface.embed(crops))[0]

    def swap(
        self,
        rgb: torch.Tensor,
        frames_u8: torch.Tensor,
        five: torch.Tensor,
        frame_index: torch.Tensor,
        latents: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """New frames [B, 3, H, W] and where they changed [B, 1, H, W] (bool)."""
        crops, transforms = align_faces(frames_u8, five, frame_index, size=128, template=ARCFACE_128)
        swapped = self.inswapper.swap(crops / 255.0, latents)
        out = paste_back(rgb, swapped, transforms, frame_index)
        return out, (out != rgb).any(dim=1, keepdim=True)


def expected_digests(models_dir: Path) -> dict[str, str]:
    """File name -> SHA-256 from models_dir/SHA256SUMS, else the known public digests."""
    sums = models_dir / "SHA256SUMS"
    if not sums.is_file():
        return dict(KNOWN_SHA256)
    digests = {}
    for line in sums.read_text().splitlines():
        digest, _, name = line.strip().partition(" ")
        if digest and name:
            digests[name.strip().lstrip("*")] = digest.lower()
    return digests
