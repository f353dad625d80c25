"""Reading a user's ONNX file: existence, optional SHA-256, parse, interface checks, executor."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import onnx
import torch

from pipeline.learned.errors import (
    ModelFileInvalid,
    ModelFileMissing,
    ModelFileUnsupported,
)
from pipeline.onnx_torch import OnnxTorchGraph, TensorSpec, UnsupportedOperator

# From one public distribution (docs/models.md); verify your own copies. The fp32 inswapper_128.onnx
# has its own digest, not recorded here.
INSWAPPER_128_FP16_SHA256 = "6d51a9278a1f650cffefc18ba53f38bf2769bf4bbff89267822cf72945f8a38b"
W600K_R50_SHA256 = "4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43"
KNOWN_SHA256 = {
    "inswapper_128.fp16.onnx": INSWAPPER_128_FP16_SHA256,
    "w600k_r50.onnx": W600K_R50_SHA256,
}


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_model(path: str | Path, expected_sha256: str | None = None) -> onnx.ModelProto:
    """The parsed model, after the existence and (when `expected_sha256` is given) digest checks."""
    path = Path(path)
    if not path.exists():
        raise ModelFileMissing(path, "no such file")
    if not path.is_file():
        raise ModelFileMissing(path, "not a regular file")
    if expected_sha256 is not None:
        actual = file_sha256(path)
        if actual != expected_sha256.strip().lower():
            raise ModelFileInvalid(path, f"SHA-256 is {actual}, expected {expected_sha256}")
    try:
        model = onnx.load(str(path))
    except Exception as error:
        raise ModelFileInvalid(path, f"not an ONNX model ({type(error).__name__}: {error})") from error
    if not model.graph.node or not model.graph.output:
        raise ModelFileInvalid(path, "not an ONNX model (no graph nodes or outputs)")
    return model


def build_graph(path: str | Path, model: onnx.ModelProto, device: torch.device, half: bool) -> OnnxTorchGraph:
    try:
        return OnnxTorchGraph(model, device, half)
    except UnsupportedOperator as error:
        raise ModelFileUnsupported(path, str(error)) from error


def _matches(spec: TensorSpec, dims: Sequence[int]) -> bool:
    """Declared shape fits `dims` with the batch (first) dimension free (1 or symbolic)."""
    if spec.shape is None:
        return True
    if len(spec.shape) != len(dims):
        return False
    return spec.shape[0] in (1, None) and all(
        d is None or d == want for d, want in zip(spec.shape[1:], dims[1:], strict=True)
    )


def _show(spec: TensorSpec) -> str:
    dims = "?" if spec.shape is None else "[" + ",".join("N" if d is None else str(d) for d in spec.shape) + "]"
    return f"{spec.name!r} {dims}"


def check_tensor(path: str | Path, role: str, spec: TensorSpec, dims: Sequence[int]) -> None:
    if spec.elem_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
        raise ModelFileInvalid(path, f"{role} {_show(spec)} is not float")
    if not _matches(spec, dims):
        raise ModelFileInvalid(path, f"{role} {_show(spec)} should be [1,{','.join(map(str, dims[1:]))}]")


def describe(specs: Sequence[TensorSpec]) -> str:
    return ", ".join(_show(s) for s in specs) or "none"
