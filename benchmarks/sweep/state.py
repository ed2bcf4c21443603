"""A sweep's resumable state: ``<state>/state.json`` with one entry per finished step, one result bundle
per step beside it, and the tar.gz archive of both (no images) that a long sweep is carried in."""

from __future__ import annotations

import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.monitor.kernels import TRACE_FILE
from benchmarks.results import load_bundle

STATE_FILE = "state.json"


class SweepError(RuntimeError):
    """The sweep cannot go on, or its state cannot be read (what and where in the message)."""


@dataclass(frozen=True)
class Step:
    """One run of a sweep: a workflow (or one of its nodes alone) at a level under a scheduler.

    ``kind`` is ``sweep`` (the searched workflow at a level, finding a break level), ``solo`` (one node
    alone) or ``mix`` (the whole workflow at a table level).
    """

    workflow: str
    kind: str
    level: str
    scheduler: str
    node: str | None = None
    repeat: int = 1  # the n-th run of the same step

    @property
    def key(self) -> str:
        """The step's name in ``state.json``, e.g. ``mix/sweep/L1/greedy`` or ``mix/mix/L1/credit/r2``."""
        parts = (self.workflow, self.kind, self.level, self.node or self.scheduler)
        return "/".join(parts) + (f"/r{self.repeat}" if self.repeat > 1 else "")

    @property
    def bundle(self) -> str:
        """The name of the step's bundle folder in the state folder."""
        return self.key.replace("/", "-")


class State:
    """``state.json``: every finished step's entry (bundle, status, wall time, error), kept between calls.

    Written to a temporary name and renamed after every step, so an interrupted call leaves the state
    of the steps before it.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.path = directory / STATE_FILE
        self.data: dict[str, Any] = {"steps": {}}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError) as exc:
                raise SweepError(f"{self.path}: not a sweep state: {exc}") from None
            if not isinstance(data, dict) or not isinstance(data.get("steps"), dict):
                raise SweepError(f"{self.path}: not a sweep state (no 'steps' mapping)")
            self.data = data

    @property
    def entries(self) -> dict[str, dict[str, Any]]:
        """Every recorded step's entry, by step key."""
        steps: dict[str, dict[str, Any]] = self.data["steps"]
        return steps

    def get(self, step: Step) -> dict[str, Any] | None:
        """Return a step's entry, or None when it has not run."""
        return self.entries.get(step.key)

    def put(self, step: Step, entry: dict[str, Any]) -> None:
        """Record a step's entry and write the state."""
        self.entries[step.key] = entry
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)

    def result(self, step: Step) -> dict[str, Any] | None:
        """Return the result document of a step that ran (as JSON data), or None (not run, or failed
        before running)."""
        entry = self.get(step)
        if not entry or not entry.get("bundle"):
            return None
        bundle = self.bundle_dir(entry)
        try:
            return load_bundle(bundle).model_dump(mode="json")
        except (OSError, ValueError) as exc:
            raise SweepError(f"{bundle}: the result of step {step.key} cannot be read: {exc}") from None

    def bundle_dir(self, entry: dict[str, Any]) -> Path:
        """Return the bundle folder an entry names; it must be a plain name inside the state folder."""
        name = str(entry["bundle"])
        if Path(name).name != name or name in ("", ".", ".."):
            raise SweepError(f"{self.path}: bundle '{name}' is not a folder name in the state folder")
        return self.dir / name


def write_archive(state_dir: Path, path: Path) -> None:
    """Write the state and the bundles, without images, as one tar.gz (top folder: the state folder's name).

    Written beside and renamed, so a reader never sees half an archive.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(
            state_dir,
            arcname=state_dir.name,
            filter=lambda i: None if i.name.endswith((".png", ".jpg", ".tmp", TRACE_FILE)) else i,
        )
    tmp.replace(path)


def extract_archive(path: Path, into: Path) -> Path:
    """Extract a sweep archive into ``into``; return the state folder (the one holding state.json).

    The archive is untrusted: tarfile's ``data`` filter refuses absolute paths, ``..``, links out of the
    folder and device files.
    """
    try:
        with tarfile.open(path, "r:gz") as tar:
            tar.extractall(into, filter="data")
    except (OSError, tarfile.TarError) as exc:
        raise SweepError(f"{path}: not a readable sweep archive: {exc}") from None
    found = sorted(p.parent for p in into.glob(f"*/{STATE_FILE}")) or (
        [into] if (into / STATE_FILE).is_file() else []
    )
    if len(found) != 1:
        raise SweepError(f"{path}: a sweep archive holds one folder with a {STATE_FILE}, found {len(found)}")
    return found[0]
