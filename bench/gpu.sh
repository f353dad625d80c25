#!/usr/bin/env bash
# All GPU checks in one run (target: under 5 minutes on one GPU): the tests marked `gpu`
# (they skip without CUDA) and the GPU benchmarks. Run on a machine with CUDA torch:
#   PYTHON=/path/to/python3 bash bench/gpu.sh
# The python must hold this project's dependencies (torch with CUDA, av, aiortc, aiohttp, numpy,
# pytest, pytest-asyncio, cupy); the venv of the README's first command works on a CUDA machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}

"$PYTHON" - <<'PY'
import torch
assert torch.cuda.is_available(), "bench/gpu.sh needs a CUDA device"
print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__)
PY

# Every GPU test, with the reasons of any skip shown: none may skip here.
"$PYTHON" -m pytest -m gpu -rs -q -p no:cacheprovider tests

# GPU benchmarks join here as the face chain's stages land (see the README's benchmark section).
