"""The inputs that ship with the project (prompts, questions, documents, audio) and user input files.

Every application reads its request inputs through here so that a bad file gives the same kind of
message everywhere: the file, the line when there is one, and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def input_path(value: str | None, default: str) -> Path:
    """Return the user's file (``~`` expanded) or the shipped default under ``benchmarks/data``."""
    return Path(value).expanduser() if value else DATA_DIR / default


def read_jsonl(path: Path, what: str) -> list[dict[str, Any]]:
    """Return the objects of a JSONL file; raise ValueError naming the file and line of a bad one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} file {path} cannot be read: {exc}") from None
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{what} file {path}, line {n}: not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise ValueError(
                f"{what} file {path}, line {n}: expected a JSON object, not {type(row).__name__}"
            )
        rows.append(row)
    if not rows:
        raise ValueError(f"{what} file {path} has no entries")
    return rows


def text_field(row: dict[str, Any], key: str, path: Path, n: int, what: str) -> str:
    """Return ``row[key]`` as a non-empty string; raise ValueError naming the file and entry otherwise."""
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} file {path}, entry {n}: '{key}' must be a non-empty string")
    return value
