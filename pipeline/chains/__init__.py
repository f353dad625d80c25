"""The chains the server can run, by name.

A chain spec is a name, optionally followed by ':'-separated numbers:
`passthrough`, `invert`, `fixed-cost:BATCH_MS:FRAME_MS` (default 10:1), `mesh` (the face swap),
`inswapper` (the face swap with the learned models users bring, from `models_dir`).

`create_photo_analysis` builds what analyses the photos uploaded for a chain (for the face chains,
the face models the chain then shares); the app builds it first and hands it to `create_chain`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from pipeline.chain import Chain
from pipeline.chains.fixed_cost import FixedCostChain
from pipeline.chains.invert import InvertChain
from pipeline.chains.passthrough import PassthroughChain
from pipeline.faces import FaceLibrary
from pipeline.identity.photo_analysis import AnyPhoto, PhotoAnalysis

CHAIN_NAMES = ("passthrough", "invert", "fixed-cost", "mesh", "inswapper")
FACE_CHAINS = ("mesh", "inswapper")


class UnknownChain(ValueError):
    pass


def create_photo_analysis(spec: str, device: torch.device, *, models_dir: Path | None = None) -> PhotoAnalysis:
    """For the face chains, their face models (and the learned swapper's); any photo will do for the others."""
    name, _, args = spec.partition(":")
    if name not in FACE_CHAINS or args:
        return AnyPhoto()
    # loads the face models: only when asked for
    from pipeline.identity.face_analysis import FaceAnalysis
    from pipeline.swap.learned_swapper import LearnedSwapper

    learned = None
    if name == "inswapper":
        if models_dir is None:
            raise UnknownChain("chain 'inswapper' needs a models directory (--models-dir) with your model files")
        learned = LearnedSwapper(models_dir, device)
    return FaceAnalysis(device, half=device.type == "cuda", learned=learned)  # fp16 models on a GPU


def create_chain(
    spec: str,
    device: torch.device,
    faces: FaceLibrary | None = None,
    *,
    badge: bool = True,
    keep_eyes_mouth: bool = True,
    hands: bool = True,
    models_dir: Path | None = None,
    analysis: PhotoAnalysis | None = None,
) -> Chain:
    """`analysis`: from create_photo_analysis for the same spec (a face chain shares its models);
    built here when not given."""
    name, _, args = spec.partition(":")
    if name in FACE_CHAINS and not args:
        from pipeline.chains.face_swap import FaceSwapChain

        if analysis is None:
            analysis = create_photo_analysis(spec, device, models_dir=models_dir)
        return FaceSwapChain(
            device,
            faces if faces is not None else FaceLibrary(),
            analysis,
            badge=badge,
            keep_eyes_mouth=keep_eyes_mouth,
            hands=hands,
        )
    if name == "passthrough" and not args:
        return PassthroughChain()
    if name == "invert" and not args:
        return InvertChain(device)
    if name == "fixed-cost":
        try:
            numbers = [float(part) for part in args.split(":")] if args else [10.0, 1.0]
        except ValueError:
            numbers = []
        if len(numbers) != 2 or not all(0 <= number < float("inf") for number in numbers):
            raise UnknownChain(f"chain {spec!r}: expected fixed-cost:BATCH_MS:FRAME_MS, each a number >= 0")
        return FixedCostChain(*numbers)
    raise UnknownChain(f"unknown chain {spec!r}; choose one of {', '.join(CHAIN_NAMES)}")
