#!/usr/bin/env bash
# The first call of a GPU session on a fresh machine (studies/h200/README.md, "Next GPU sessions"): the
# kernel profile (issue 21) on the GPU while llama.cpp and llama-server build with CUDA on the CPU, then
# doctor (issue 22), then in the time left of LIMIT seconds credit at the mix's L2 (issue 19) or, with
# FIRST_CALL_THEN=model-servers, issue 23's H200 table (benchmarks.perf.model_servers --device cuda,
# ~2.5 min; its 3B random GGUF is written while llama.cpp builds). About 9.5 minutes:
#   run(kind="nvidia-h200", carry=[".device"], timeout_s=600, command="bash studies/h200/first-call.sh")
# Later calls on the still-warm machine find the build (device.sh step 2 skips it).
set -uo pipefail
FINAL=$OUT WORK=/tmp/first-call ROOT=results/h200-study LIMIT=${LIMIT:-560}
mkdir -p "$WORK" "$ROOT/build" "$ROOT/cache"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CB_CACHE_DIR=$PWD/$ROOT/cache TRITON_CACHE_DIR=/tmp/triton-cache
log() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*"; }
log "wheels"
python3 -m pip install -q --no-index --no-deps .device/wheels/*.whl > "$WORK/wheels.log" 2>&1 || tail -5 "$WORK/wheels.log"
# device.sh's own recipe (one compile for the wheel and llama-server), so its step 2 finds both built.
CMAKE_BUILD_PARALLEL_LEVEL=12 bash studies/h200/build_llama.sh .device/llama_cpp_python-*-stripped.tar.gz \
  "$ROOT/build" "$ROOT/build/cmake" "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90" > "$WORK/llama-build.log" 2>&1 &
build=$!
THEN=${FIRST_CALL_THEN:-credit}
if [ "$THEN" = model-servers ]; then
  python3 -c "from benchmarks.apps.textgen import local_file; from benchmarks.models import resolve
print(local_file(resolve('llama-3.2-3b@random', ('gguf',), 'Chatbot')))" > "$WORK/prepare-bg.log" 2>&1 &
else
  python3 -m benchmarks.cli sweep studies/h200/credit-next-level.yml --prepare --state "$ROOT/credit-next-level" \
    > "$WORK/prepare-bg.log" 2>&1 &
fi
log "kernels (llama.cpp builds on the CPU meanwhile)"
timeout -k 10 200 python3 -m cbkernels.profile --shape 2,24,4429,64 --dtype bf16 --autotune --tune-budget 80 \
  --ncu --ncu-timeout 60 --json "$FINAL/kernels-h200.json" > "$FINAL/kernels-h200.log" 2>&1
log "kernels exit $?"; tail -n 25 "$FINAL/kernels-h200.log"
if ! wait "$build"; then
  tail -n 40 "$WORK/llama-build.log"; cp "$WORK/llama-build.log" "$FINAL/"; log "no llama.cpp build: stop"; exit 1
fi
python3 -m pip install -q --no-deps --force-reinstall "$ROOT"/build/llama_cpp_python-*.whl > /dev/null 2>&1
export CB_LLAMA_SERVER=$PWD/$ROOT/build/cmake/bin/llama-server
timeout 30 python3 -m benchmarks.cli doctor > "$FINAL/doctor-h200.txt" 2>&1
log "doctor exit $?"
wait
if [ "$THEN" = model-servers ]; then
  log "model servers"
  timeout -k 15 $((LIMIT - SECONDS)) python3 -m benchmarks.perf.model_servers --device cuda \
    --json "$FINAL/model-servers-h200.json" > "$FINAL/model-servers.txt" 2>&1
  log "model servers exit $?"; tail -n 15 "$FINAL/model-servers.txt"
  exit 0
fi
log "credit at L2"
OUT=$FINAL STUDY_CALL_S=$((LIMIT - SECONDS)) STUDY_SWEEP=studies/h200/credit-next-level.yml bash studies/h200/device.sh
log "credit exit $?"
