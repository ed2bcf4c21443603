#!/usr/bin/env bash
# Installs the carried wheels (.device/wheels, made here by prepare_device.sh) that the GPU machine's
# Python lacks, --no-deps so that the image's torch and numpy stay; device.sh's step 1, and queue.sh's
# before its GPU tests.
set -uo pipefail
missing=$(python3 - <<'PY'
import importlib.metadata, pathlib, re
for wheel in sorted(pathlib.Path(".device/wheels").glob("*.whl")):
    dist = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        print(wheel)
PY
)
if [ -n "$missing" ]; then
  python3 -m pip install -q --no-index --no-deps $missing || exit 1
fi
