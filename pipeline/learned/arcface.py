"""ArcFace (InsightFace w600k_r50 and compatible files): aligned 112 x 112 crops -> 512-d embeddings."""

from __future__ import annotations

from pathlib import Path

import torch

from pipeline.learned.errors import ModelFileInvalid
from pipeline.learned.model_file import build_graph, check_tensor, describe, read_model
from pipeline.onnx_torch import OnnxTorchGraph

ARCFACE_INPUT_SIZE = 112
EMBEDDING_SIZE = 512


class ArcFace:
    """The recognition model on our device. Crops come from `pipeline.identity.align.align_faces`
    with the ARCFACE_112 template. Not thread-safe."""

    def __init__(self, graph: OnnxTorchGraph, path: Path) -> None:
        self.graph = graph
        self.path = path
        self.device = graph.device
        self._input = graph.input_names[0]
        self._output = graph.output_names[0]

    @torch.inference_mode()
    def embed(self, aligned: torch.Tensor) -> torch.Tensor:
        """[N, 3, 112, 112] float RGB on the 0-255 scale -> [N, 512] float32 raw embeddings
        (not normalised), on this model's device. The whole batch runs as one graph run."""
        size = ARCFACE_INPUT_SIZE
        if aligned.ndim != 4 or tuple(aligned.shape[1:]) != (3, size, size):
            raise ValueError(f"aligned must be [N, 3, {size}, {size}], not {list(aligned.shape)}")
        if aligned.shape[0] == 0:
            return torch.zeros(0, EMBEDDING_SIZE, device=self.device)
        x = (aligned.to(self.device, torch.float32) - 127.5) / 127.5
        return self.graph.run({self._input: x})[self._output].float().reshape(-1, EMBEDDING_SIZE)


def load_arcface(
    path: str | Path, device: torch.device | str = "cpu", expected_sha256: str | None = None, *, half: bool = False
) -> ArcFace:
    """Load an ArcFace ONNX file: one input [1, 3, 112, 112], one output [1, 512] (batch 1 or
    symbolic). Raises ModelFileMissing / ModelFileInvalid (ModelFileUnsupported for unknown ops)."""
    path = Path(path)
    model = read_model(path, expected_sha256)
    graph = build_graph(path, model, torch.device(device), half)
    del model
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise ModelFileInvalid(
            path,
            f"an ArcFace model has one input and one output; this one has inputs {describe(graph.inputs)} "
            f"and outputs {describe(graph.outputs)}",
        )
    check_tensor(path, "input", graph.inputs[0], (1, 3, ARCFACE_INPUT_SIZE, ARCFACE_INPUT_SIZE))
    check_tensor(path, "output", graph.outputs[0], (1, EMBEDDING_SIZE))
    return ArcFace(graph, path)
