"""Every model test writes into its own cache folder (assembled models, hash caches, random GGUFs), and
``hub_repo`` lays out a Hugging Face hub cache as huggingface_hub writes it."""

import hashlib
import os
import shutil
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))


def make_hub_repo(hub: Path, repo_id: str, files: dict[str, Path], revision: str = "a" * 40) -> Path:
    """Write ``repo_id`` into the hub cache ``hub`` as huggingface_hub lays it out (content-addressed
    ``blobs/``, ``snapshots/<revision>/`` of relative symlinks, ``refs/main``); return the snapshot.
    A source that is a folder is copied file by file (a diffusers folder)."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    for name, source in files.items():
        items = (
            [(name, source)]
            if source.is_file()
            else [(f"{name}/{p.relative_to(source)}", p) for p in sorted(source.rglob("*")) if p.is_file()]
        )
        for rel, item in items:
            digest = hashlib.sha256(item.read_bytes()).hexdigest()
            blob = repo / "blobs" / digest
            blob.parent.mkdir(parents=True, exist_ok=True)
            if not blob.exists():
                shutil.copyfile(item, blob)
            link = snapshot / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


@pytest.fixture
def hub_repo():
    return make_hub_repo
