#!/usr/bin/env bash
# Issue 21 on the H200: our attention kernel against PyTorch's SDPA backends at SD 3.5 medium's joint
# attention (batch 2 with guidance, 24 heads, 4,429 tokens, bf16), head dim 64 then 128. Run from the
# repository root on the GPU machine (python3 with torch and Triton, ncu; no pip needed):
#   bash studies/kernels/device.sh
# About 5 minutes; every step is bounded by `timeout`, so the call ends inside the device's 10.
# Writes under $OUT: kernels-h200.json (issue 21's acceptance document; commit it as
# docs/results/kernels-h200.json), kernels-h200-d128.json, each step's log, env.txt.
# If the autotuned step fails or times out, a default-config run without ncu writes the JSON instead.
set -uo pipefail
OUT=${OUT:-/tmp/kernels-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# Triton's compile cache outside $OUT (only 8 files come back): the ncu pass reuses the compilations.
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}
log() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*"; }

log "environment" | tee "$OUT/env.txt"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__,
    torch.cuda.get_device_name(), torch.cuda.get_device_capability())'
  command -v ncu && ncu --version | tail -1
} >>"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

profile() {  # NAME SECONDS ARGS...: one profile step, its log under $OUT
  local name=$1 seconds=$2
  shift 2
  log "$name: python3 -m cbkernels.profile $*"
  timeout -k 10 "$seconds" python3 -m cbkernels.profile "$@" --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  log "$name: exit $rc"
  return "$rc"
}

SHAPE64=2,24,4429,64
SHAPE128=2,24,4429,128
profile kernels-h200 200 --shape $SHAPE64 --dtype bf16 --autotune --tune-budget 90 --ncu --ncu-timeout 80 \
  || profile kernels-h200 70 --shape $SHAPE64 --dtype bf16 --no-ncu
left=$((330 - SECONDS))
if [ "$left" -gt 60 ]; then
  profile kernels-h200-d128 "$left" --shape $SHAPE128 --dtype bf16 --autotune --tune-budget $((left / 3)) \
    --ncu --ncu-timeout $((left / 4))
else
  log "kernels-h200-d128: skipped ($left s left of the 330 planned)"
fi
log "done"; ls -la "$OUT"
