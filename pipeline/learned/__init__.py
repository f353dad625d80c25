"""Loaders for the face models users bring (inswapper_128, ArcFace w600k_r50), run on our device
through the torch ONNX executor, and the paste-back of swapped crops."""

from pipeline.learned.arcface import (
    ARCFACE_INPUT_SIZE,
    EMBEDDING_SIZE,
    ArcFace,
    load_arcface,
)
from pipeline.learned.errors import (
    ModelFileError,
    ModelFileInvalid,
    ModelFileMissing,
    ModelFileUnsupported,
)
from pipeline.learned.inswapper import (
    ARCFACE_128,
    INSWAPPER_SIZE,
    LATENT_SIZE,
    InSwapper,
    load_inswapper,
)
from pipeline.learned.model_file import (
    INSWAPPER_128_FP16_SHA256,
    KNOWN_SHA256,
    W600K_R50_SHA256,
    file_sha256,
)
from pipeline.learned.paste import box_mask, paste_back

__all__ = [
    "ARCFACE_128",
    "ARCFACE_INPUT_SIZE",
    "EMBEDDING_SIZE",
    "INSWAPPER_128_FP16_SHA256",
    "INSWAPPER_SIZE",
    "KNOWN_SHA256",
    "LATENT_SIZE",
    "W600K_R50_SHA256",
    "ArcFace",
    "InSwapper",
    "ModelFileError",
    "ModelFileInvalid",
    "ModelFileMissing",
    "ModelFileUnsupported",
    "box_mask",
    "file_sha256",
    "load_arcface",
    "load_inswapper",
    "paste_back",
]
