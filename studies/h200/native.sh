#!/usr/bin/env bash
# Issue 22 on the GPU machine, one device call from the repository root (carry: .device, made here by
# prepare_device.sh):
#   bash studies/h200/native.sh
# 1. the original-format workflows of studies/h200/native/ as written, with --weights random: the
#    sweep native-configs.yml through device.sh (wheels, llama-cpp-python's CUDA build on a fresh
#    machine, the random GGUF files, then the steps in the time left; call again while it exits 3);
#    its archive is $OUT/h200-native-configs-gpu.tar.gz;
# 2. `consumerbench doctor` as the engine alone runs it there (no web stack, no CTranslate2, no DCGM):
#    $OUT/doctor.txt.
set -uo pipefail
OUT=${OUT:-/tmp/h200-study-out}
export OUT
mkdir -p "$OUT"
STUDY_SWEEP=studies/h200/native-configs.yml STUDY_CALL_S=${STUDY_CALL_S:-530} bash studies/h200/device.sh
status=$?
PYTHONPATH=$PWD python3 -m benchmarks.cli doctor > "$OUT/doctor.txt" 2>&1
echo "doctor: exit $? ($OUT/doctor.txt)"
cat "$OUT/doctor.txt"
exit "$status"
