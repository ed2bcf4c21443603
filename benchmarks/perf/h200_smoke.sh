#!/usr/bin/env bash
# One device session on the lent H200: the monitor's own cost with the GPU sources on, then
# examples/gpu-contention.yml under each scheduler. Writes tables and result.json files under $OUT.
# Run from the repository root:  bash benchmarks/perf/h200_smoke.sh   (carry .whl: pydantic wheels)
set -u
OUT=${OUT:-/tmp/h200-smoke}
mkdir -p "$OUT"
python3 -c "import pydantic, yaml, psutil" 2>/dev/null || pip install -q --no-index --no-deps .whl/*.whl
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
python3 -m benchmarks.perf.monitor_overhead --seconds 5 > "$OUT/monitor_overhead.txt" 2>&1
for s in greedy credit partition; do
  timeout 150 python3 -m benchmarks.cli run examples/gpu-contention.yml --scheduler "$s" \
    --out "/tmp/smoke-$s" > "$OUT/$s.txt" 2>&1
  echo "exit $?" >> "$OUT/$s.txt"
  cp "/tmp/smoke-$s/result.json" "$OUT/$s.json" 2>/dev/null
done
tail -n 12 "$OUT"/*.txt
