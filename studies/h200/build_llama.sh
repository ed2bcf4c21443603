#!/usr/bin/env bash
# One compile of llama.cpp for both llama-cpp-python and llama.cpp's HTTP server (issue 23's LLMServer),
# from the stripped sdist that prepare_device.sh carries (device.sh's step 2), its server with the step gate:
#   bash studies/h200/build_llama.sh SDIST WHEEL_DIR BUILD_DIR [CMAKE_ARGS of the flavour]
# pip builds the wheel with scikit-build-core in BUILD_DIR (its build-dir setting, kept afterwards) and
# llama.cpp's tools switched on with the server, so the server links the very libllama/libggml the wheel
# ships; only the server's target (and what it links: llama, ggml and its backends, mtmd, common) is
# built, as far as the build backend lets us name targets (scikit-build-core >= 0.10: build.targets;
# older: cmake.targets), so the tools nobody runs cost no compile time. llama.cpp puts every binary and
# shared library of the build in BUILD_DIR/bin, where the server's RUNPATH and the libraries' $ORIGIN
# find each other: the server is BUILD_DIR/bin/llama-server (checked with ldd; printed last).
# The flavour's flags (e.g. -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90) come as the 4th argument;
# CMAKE_BUILD_PARALLEL_LEVEL sets the jobs. Needs scikit-build-core in the running Python (the device
# image has it; --no-build-isolation keeps the image's torch and numpy) unless BUILD_ISOLATION=1.
set -euo pipefail
SDIST=$1 WHEEL_DIR=$2 BUILD_DIR=$3 FLAVOUR=${4:-}
PY=${PY:-python3}
# The server without its web UI (no npm, no download: LLAMA_USE_PREBUILT_UI=OFF) and without TLS.
SERVER_ARGS="-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TESTS=OFF"
targets_key=$("$PY" - <<'PY'
try:
    import importlib.metadata as m
    major, minor = (int(x) for x in m.version("scikit-build-core").split(".")[:2])
    print("build.targets" if (major, minor) >= (0, 10) else "cmake.targets")
except Exception:
    print("build.targets")  # build isolation fetches the newest
PY
)
isolation=(--no-build-isolation)
[ "${BUILD_ISOLATION:-0}" = 1 ] && isolation=()
mkdir -p "$WHEEL_DIR" "$BUILD_DIR"
# scikit-build-core reads build-dir relative to the unpacked sdist (a temporary folder): absolute paths.
BUILD_DIR=$(cd "$BUILD_DIR" && pwd) WHEEL_DIR=$(cd "$WHEEL_DIR" && pwd)
# The server gets the scheduler's step gate (benchmarks/apps/server_gate.patch, as `make install` does);
# the bindings' sources are untouched by it.
GATE_PATCH=$(cd "$(dirname "$0")/../.." && pwd)/benchmarks/apps/server_gate.patch
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
tar -xzf "$SDIST" -C "$src"
tree=$(find "$src" -mindepth 1 -maxdepth 1 -type d)
if command -v patch > /dev/null; then
  patch -s -p1 -d "$tree/vendor/llama.cpp" < "$GATE_PATCH"
else
  (cd "$tree/vendor/llama.cpp" && GIT_DIR=/nonexistent git apply "$GATE_PATCH")
fi
CMAKE_ARGS="$FLAVOUR $SERVER_ARGS" "$PY" -m pip wheel -q --no-deps "${isolation[@]}" \
  --config-settings=build-dir="$BUILD_DIR" --config-settings="$targets_key"=llama-server \
  -w "$WHEEL_DIR" "$tree"
server=$BUILD_DIR/bin/llama-server
test -x "$server" || { echo "no $server after the build" >&2; exit 1; }
if ldd "$server" | grep -q "not found"; then
  ldd "$server" >&2
  echo "$server: shared libraries not found" >&2
  exit 1
fi
"$server" --version 2>&1 | tail -n 2 >&2
echo "$server"
