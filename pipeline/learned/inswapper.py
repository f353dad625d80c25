"""InSwapper (InsightFace inswapper_128 and its fp16 variant): 128 x 128 target crops + source
latents -> swapped crops."""

from __future__ import annotations

from pathlib import Path

import torch
from onnx import numpy_helper

from pipeline.identity.align import ARCFACE_112
from pipeline.learned.errors import ModelFileInvalid
from pipeline.learned.model_file import build_graph, check_tensor, describe, read_model
from pipeline.onnx_torch import OnnxTorchGraph

INSWAPPER_SIZE = 128
LATENT_SIZE = 512
# The crop inswapper was trained on: the arcface_112 template shifted 8 px right, in a 128 px crop
# (use with pipeline.identity.align.align_faces(..., size=128, template=ARCFACE_128)).
ARCFACE_128 = tuple((x + 8.0, y) for x, y in ARCFACE_112)


class InSwapper:
    """The swap model on our device. Not thread-safe."""

    def __init__(self, graph: OnnxTorchGraph, emap: torch.Tensor, path: Path) -> None:
        self.graph = graph
        self.emap = emap  # [512, 512] float32 on the device
        self.path = path
        self.device = graph.device

    @torch.inference_mode()
    def latent(self, embeddings: torch.Tensor, *, renormalise: bool = True) -> torch.Tensor:
        """Source latents [N, 512] from raw ArcFace embeddings [N, 512]: n = e / |e|,
        latent = n @ emap, then latent / |latent| (InsightFace; FaceFusion skips that last step:
        `renormalise=False`)."""
        if embeddings.ndim != 2 or embeddings.shape[1] != LATENT_SIZE:
            raise ValueError(f"embeddings must be [N, {LATENT_SIZE}], not {list(embeddings.shape)}")
        e = embeddings.to(self.device, torch.float32)
        latent = (e / e.norm(dim=1, keepdim=True).clamp_min(1e-12)) @ self.emap
        if renormalise:
            latent = latent / latent.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return latent

    @torch.inference_mode()
    def swap(self, crops: torch.Tensor, latents: torch.Tensor) -> torch.Tensor:
        """crops [N, 3, 128, 128] RGB in [0, 1] (aligned with ARCFACE_128), latents [N, 512]
        -> [N, 3, 128, 128] float32 RGB clipped to [0, 1], one graph run for the whole batch."""
        size = INSWAPPER_SIZE
        if crops.ndim != 4 or tuple(crops.shape[1:]) != (3, size, size):
            raise ValueError(f"crops must be [N, 3, {size}, {size}], not {list(crops.shape)}")
        if latents.shape != (crops.shape[0], LATENT_SIZE):
            raise ValueError(f"latents must be [{crops.shape[0]}, {LATENT_SIZE}], not {list(latents.shape)}")
        if crops.shape[0] == 0:
            return torch.zeros(0, 3, size, size, device=self.device)
        out = self.graph.run(
            {"target": crops.to(self.device, torch.float32), "source": latents.to(self.device, torch.float32)}
        )
        return out["output"].float().clamp(0.0, 1.0)


def load_inswapper(
    path: str | Path, device: torch.device | str = "cpu", expected_sha256: str | None = None, *, half: bool = False
) -> InSwapper:
    """Load an inswapper ONNX file: inputs `target` [1, 3, 128, 128] and `source` [1, 512], output
    `output` [1, 3, 128, 128], the last initializer a 512 x 512 `emap`. Raises ModelFileMissing /
    ModelFileInvalid (ModelFileUnsupported for unknown ops)."""
    path = Path(path)
    model = read_model(path, expected_sha256)
    if not model.graph.initializer:
        raise ModelFileInvalid(path, "no initializers, so no emap (the last initializer, 512 x 512)")
    last = model.graph.initializer[-1]
    if list(last.dims) != [LATENT_SIZE, LATENT_SIZE]:
        raise ModelFileInvalid(
            path, f"the last initializer {last.name!r} should be the 512 x 512 emap, not {list(last.dims)}"
        )
    emap = torch.from_numpy(numpy_helper.to_array(last).astype("float32")).to(device)
    names = {v.name for v in model.graph.input} - {i.name for i in model.graph.initializer}
    if names != {"target", "source"}:
        raise ModelFileInvalid(path, f"inputs should be 'target' and 'source', not {sorted(names)}")
    graph = build_graph(path, model, torch.device(device), half)
    del model
    by_name = {s.name: s for s in graph.inputs}
    check_tensor(path, "input", by_name["target"], (1, 3, INSWAPPER_SIZE, INSWAPPER_SIZE))
    check_tensor(path, "input", by_name["source"], (1, LATENT_SIZE))
    outputs = {s.name: s for s in graph.outputs}
    if "output" not in outputs:
        raise ModelFileInvalid(path, f"no output named 'output' (outputs: {describe(graph.outputs)})")
    check_tensor(path, "output", outputs["output"], (1, 3, INSWAPPER_SIZE, INSWAPPER_SIZE))
    return InSwapper(graph, emap, path)
