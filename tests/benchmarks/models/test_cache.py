"""The model cache: its folder, file and folder hashes cached by size and time, and atomic writes."""

from __future__ import annotations

import hashlib
import os

from benchmarks.models.cache import atomic_write, cache_dir, sha256_of


def test_the_cache_folder_follows_cb_cache_dir_then_xdg(tmp_path, monkeypatch):
    assert cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("CB_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "consumerbench"


def test_a_changed_file_is_hashed_again_not_read_from_the_cache(tmp_path):
    model = tmp_path / "model.bin"
    model.write_bytes(b"first")
    assert sha256_of(model) == hashlib.sha256(b"first").hexdigest()
    model.write_bytes(b"second, longer")
    assert sha256_of(model) == hashlib.sha256(b"second, longer").hexdigest()


def test_a_folder_hash_covers_the_names_and_contents_of_its_files(tmp_path):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "model.bin").write_bytes(b"weights")
    before = sha256_of(folder)
    (folder / "sub" / "model.bin").rename(folder / "sub" / "renamed.bin")
    renamed = sha256_of(folder)
    (folder / "sub" / "renamed.bin").write_bytes(b"other weights")
    assert len({before, renamed, sha256_of(folder)}) == 3


def test_atomic_write_leaves_no_temporary_file_and_a_read_only_cache_is_no_error(tmp_path):
    target = tmp_path / "cache" / "sha256" / "entry.json"
    atomic_write(target, b"{}")
    assert target.read_bytes() == b"{}" and os.listdir(target.parent) == ["entry.json"]
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    atomic_write(blocked / "entry.json", b"{}")  # mkdir fails: the value is only computed again
