"""A small ONNX executor in torch: the models users bring run batched on our device, no onnxruntime."""

from pipeline.onnx_torch.core import (
    GraphRunError,
    OnnxTorchError,
    UnsupportedOperator,
    batch_rule,
)
from pipeline.onnx_torch.graph import OnnxTorchGraph, TensorSpec, load_graph

__all__ = [
    "GraphRunError",
    "OnnxTorchError",
    "OnnxTorchGraph",
    "TensorSpec",
    "UnsupportedOperator",
    "batch_rule",
    "load_graph",
]
