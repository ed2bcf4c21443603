#!/usr/bin/env bash
# Prepares .device/ here (ignored by git) with what the H200 study must carry to the device machine:
# the wheels its Python 3.12 lacks and llama-cpp-python's source without the parts a CUDA build with
# examples and tests off never reads (vendor/llama.cpp/{models,docs,benches} as in issue 7's
# recipe, plus tests, examples, pocs, the git history and the other GPU backends, which CMake only enters when they are
# switched on), which device.sh builds there once. The tools stay: build_llama.sh builds llama-server
# (tools/server, with tools/mtmd, tools/ui and vendor/cpp-httplib) in the same compile; a CPU build of
# that recipe from this archive was checked on 2026-12-05 (bin/llama-server, every library resolved). Everything carried, the working tree included, must
# stay under 64 MiB.
#   bash studies/h200/prepare_device.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PIP=${PIP:-.venv/bin/pip}
LLAMA_CPP=llama-cpp-python==0.3.36
DEST=.device
rm -rf "$DEST/wheels" && mkdir -p "$DEST/wheels"
# The device image has python 3.12, torch 2.11 (CUDA 13), transformers, triton and nvidia-ml-py; these
# are what the engine and the study's applications need beyond that. --no-deps: the image's own
# numpy, jinja2, requests, tqdm and typing-extensions stay as they are.
WHEELS=(
  "pydantic==2.14.4" "pydantic-core==2.50.5" "annotated-types>=0.7" "typing-inspection>=0.4"
  "pyyaml>=6.0" "psutil>=5.9" "diffusers==0.42.1" "importlib-metadata>=8" "zipp>=3.20"
  "gguf==0.19.0" "diskcache>=5.6" "soundfile>=0.12" "cffi>=1.17" "pycparser>=2.22"
  # The CLIP BPE vocabulary of the @random image models (seen missing on the H200 image).
  "open-clip-torch==3.3.0"
  # The GPU tests (studies/h200/queue.sh), where the image has no pytest.
  "pytest>=8" "pluggy>=1.5" "iniconfig>=2" "pytest-timeout>=2.3"
)
"$PIP" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  --platform any -d "$DEST/wheels" "${WHEELS[@]}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PIP" download -q --no-deps --no-binary=:all: -d "$work" "$LLAMA_CPP"
tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'llama_cpp_python-*')
rm -rf "$src"/vendor/llama.cpp/{models,docs,benches,tests,examples,pocs}
# The sdist carries its git history (a 38 MB pack): llama.cpp's build-info falls back to "unknown" without it.
rm -rf "$src/.git" "$src/vendor/llama.cpp/.git"
for backend in cann et hexagon hip metal musa opencl openvino sycl virtgpu vulkan webgpu zdnn zendnn; do
  rm -rf "$src/vendor/llama.cpp/ggml/src/ggml-$backend"
done
rm -f "$DEST"/llama_cpp_python-*.tar.gz
tar -czf "$DEST/$(basename "$src")-stripped.tar.gz" -C "$work" "$(basename "$src")"
du -ch "$DEST"/wheels/*.whl "$DEST"/*.tar.gz | tail -1
total=$(( $(du -sb "$DEST" | cut -f1) + $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) ))
echo "carried in all: $((total / 1048576)) MiB of 64 (.device and the tracked files)"
[ "$total" -lt $((64 * 1048576)) ] || { echo "over the 64 MiB carry limit" >&2; exit 1; }
