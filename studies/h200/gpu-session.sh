#!/usr/bin/env bash
# Issue 22 item 6 and issue 23's H200 table, on the GPU machine, after device.sh's setup (the wheels,
# llama-cpp-python and llama-server built with CUDA in one compile, CB_LLAMA_SERVER, the random 3B
# GGUF). Run it through device.sh, from the repository root (carry: .device, made by prepare_device.sh):
#   STUDY_TASK=gpu-session bash studies/h200/device.sh
# Two measurements, each once and in this order, each bounded by `timeout`:
#   1. chatbot-overhead: python -m benchmarks.perf.chatbot_overhead --device cuda (harness against a
#      bare llama-cpp-python loop, TTFT's breakdown, the llama.cpp settings grid against the bandwidth
#      floor; ~1.5 min on the H200 with 2 rounds, OVERHEAD_ROUNDS=N for more) ->
#      $OUT/chatbot-overhead-cuda.json and chatbot-overhead.txt;
#   2. model-servers: python -m benchmarks.perf.model_servers --device cuda (one served model with 3
#      slots, the same under credit through its step gate, serial, three separate models; ~2.5 min)
#      -> $OUT/model-servers-h200.json and
#      model-servers.txt.
# A call runs the ones still missing that fit the time it has left (device.sh's CALL_S, 540 s, less
# what its setup took, passed as STUDY_ELAPSED_S), and copies every finished one's files to $OUT: the
# first call on a fresh machine (setup ~4.5 min) runs the first, the same command again on the warm
# machine the second. State: results/h200-study/gpu-session/ (a NAME.rc per finished measurement).
set -uo pipefail
OUT=${OUT:-/tmp/h200-study-out}
CALL_S=${CALL_S:-540}
ELAPSED=${STUDY_ELAPSED_S:-0}
STATE=results/h200-study/gpu-session
mkdir -p "$OUT" "$STATE"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
log() { echo "[$(date +%H:%M:%S) gpu-session] $*"; }
left() { echo $((CALL_S - ELAPSED - SECONDS)); }
pending=0

# measure NAME BUDGET_S FILES... -- COMMAND...: run COMMAND under `timeout BUDGET_S` unless it ran
# already or the call has less than BUDGET_S left; its output goes to STATE/NAME.txt, and its files
# (names in STATE) with the output to $OUT.
measure() {
  local name=$1 budget=$2
  shift 2
  local files=()
  while [ "$1" != -- ]; do files+=("$1"); shift; done
  shift
  if [ ! -f "$STATE/$name.rc" ]; then
    if [ "$(left)" -lt "$budget" ]; then
      log "$name: pending ($(left) s left of this call, it needs $budget s): call again"
      pending=1
      return
    fi
    log "$name: $*"
    timeout --kill-after=15 "$budget" "$@" > "$STATE/$name.txt" 2>&1
    echo $? > "$STATE/$name.rc"
    log "$name: exit $(cat "$STATE/$name.rc") (124: over its $budget s)"
    tail -n 40 "$STATE/$name.txt"
  fi
  cp "$STATE/$name.txt" "$OUT/"
  for f in "${files[@]}"; do
    [ -f "$STATE/$f" ] && cp "$STATE/$f" "$OUT/"
  done
}

measure chatbot-overhead 240 chatbot-overhead-cuda.json chatbot-overhead-cuda.md -- \
  python3 -m benchmarks.perf.chatbot_overhead --device cuda --rounds "${OVERHEAD_ROUNDS:-2}" --out "$STATE"
measure model-servers 240 model-servers-h200.json model-servers-h200.md -- \
  python3 -m benchmarks.perf.model_servers --device cuda --json "$STATE/model-servers-h200.json"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader >> "$OUT/gpu.txt"
if [ "$pending" = 1 ]; then
  log "done for this call; measurements pending: run the same command again (exit 3)"
  exit 3
fi
log "both measurements done: copy $OUT/*.json and *.txt into docs/results/"
