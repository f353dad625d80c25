"""Errors about the model files users bring."""

from __future__ import annotations

from pathlib import Path


class ModelFileError(Exception):
    """A user-supplied model file cannot be used; `path` names it and `reason` says why."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class ModelFileMissing(ModelFileError):
    """No file at the configured path (or a directory there)."""


class ModelFileInvalid(ModelFileError):
    """The file exists but is not the model asked for: not ONNX, wrong interface, wrong digest."""


class ModelFileUnsupported(ModelFileInvalid):
    """A valid ONNX model that uses operators our torch executor does not implement."""
