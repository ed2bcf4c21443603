"""Request records: one JSON Lines file per node, written as requests finish, read back for the result.

The runner keeps no record in memory during a run (a long run's memory stays flat) and a crashed run
leaves its records on disk (docs/result-format.md, ``records/node-<i>.jsonl``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

RECORDS_DIR = "records"  # under the bundle: one JSON Lines file of request records per node


def records_path(records_dir: Path, position: int) -> Path:
    """Return the records file of the node at ``position`` in the workflow (numbered, not named after
    the node: a node name never becomes a path here)."""
    return records_dir / f"node-{position}.jsonl"


def write_record(out: IO[str], record: Mapping[str, Any]) -> None:
    """Append one request record (times already relative to the run's start) as one line."""
    out.write(json.dumps(record) + "\n")


def read_records(path: Path | None) -> Iterator[dict[str, Any]]:
    """Yield the request records a node's JSON Lines file holds, in arrival order (none if no file)."""
    if path is None or not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def relative(record: Mapping[str, Any], t0: float) -> dict[str, Any]:
    """Return a record from an application process with its times in seconds since ``t0``."""
    out = dict(record)
    for key in ("arrival", "start", "end"):
        out[key] = float(out[key]) - t0
    return out
