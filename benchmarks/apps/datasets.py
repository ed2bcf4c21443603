"""The inputs that ship with the project (prompts, questions, documents, audio) and user input files.

Every application reads its request inputs through here, and a user's file through the run's file
access policy (``benchmarks.files``), so that a bad file gives the same kind of message everywhere:
the field and the unit, the entry or line when there is one, and what is wrong, never the content.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.data import DATA_DIR
from benchmarks.files import UNRESTRICTED, FileAccessError, FilePolicy, where
from benchmarks.spec.model import DATA_FILE, FileField

if TYPE_CHECKING:
    from benchmarks.spec.model import Application


@dataclass(frozen=True)
class Input:
    """A unit's input: the spec key that named it (None: the shipped default) and the value or path."""

    unit: str
    key: str | None
    value: str | Path | list[str]

    @property
    def where(self) -> str:
        """How errors name it: the field and the unit, or the shipped file's name."""
        return where(self.unit, self.key) if self.key else f"the shipped {self.name}"

    @property
    def name(self) -> str:
        """The file name results record (never a folder of this machine)."""
        values = self.value if isinstance(self.value, list) else [self.value]
        return ", ".join(Path(v).name for v in values)

    def policy(self, files: FilePolicy) -> FilePolicy:
        """The shipped inputs are the engine's own; what the spec names is read through ``files``."""
        return files if self.key else UNRESTRICTED

    def read_text(self, files: FilePolicy, field: FileField = DATA_FILE) -> str:
        """Return the input file as UTF-8 text (FileAccessError naming the field and unit)."""
        assert not isinstance(self.value, list)
        return self.policy(files).read_text(self.value, field, self.where)


def unit_input(unit: Application, keys: tuple[str, ...], default: str) -> Input:
    """Return the unit's input: the first of ``keys`` set in its options (or ``dataset`` on the unit),
    else the shipped file ``default`` under ``benchmarks/data``."""
    opts: Any = unit.options
    for key in keys:
        value = getattr(opts, key, None) if key != "dataset" else unit.dataset
        if value is not None:
            return Input(unit.name, key, value)
    return Input(unit.name, None, DATA_DIR / default)


def prompts_input(unit: Application, default: str, key: str = "prompts") -> Input:
    """Return the unit's request inputs (prompts, questions): its ``key`` option, else ``dataset:``,
    else the shipped file ``default``."""
    return unit_input(unit, (key, "dataset"), default)


def read_jsonl(source: Input, files: FilePolicy) -> list[dict[str, Any]]:
    """Return the objects of a JSONL input; raise ValueError naming the field and line of a bad one."""
    text = source.read_text(files)
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            # The decoder's message gives a position, never the text.
            raise FileAccessError(f"{source.where}, line {n}: not valid JSON ({exc.args[0]})") from None
        if not isinstance(row, dict):
            raise FileAccessError(
                f"{source.where}, line {n}: expected a JSON object, not {type(row).__name__}"
            )
        rows.append(row)
    if not rows:
        raise FileAccessError(f"{source.where} has no entries")
    return rows


def text_field(row: dict[str, Any], key: str, source: Input, n: int) -> str:
    """Return ``row[key]`` as a non-empty string; raise ValueError naming the input and entry otherwise."""
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise FileAccessError(f"{source.where}, entry {n}: '{key}' must be a non-empty string")
    return value
