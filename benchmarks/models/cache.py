"""The model cache: where assembled and random models are written, and the cached sha256 of model files.

Several processes of one run (concurrent sessions, the monitor, the web check) touch the cache at the
same time: files appear under their final name only when complete (``atomic_write``), and a file that
takes long to write is written by one process while the others wait (``file_lock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

HASH_CHUNK = 1 << 20


def cache_dir() -> Path:
    """Return the folder for assembled models and hash caches (``CB_CACHE_DIR`` or ~/.cache/consumerbench)."""
    root = os.environ.get("CB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "consumerbench"
    )
    return Path(root)


# The hash is cached per file (path, size, mtime): a 150 MB model would otherwise add half a second
# to every load.
def sha256_of(path: Path) -> str:
    """Return the sha256 of a file, or of a folder (over its files' relative paths and hashes)."""
    if path.is_dir():
        digest = hashlib.sha256()
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{item.relative_to(path).as_posix()}\0{_file_sha256(item)}\n".encode())
        return digest.hexdigest()
    return _file_sha256(path)


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    key = hashlib.sha1(str(path.resolve()).encode()).hexdigest()
    entry = cache_dir() / "sha256" / f"{key}.json"
    stamp = {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        cached = json.loads(entry.read_text())
        if {k: cached.get(k) for k in stamp} == stamp:
            return str(cached["sha256"])
    except (OSError, ValueError, KeyError):
        pass
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(HASH_CHUNK):
            digest.update(block)
    value = digest.hexdigest()
    atomic_write(entry, json.dumps({**stamp, "sha256": value}).encode())
    return value


def atomic_write(path: Path, data: bytes) -> None:
    """Write a file under a temporary name and rename it, so concurrent processes never see half of it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        # A read-only cache only costs time (the hash is computed again next load).
        return


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created when missing) for the ``with`` block."""
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
