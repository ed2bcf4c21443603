#!/usr/bin/env bash
# One device call of issue 7's H200 study, run from the repository root on the GPU machine:
#   bash studies/h200/device.sh                (carry: .device, made here by prepare_device.sh)
# The same command every call; each one does what is still missing and stops in time (the device
# allows 10 minutes a command):
#   1. installs the carried wheels the image lacks (--no-deps, so the image's torch stays);
#   2. builds llama-cpp-python with CUDA from the carried stripped sdist, once (~4 min), and in the same
#      compile llama.cpp's llama-server (issue 23's LLMServer; studies/h200/build_llama.sh), exported
#      as CB_LLAMA_SERVER; the wheel and the build folder are kept in results/h200-study/build, ignored
#      by git and not carried, so later calls on the same warm machine install the wheel in seconds;
#   3. with STUDY_MONITOR_COST=1, measures the monitor's own cost into $OUT/monitor-overhead.txt;
#   4. runs the study's next steps in the time left (state and bundles in results/h200-study/gpu);
#      the random Llama GGUF files they load (3B: 6.4 GB) are written into results/h200-study/cache
#      in step 2, while llama.cpp compiles;
#      step 4 writes the state and the bundles (no images) as $OUT/h200-study-gpu.tar.gz after every
#      step and when it stops, so a call killed at its limit still gives back its steps;
#   5. prints the plan with every step's status into $OUT/plan.txt.
# The tables are written here, not on the device (which lacks matplotlib), from the archive:
#   consumerbench sweep studies/h200/mix.yml --summarize --from-archive docs/results/h200-study-gpu.tar.gz
# If the machine went cold between calls, commit the last fetched h200-study-gpu.tar.gz (it is
# carried with the working tree) and set STUDY_FROM to its path: a call that finds no state extracts
# it first, so the study resumes where it was (the wheel is rebuilt). STUDY_REPEATS=N
# adds runs 2..N of each workflow under each scheduler at the knee, after every other step (default: the
# sweep file's own repeats).
# STUDY_SWEEP=studies/h200/NAME.yml runs another sweep file of this folder the same way (issue 19:
# credit-threshold.yml, video-creation.yml): its state in results/h200-study/NAME, its archive
# $OUT/h200-NAME-gpu.tar.gz; the wheel and the GGUF files are shared with the study.
# STUDY_TASK=gpu-session runs studies/h200/gpu-session.sh after steps 1-2 instead of steps 3-5 (issue 22
# item 6 and issue 23's H200 table: the chatbot's harness overhead and settings grid, the model servers).
# STUDY_LLAMA=0 leaves llama.cpp out of step 2, for a sweep none of whose applications runs on it
# (captions-crowd, captions-busy). STUDY_PREPARE_ONLY=1 stops after steps 1-2; STUDY_HOLD=FILE waits,
# before step 3, until FILE is gone (studies/h200/queue.sh: its GPU tests run beside the build, never
# beside a measured run).
set -uo pipefail
CALL_S=${STUDY_CALL_S:-540}  # leave a minute of the 10 for the copy and the machine
OUT=${OUT:-/tmp/h200-study-out}
ROOT=results/h200-study
SWEEP=${STUDY_SWEEP:-studies/h200/mix.yml}
NAME=$(basename "$SWEEP" .yml)
if [ "$NAME" = mix ]; then
  STATE=$ROOT/gpu ARCHIVE=$OUT/h200-study-gpu.tar.gz
else
  STATE=$ROOT/$NAME ARCHIVE=$OUT/h200-$NAME-gpu.tar.gz
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CB_CACHE_DIR=$PWD/$ROOT/cache
REPEATS=()
if [ -n "${STUDY_REPEATS:-}" ]; then
  REPEATS=(--repeats "$STUDY_REPEATS")
fi
mkdir -p "$OUT" "$ROOT/build" "$ROOT/cache"
if [ -n "${STUDY_FROM:-}" ] && [ ! -f "$STATE/state.json" ]; then
  tar xzf "$STUDY_FROM" -C "$ROOT" || exit 1
fi
log() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*"; }

log "1. wheels"
bash studies/h200/wheels.sh || exit 1

log "2. llama-cpp-python and llama-server with CUDA; meanwhile the random GGUF files every step loads"
TASK=${STUDY_TASK:-sweep}
if [ "$TASK" = gpu-session ]; then
  # The one model of the session (6.4 GB of random f16 weights).
  python3 -c "from benchmarks.apps.textgen import local_file; from benchmarks.models import resolve
print(local_file(resolve('llama-3.2-3b@random', ('gguf',), 'Chatbot')))" > "$OUT/prepare.log" 2>&1 &
else
  python3 -m benchmarks.cli sweep "$SWEEP" --prepare --state "$STATE" > "$OUT/prepare.log" 2>&1 &
fi
prepare=$!
SERVER=$PWD/$ROOT/build/cmake/bin/llama-server
if [ "${STUDY_LLAMA:-1}" = 0 ]; then
  log "   skipped: no application of this sweep runs on llama.cpp (STUDY_LLAMA=0)"
elif [ ! -x "$SERVER" ] || ! python3 -c "import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)" 2>/dev/null; then
  wheel=$(ls "$ROOT"/build/llama_cpp_python-*.whl 2>/dev/null | head -n 1)
  if [ -z "$wheel" ] || [ ! -x "$SERVER" ]; then
    rm -f "$ROOT"/build/llama_cpp_python-*.whl
    CMAKE_BUILD_PARALLEL_LEVEL=16 bash studies/h200/build_llama.sh .device/llama_cpp_python-*-stripped.tar.gz \
      "$ROOT/build" "$ROOT/build/cmake" "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90" \
      > "$OUT/llama-build.log" 2>&1 || { tail -n 40 "$OUT/llama-build.log"; exit 1; }
    wheel=$(ls "$ROOT"/build/llama_cpp_python-*.whl | head -n 1)
  fi
  python3 -m pip install -q --no-deps --force-reinstall "$wheel" || exit 1
fi
if [ "${STUDY_LLAMA:-1}" != 0 ]; then
  export CB_LLAMA_SERVER=$SERVER
  log "   llama-server: $("$SERVER" --version 2>&1 | tail -n 1)"
fi
wait "$prepare" || { cat "$OUT/prepare.log"; exit 1; }
log "   $(tr '\n' ' ' < "$OUT/prepare.log")"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
if [ "$TASK" = gpu-session ]; then
  CALL_S=$CALL_S STUDY_ELAPSED_S=$SECONDS OUT=$OUT bash studies/h200/gpu-session.sh
  exit $?
fi
if [ -n "${STUDY_PREPARE_ONLY:-}" ]; then
  log "setup done (STUDY_PREPARE_ONLY)"
  exit 0
fi
if [ -n "${STUDY_HOLD:-}" ] && [ -e "$STUDY_HOLD" ]; then
  log "   waiting for $STUDY_HOLD to go (other GPU work of this call) before the measured runs"
  while [ -e "$STUDY_HOLD" ]; do sleep 2; done
fi

if [ -n "${STUDY_MONITOR_COST:-}" ]; then
  log "3. the monitor's own cost (issue 4), before the study loads the GPU"
  python3 -m benchmarks.perf.monitor_overhead --seconds 4 --rates 20,100 \
    > "$OUT/monitor-overhead.txt" 2>&1
  head -n 4 "$OUT/monitor-overhead.txt"
fi

log "4. study steps"
python3 -m benchmarks.cli sweep "$SWEEP" --state "$STATE" "${REPEATS[@]}" --budget-s $((CALL_S - SECONDS)) \
  --archive "$ARCHIVE"
status=$?

log "5. plan"
python3 -m benchmarks.cli sweep "$SWEEP" --plan --state "$STATE" "${REPEATS[@]}" | tee "$OUT/plan.txt"
log "done (exit $status; 0: the study is complete, 3: steps pending, call again)"
exit "$status"
