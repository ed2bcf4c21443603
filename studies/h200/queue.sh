#!/usr/bin/env bash
# The GPU work still pending (studies/h200/README.md, "Next GPU sessions") as one queue: the same command
# every call, on one warm machine, until it exits 0 (3: work left, call again at once; the machine is
# given back 30 s after a call; 4: the rest is done but the trace sweep was skipped, its tests failed;
# any other code: something failed, read the output before calling again):
#   run(kind="nvidia-h200", carry=[".device"], timeout_s=600, command="bash studies/h200/queue.sh")
# Each call:
#   - once, in the background while the first sweep's device.sh builds llama.cpp (device.sh holds its
#     sweep steps until this is done, so that nothing else runs on the GPU beside a measured run): the
#     GPU tests of kernel traces, the kernel profile in diffusers' (B, S, H, D) layout in fp16 (issue 21:
#     why cbkernels' 3 % does not reach the SD 3.5 step) and the GPU tests of the attention switch; each
#     one's exit code in results/h200-study/queue/NAME.rc (tried once: a failure is read, not retried);
#   - the sweeps of QUEUE in order, each through device.sh with the time this call has left (a sweep
#     whose device.sh exits 0 is complete: a marker in results/h200-study/queue/); their archives go to
#     $OUT as device.sh writes them. The trace sweep runs only if the trace tests passed (its traces
#     would not place kernels in their requests otherwise), and never from a committed archive (the
#     archive leaves the traces out);
#   - once a traced sweep (video-kernel-trace, captions-crowd) is complete, the caption chunks' account
#     from its kernel traces (benchmarks.perf.kernel_slices) -> $OUT/SWEEP-slices.{txt,json,md} in every
#     later call, and its first two runs' traces themselves (a few MB, not for git) under $OUT/traces/.
# Order: issue 19's kernel trace (~5 min) and captions beside K image processes (~5 min), issue 21's
# sharing grid (~13 min), issue 19's video sweep (credit's break level: ~2 min a step). A fresh machine
# first builds llama.cpp (~7 min).
set -uo pipefail
OUT=${OUT:-/tmp/h200-queue-out}
LIMIT=${LIMIT:-540}
ROOT=results/h200-study
STATE=$ROOT/queue
QUEUE=(video-kernel-trace captions-crowd kernels-sharing video-creation)
mkdir -p "$OUT" "$STATE"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
log() { echo "[$(date +%H:%M:%S) +${SECONDS}s queue] $*"; }

# The GPU's time-slice setting between processes' contexts (nvidia-smi compute-policy), for the account
# of how the captions share the GPU under greedy.
{ nvidia-smi compute-policy -l; nvidia-smi -q -d COMPUTE; } > "$OUT/compute-policy.txt" 2>&1 || true

# attempt NAME SECONDS COMMAND...: run COMMAND once ever (its output in STATE/NAME.txt, its exit code in
# STATE/NAME.rc).
attempt() {
  local name=$1 budget=$2
  shift 2
  [ -f "$STATE/$name.rc" ] && return
  timeout -k 10 "$budget" "$@" > "$STATE/$name.txt" 2>&1
  echo $? > "$STATE/$name.rc"
}

HOLD=$STATE/side.hold
rm -f "$HOLD"  # left by a call killed at its limit
if [ ! -f "$STATE/gpu-tests.rc" ]; then
  bash studies/h200/wheels.sh || { log "the carried wheels did not install"; exit 1; }
  touch "$HOLD"
  (
    trap 'rm -f "$HOLD"' EXIT
    attempt trace-tests 240 python3 -m pytest -q -p no:cacheprovider -m gpu \
      tests/benchmarks/monitor/test_kernels.py tests/benchmarks/runner/test_dag.py
    attempt kernels-h200-bshd-fp16 240 python3 -m cbkernels.profile --shape 2,24,4429,64 --dtype fp16 \
      --layout bshd --no-ncu --json "$STATE/kernels-h200-bshd-fp16.json"
    attempt gpu-tests 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/benchmarks/apps/test_attention.py
  ) &
fi

# slices SWEEP LABEL=BUNDLE...: the captions' account of a traced sweep's runs (those it has) into
# STATE/SWEEP-slices.{txt,json,md}, kept when complete (exit 1: a run without its trace, the others'
# account stands; not after a timeout), and the first two runs' traces under STATE/traces/SWEEP.
slices() {
  local sweep=$1 runs=() copy=() item
  shift
  for item in "$@"; do
    [ -f "$ROOT/$sweep/${item#*=}/result.json" ] || continue
    runs+=(--run "${item%%=*}=$ROOT/$sweep/${item#*=}")
    copy+=("${item#*=}")
  done
  [ "${#runs[@]}" -gt 0 ] || return
  timeout -k 10 300 python3 -m benchmarks.perf.kernel_slices --node captions --slo 1 "${runs[@]}" \
    --json "$STATE/slices.json.tmp" --md "$STATE/slices.md.tmp" > "$STATE/slices.txt.tmp" 2>&1
  local rc=$?
  log "$sweep: kernel slices exit $rc"
  cat "$STATE/slices.txt.tmp"
  if [ "$rc" -le 1 ]; then
    for ext in json md txt; do
      [ -f "$STATE/slices.$ext.tmp" ] && mv "$STATE/slices.$ext.tmp" "$STATE/$sweep-slices.$ext"
    done
  fi
  local run trace node
  for run in "${copy[@]:0:2}"; do
    for trace in "$ROOT/$sweep/$run"/artifacts/*/kernels.csv.gz; do
      [ -f "$trace" ] || continue
      node=$(basename "$(dirname "$trace")")
      mkdir -p "$STATE/traces/$sweep/$run/$node"
      cp "$trace" "$STATE/traces/$sweep/$run/$node/"
    done
  done
}

# The runs each traced sweep's account compares, as LABEL=BUNDLE.
declare -A ACCOUNT=(
  [video-kernel-trace]="alone-L1=video-solo-L1-captions greedy-L1=video-mix-L1-greedy alone-L3=video-solo-L3-captions greedy-L3=video-mix-L3-greedy"
  [captions-crowd]="K0=k0-mix-K-greedy K1=k1-mix-K-greedy K3=k3-mix-K-greedy K6=k6-mix-K-greedy"
)

status=0 skipped=0
for name in "${QUEUE[@]}"; do
  if [ ! -f "$STATE/$name.done" ]; then
    left=$((LIMIT - SECONDS))
    if [ "$left" -lt 150 ]; then
      log "$name: pending ($left s left in this call): call again"
      status=3
      break
    fi
    from=docs/results/h200-$name-gpu.tar.gz
    [ -f "$from" ] || from=
    if [ "$name" = video-kernel-trace ]; then
      from=
      # The trace tests run while device.sh builds; device.sh holds its steps until they are done.
      OUT=$OUT STUDY_CALL_S=$left STUDY_HOLD=$HOLD STUDY_PREPARE_ONLY=1 STUDY_SWEEP=studies/h200/$name.yml \
        bash studies/h200/device.sh || { status=$?; log "$name: device.sh setup exit $status"; break; }
      while [ -e "$HOLD" ]; do sleep 2; done
      if [ "$(cat "$STATE/trace-tests.rc" 2>/dev/null)" != 0 ]; then
        log "$name: skipped, the kernel trace tests did not pass:"
        tail -n 30 "$STATE/trace-tests.txt"
        skipped=4
        continue
      fi
      left=$((LIMIT - SECONDS))
    fi
    log "$name ($left s left)"
    OUT=$OUT STUDY_CALL_S=$left STUDY_FROM=$from STUDY_HOLD=$HOLD STUDY_SWEEP=studies/h200/$name.yml \
      bash studies/h200/device.sh
    rc=$?
    log "$name: device.sh exit $rc"
    if [ "$rc" -ne 0 ]; then
      status=$rc  # 3: steps pending, call again; another code: a failure to read first
      break
    fi
    touch "$STATE/$name.done"
  fi
  if [ -n "${ACCOUNT[$name]:-}" ] && [ ! -f "$STATE/$name-slices.txt" ]; then
    # shellcheck disable=SC2086  # the list splits into its LABEL=BUNDLE items
    slices "$name" ${ACCOUNT[$name]}
  fi
done

[ "$status" -eq 0 ] && status=$skipped
while [ -e "$HOLD" ]; do sleep 2; done
for f in trace-tests.txt kernels-h200-bshd-fp16.json kernels-h200-bshd-fp16.txt gpu-tests.txt "$STATE"/*-slices.*; do
  f=$(basename "$f")
  [ -f "$STATE/$f" ] && cp "$STATE/$f" "$OUT/"
done
[ -d "$STATE/traces" ] && cp -r "$STATE/traces" "$OUT/"
for f in "$STATE"/*.rc; do
  [ -f "$f" ] && log "$(basename "$f" .rc): exit $(cat "$f")"
done
log "done (exit $status; 0: the queue is complete, 3: call again, 4: all but the trace sweep)"
exit "$status"
