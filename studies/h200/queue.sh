#!/usr/bin/env bash
# The GPU work still pending (studies/h200/README.md, "Next GPU sessions") as one queue: the same command
# every call, on one warm machine, until it exits 0 (3: work left, call again at once; the machine is
# given back 30 s after a call; 4: the rest is done but the traced sweeps were skipped, their tests
# failed; any other code: something failed, read the output before calling again):
#   run(kind="nvidia-h200", carry=[".device"], timeout_s=600, command="bash studies/h200/queue.sh")
# Each call:
#   - once, in the background while the first sweep's device.sh builds llama.cpp (device.sh holds its
#     sweep steps until this is done, so that nothing else runs on the GPU beside a measured run): the
#     GPU tests of kernel traces, the kernel profile in diffusers' (B, S, H, D) layout in fp16 (issue 21:
#     why cbkernels' 3 % does not reach the SD 3.5 step) and the GPU tests of the attention switch; each
#     one's exit code in results/h200-study/queue/NAME.rc (tried once: a failure is read, not retried;
#     a timeout, or a call that ends before it does, is retried);
#   - the sweeps of QUEUE in order, each through device.sh with the time this call has left (a sweep
#     whose device.sh exits 0 is complete: a marker in results/h200-study/queue/). The traced sweeps
#     (ACCOUNT) run only if the trace tests passed, never from a committed archive (it leaves the traces
#     out: their account needs every run's), and count as done once their account is committed
#     (docs/results/NAME-slices-*.json); once one is complete, the caption chunks' account of its runs
#     (benchmarks.perf.kernel_slices) is written on the machine;
#   - what comes back: the device returns at most 8 files, 2 folders deep, 16 MiB each. So $OUT holds
#     the sweeps' archives (h200-NAME-gpu.tar.gz, as device.sh writes them), queue-out.tar.gz (every
#     other output: logs, plans, the side job's results, the accounts) and, when it fits in 15 MiB,
#     traces.tar (the captions' traces and one other node's of each traced sweep's first two runs).
# Order: issue 19's kernel trace (~3 min; it traces the chat script on llama.cpp, and a traced llama.cpp
# process has crashed: leave it out with STUDY_QUEUE until that is understood, studies/h200/README.md),
# captions beside K image processes (~5 min) and beside K busy matmul processes (~3 min; both done on an
# H100, their accounts committed, so skipped), issue 21's sharing grid (~13 min; done on an H100, its
# archive committed, so skipped), issue 19's video sweep (credit's break level: ~2 min a step). A fresh
# machine first builds llama.cpp (~7 min).
set -uo pipefail
OUT=${OUT:-/tmp/h200-queue-out}
LIMIT=${LIMIT:-540}
ROOT=results/h200-study
STATE=$ROOT/queue
WORK=$STATE/out  # device.sh's outputs of this call, packed into $OUT at the end
QUEUE=(video-kernel-trace captions-crowd captions-busy kernels-sharing video-creation)
# STUDY_QUEUE="NAME ...": these sweeps only, in this order (a short device budget: captions-busy alone
# needs no llama.cpp, so no build); STUDY_SIDE="STEP ...": the side job's steps run in this call (default
# all three; trace-tests alone when no build runs beside it, since the measured runs wait for it).
SIDE=(trace-tests kernels-h200-bshd-fp16 gpu-tests)
for name in ${STUDY_QUEUE:-}; do
  [[ " ${QUEUE[*]} " == *" $name "* ]] || { echo "STUDY_QUEUE: no sweep '$name' (${QUEUE[*]})" >&2; exit 2; }
done
for step in ${STUDY_SIDE:-}; do
  [[ " ${SIDE[*]} " == *" $step "* ]] || { echo "STUDY_SIDE: no step '$step' (${SIDE[*]})" >&2; exit 2; }
done
# shellcheck disable=SC2206  # the lists split into their names
QUEUE=(${STUDY_QUEUE:-${QUEUE[*]}}) SIDE=(${STUDY_SIDE:-${SIDE[*]}})
# The sweeps none of whose applications runs on llama.cpp: device.sh skips its build for them.
declare -A NO_LLAMA=([captions-crowd]=1 [captions-busy]=1)
# The traced sweeps, and the runs each one's account compares (LABEL=BUNDLE).
declare -A ACCOUNT=(
  [video-kernel-trace]="alone-L1=video-solo-L1-captions greedy-L1=video-mix-L1-greedy"
  [captions-crowd]="K0=k0-mix-K-greedy K1=k1-mix-K-greedy K2=k2-mix-K-greedy K4=k4-mix-K-greedy"
  [captions-busy]="K8=b8-mix-K-greedy K16=b16-mix-K-greedy"
)
mkdir -p "$OUT" "$STATE"
rm -rf "$WORK" && mkdir -p "$WORK"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
log() { echo "[$(date +%H:%M:%S) +${SECONDS}s queue] $*" | tee -a "$WORK/queue.log"; }

# pack: $OUT gets the archives, queue-out.tar.gz and (if it fits) traces.tar; run on any exit.
pack() {
  if [ -n "$side" ] && kill -0 "$side" 2>/dev/null; then
    # Ending while the side job runs (a call that stops early): it is stopped, never left beside the
    # next call's runs; what it had not finished runs again then.
    pkill -TERM -P "$side" 2>/dev/null
    kill "$side" 2>/dev/null
    rm -f "$HOLD"
  fi
  mv "$WORK"/h200-*-gpu.tar.gz "$OUT/" 2>/dev/null
  local f
  for f in trace-tests.txt kernels-h200-bshd-fp16.json kernels-h200-bshd-fp16.txt gpu-tests.txt "$STATE"/*.rc \
    "$STATE"/*-slices.*; do
    f=$(basename "$f")
    [ -f "$STATE/$f" ] && cp "$STATE/$f" "$WORK/"
  done
  tar czf "$OUT/queue-out.tar.gz" -C "$WORK" .
  if [ -d "$STATE/traces" ]; then
    tar cf "$OUT/traces.tar" -C "$STATE" traces
    if [ "$(stat -c %s "$OUT/traces.tar")" -gt $((15 * 1024 * 1024)) ]; then
      rm -f "$OUT/traces.tar"
      echo "traces.tar over 15 MiB: left on the machine" >> "$WORK/queue.log"
    fi
  fi
}

# The GPU's time-slice setting between processes' contexts (nvidia-smi compute-policy), for the account
# of how the captions share the GPU under greedy.
{ nvidia-smi compute-policy -l; nvidia-smi -q -d COMPUTE; } > "$WORK/compute-policy.txt" 2>&1 || true

# attempt NAME SECONDS COMMAND...: run COMMAND once ever (its output in STATE/NAME.txt, its exit code in
# STATE/NAME.rc); a timeout or a stop is not recorded, so the next call tries again.
attempt() {
  local name=$1 budget=$2
  shift 2
  [ -f "$STATE/$name.rc" ] && return
  timeout -k 10 "$budget" "$@" > "$STATE/$name.txt" 2>&1
  local rc=$?
  case $rc in
    124 | 137 | 143) ;;  # timed out or stopped: tried again in the next call
    *) echo "$rc" > "$STATE/$name.rc" ;;
  esac
}

HOLD=$STATE/side.hold
rm -f "$HOLD"  # left by a call killed at its limit
side=
trap pack EXIT
# side_step NAME: one step of the side job.
side_step() {
  case $1 in
    trace-tests)
      attempt trace-tests 240 python3 -m pytest -q -p no:cacheprovider -m gpu \
        tests/benchmarks/monitor/test_kernels.py tests/benchmarks/runner/test_dag.py ;;
    kernels-h200-bshd-fp16)
      attempt kernels-h200-bshd-fp16 240 python3 -m cbkernels.profile --shape 2,24,4429,64 --dtype fp16 \
        --layout bshd --no-ncu --json "$STATE/kernels-h200-bshd-fp16.json" ;;
    gpu-tests)
      attempt gpu-tests 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/benchmarks/apps/test_attention.py ;;
  esac
}
missing=0
for step in "${SIDE[@]}"; do
  [ -f "$STATE/$step.rc" ] || missing=1
done
if [ "$missing" = 1 ]; then
  bash studies/h200/wheels.sh || { log "the carried wheels did not install"; exit 1; }
  touch "$HOLD"
  (
    trap 'rm -f "$HOLD"' EXIT
    for step in "${SIDE[@]}"; do
      side_step "$step"
    done
  ) &
  side=$!
fi

# slices SWEEP NAME LABEL=BUNDLE...: the captions' account of a traced sweep's runs into
# STATE/NAME.{txt,json,md} (NAME: SWEEP-slices once the sweep is complete; SWEEP-partial-slices, of the
# runs so far, when a call ends before it is, so that a machine taken back still returns an account),
# kept only when every run had its trace; the captions' traces and one other node's of the first two
# runs under STATE/traces/SWEEP.
slices() {
  local sweep=$1 name=$2 runs=() copy=() item
  shift 2
  for item in "$@"; do
    [ -f "$ROOT/$sweep/${item#*=}/result.json" ] || continue
    runs+=(--run "${item%%=*}=$ROOT/$sweep/${item#*=}")
    copy+=("${item#*=}")
  done
  [ "${#runs[@]}" -gt 0 ] || return
  # At most 5 minutes, and never past the call's end (the device kills a call at its limit, and then
  # nothing is packed): LIMIT leaves a minute of the device's 10.
  local budget=$((LIMIT + 30 - SECONDS))
  [ "$budget" -gt 300 ] && budget=300
  [ "$budget" -lt 10 ] && budget=10
  timeout -k 10 "$budget" python3 -m benchmarks.perf.kernel_slices --node captions --slo 1 "${runs[@]}" \
    --json "$STATE/slices.json.tmp" --md "$STATE/slices.md.tmp" > "$STATE/slices.txt.tmp" 2>&1
  local rc=$?
  log "$name: kernel slices exit $rc"
  cat "$STATE/slices.txt.tmp" | tee -a "$WORK/queue.log"
  if [ "$rc" -eq 0 ]; then
    rm -f "$STATE/$sweep-partial-slices".*
    for ext in json md txt; do
      mv "$STATE/slices.$ext.tmp" "$STATE/$name.$ext"
    done
  fi
  local run trace node others
  for run in "${copy[@]:0:2}"; do
    others=0
    for trace in "$ROOT/$sweep/$run"/artifacts/*/kernels.csv.gz; do
      [ -f "$trace" ] || continue
      node=$(basename "$(dirname "$trace")")
      if [ "$node" != captions ]; then
        [ "$others" -ge 1 ] && continue
        others=1
      fi
      mkdir -p "$STATE/traces/$sweep/$run-$node"
      cp "$trace" "$STATE/traces/$sweep/$run-$node/"
    done
  done
}

status=0 skipped=0
for name in "${QUEUE[@]}"; do
  traced=${ACCOUNT[$name]:+yes}
  llama=1
  [ -n "${NO_LLAMA[$name]:-}" ] && llama=0
  if [ -n "$traced" ] && ls docs/results/"$name"-slices-*.json > /dev/null 2>&1; then
    continue  # its account is committed
  fi
  if [ -z "${STUDY_QUEUE:-}" ] && [ -z "$traced" ] && [ -f "docs/results/h100-$name-gpu.tar.gz" ]; then
    # Done on an H100 and committed (kernels-sharing, session 35): the queue does not resume from it (its
    # state is another card's), so a call that names it in STUDY_QUEUE runs it whole again.
    continue
  fi
  if [ ! -f "$STATE/$name.done" ]; then
    left=$((LIMIT - SECONDS))
    if [ "$left" -lt 150 ]; then
      log "$name: pending ($left s left in this call): call again"
      status=3
      break
    fi
    from=docs/results/h200-$name-gpu.tar.gz
    [ -f "$from" ] && [ -z "$traced" ] || from=
    if [ -n "$traced" ]; then
      # The trace tests run while device.sh builds; wait for them before the first traced run.
      OUT=$WORK STUDY_CALL_S=$left STUDY_PREPARE_ONLY=1 STUDY_SWEEP=studies/h200/$name.yml STUDY_LLAMA=$llama \
        bash studies/h200/device.sh || { status=$?; log "$name: device.sh setup exit $status"; break; }
      while [ -e "$HOLD" ]; do sleep 2; done
      if [ "$(cat "$STATE/trace-tests.rc" 2>/dev/null)" != 0 ]; then
        log "$name: skipped, the kernel trace tests did not pass (trace-tests.txt)"
        skipped=4
        continue
      fi
      left=$((LIMIT - SECONDS))
      if [ "$left" -lt 150 ]; then
        log "$name: pending ($left s left in this call after the setup): call again"
        status=3
        break
      fi
    fi
    log "$name ($left s left)"
    OUT=$WORK STUDY_CALL_S=$left STUDY_FROM=$from STUDY_HOLD=$HOLD STUDY_SWEEP=studies/h200/$name.yml \
      STUDY_LLAMA=$llama bash studies/h200/device.sh
    rc=$?
    log "$name: device.sh exit $rc"
    if [ "$rc" -ne 0 ]; then
      status=$rc  # 3: steps pending, call again; another code: a failure to read first
      if [ "$rc" -eq 3 ] && [ -n "$traced" ]; then
        # shellcheck disable=SC2086  # the list splits into its LABEL=BUNDLE items
        slices "$name" "$name-partial-slices" ${ACCOUNT[$name]}
      fi
      break
    fi
    touch "$STATE/$name.done"
  fi
  if [ -n "$traced" ] && [ ! -f "$STATE/$name-slices.txt" ]; then
    # shellcheck disable=SC2086  # the list splits into its LABEL=BUNDLE items
    slices "$name" "$name-slices" ${ACCOUNT[$name]}
  fi
done

[ "$status" -eq 0 ] && status=$skipped
for f in "$STATE"/*.rc; do
  [ -f "$f" ] && log "$(basename "$f" .rc): exit $(cat "$f")"
done
log "done (exit $status; 0: the queue is complete, 3: call again, 4: all but the traced sweeps)"
exit "$status"
