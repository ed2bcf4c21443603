"""Every model test writes into its own cache folder (assembled models, hash caches, random GGUFs)."""

import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CB_CACHE_DIR", str(tmp_path / "cache"))
