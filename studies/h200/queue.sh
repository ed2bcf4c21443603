#!/usr/bin/env bash
# The GPU work still pending (studies/h200/README.md, "Next GPU sessions") as one queue: the same command
# every call, on one warm machine, until it exits 0 (3: work left, call again at once; the machine is
# given back 30 s after a call):
#   run(kind="nvidia-h200", carry=[".device"], timeout_s=600, command="bash studies/h200/queue.sh")
# Each call:
#   - once, in the background while the first sweep's device.sh builds llama.cpp: the kernel profile in
#     diffusers' (B, S, H, D) layout in fp16 (issue 21: why cbkernels' 3 % does not reach the SD 3.5
#     step) and the GPU tests of the attention switch and of kernel traces;
#   - the sweeps of QUEUE in order, each through device.sh with the time this call has left (a sweep
#     whose device.sh exits 0 is complete: a marker in results/h200-study/queue/); their archives go to
#     $OUT as device.sh writes them;
#   - once the trace sweep is complete, the caption chunks' account from its kernel traces
#     (benchmarks.perf.kernel_slices) -> $OUT/video-kernel-slices-h200.{txt,json} in every later call:
#     the traces stay on the machine (the archive leaves them out).
# Order: issue 19's kernel trace (~5 min), issue 21's sharing grid (~13 min), issue 19's video sweep
# (credit's break level: ~2 min a step). A fresh machine first builds llama.cpp (~7 min).
set -uo pipefail
OUT=${OUT:-/tmp/h200-queue-out}
LIMIT=${LIMIT:-540}
ROOT=results/h200-study
STATE=$ROOT/queue
QUEUE=(video-kernel-trace kernels-sharing video-creation)
mkdir -p "$OUT" "$STATE"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
log() { echo "[$(date +%H:%M:%S) +${SECONDS}s queue] $*"; }

# The GPU's time-slice setting between processes' contexts (nvidia-smi compute-policy), for the account
# of how the captions share the GPU under greedy.
{ nvidia-smi compute-policy -l; nvidia-smi -q -d COMPUTE; } > "$OUT/compute-policy.txt" 2>&1 || true
side=
if [ ! -f "$STATE/side.done" ]; then
  (
    timeout -k 10 240 python3 -m cbkernels.profile --shape 2,24,4429,64 --dtype fp16 --layout bshd --no-ncu \
      --json "$STATE/kernels-h200-bshd-fp16.json" > "$STATE/kernels-h200-bshd-fp16.txt" 2>&1
    timeout -k 10 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/benchmarks/apps/test_attention.py \
      tests/benchmarks/monitor/test_kernels.py tests/benchmarks/runner/test_dag.py > "$STATE/gpu-tests.txt" 2>&1
    touch "$STATE/side.done"
  ) &
  side=$!
fi

slices() {
  local s=$ROOT/video-kernel-trace runs=()
  for level in L1 L3; do
    [ -f "$s/video-solo-$level-captions/result.json" ] && runs+=(--run "alone-$level=$s/video-solo-$level-captions")
    [ -f "$s/video-mix-$level-greedy/result.json" ] && runs+=(--run "greedy-$level=$s/video-mix-$level-greedy")
  done
  python3 -m benchmarks.perf.kernel_slices --node captions --slo 1 "${runs[@]}" \
    --json "$STATE/video-kernel-slices-h200.json" --md "$STATE/video-kernel-slices-h200.md" \
    > "$STATE/video-kernel-slices-h200.txt" 2>&1
  log "kernel slices exit $?"
  cat "$STATE/video-kernel-slices-h200.txt"
  # L1's traces themselves (a few MB of gzip CSV), to account again here if need be (not for git).
  for run in video-solo-L1-captions video-mix-L1-greedy; do
    for trace in "$s/$run"/artifacts/*/kernels.csv.gz; do
      [ -f "$trace" ] || continue
      node=$(basename "$(dirname "$trace")")
      mkdir -p "$STATE/traces/$run/$node"
      cp "$trace" "$STATE/traces/$run/$node/"
    done
  done
}

status=0
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
    log "$name ($left s left)"
    OUT=$OUT STUDY_CALL_S=$left STUDY_FROM=$from STUDY_SWEEP=studies/h200/$name.yml bash studies/h200/device.sh
    rc=$?
    log "$name: device.sh exit $rc"
    if [ "$rc" -ne 0 ]; then
      status=3
      break
    fi
    touch "$STATE/$name.done"
  fi
  if [ "$name" = video-kernel-trace ] && [ ! -f "$STATE/video-kernel-slices-h200.txt" ]; then
    slices
  fi
done

[ -n "$side" ] && wait "$side"
for f in kernels-h200-bshd-fp16.json kernels-h200-bshd-fp16.txt gpu-tests.txt video-kernel-slices-h200.json \
  video-kernel-slices-h200.txt video-kernel-slices-h200.md; do
  [ -f "$STATE/$f" ] && cp "$STATE/$f" "$OUT/"
done
[ -d "$STATE/traces" ] && cp -r "$STATE/traces" "$OUT/"
[ -f "$OUT/gpu-tests.txt" ] && tail -n 3 "$OUT/gpu-tests.txt"
log "done (exit $status; 0: the queue is complete)"
exit "$status"
