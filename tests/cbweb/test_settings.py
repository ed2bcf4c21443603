"""cbweb.settings read from the environment as docs/security.md says, in a fresh interpreter each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def settings_of(**env: str) -> dict[str, list[str]]:
    """Return the file-policy folders a fresh ``cbweb.settings`` reads under ``env``."""
    keys = ("CB_DATA_DIRS", "CB_MODEL_DIRS")
    code = (
        "import json; from django.conf import settings; "
        f"print(json.dumps({{k: [str(p) for p in getattr(settings, k)] for k in {keys!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "cbweb.settings", **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_model_folders_are_a_search_path_of_commas_or_the_path_separator(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / n) for n in "abc")
    got = settings_of(CB_MODEL_DIRS=f"{a}{os.pathsep}{b}, {c}", CB_DATA_DIRS=f"{a},{b}")
    assert got["CB_MODEL_DIRS"] == [a, b, c]  # the engine's resolver reads the same value the same way
    assert got["CB_DATA_DIRS"] == [a, b]


def test_an_empty_model_search_path_means_the_default_folders() -> None:
    got = settings_of(CB_MODEL_DIRS=" , ")
    assert got["CB_MODEL_DIRS"] and all(Path(p).is_absolute() for p in got["CB_MODEL_DIRS"])
