"""The file access policy: which files a workflow may make the engine read, and where a run may write.

A workflow names files in its spec (a model, prompts, audio, a reference transcript, an arrival
trace, a documents folder, a dataset). Those fields are marked in the pydantic models with a
``FileField`` (``Annotated[str | None, DATA_FILE]``, defined with the spec model in
``benchmarks.spec.model``); ``file_fields`` walks a unit's models to find them, so a new
application type's file keys are covered by marking them, never by a second list.

A ``FilePolicy`` is either unrestricted (the local CLI: the user's own machine) or restricted to
allowed roots (the web server, the API and the workers: ``CB_DATA_DIRS`` / ``CB_MODEL_DIRS``). Under a
restricted policy a path is expanded (``~``), made absolute and resolved (symlinks followed, ``..``
collapsed) and must lie under one of the roots of its kind; the refusal names the field and the
unit and says nothing about the file (whether it exists, what it is). In both modes, Windows-style
paths and URLs are refused, and a file is read only when it is a regular file under its size cap
(``read_bytes``, ``read_text``, ``folder_files``), so ``/dev/zero``, FIFOs and ``/proc`` files are
never read. Catalogue model names and ``NAME@random`` are not paths; a model value that is a path
is checked as a path (a hub id is not downloaded under a restricted policy: it is a path like any
other, outside the model folders).

``bundle_path`` builds every path under a run's result folder from names (node names are
identifiers, see ``benchmarks.spec.model``) and refuses one that would leave it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from benchmarks.data import DATA_DIR
from benchmarks.models import Format, ModelSearch, ResolvedModel, hub_cache_dir, locate, model_dirs, resolve
from benchmarks.models.cache import cache_dir
from benchmarks.models.catalogue import PACKAGED, package_dir, random_twin
from benchmarks.spec.model import MODEL, FileField, FileKind

# A folder field (documents, audio) reads at most this many files; a model folder holds at most as
# many entries (a walk over a huge tree would stall the submit check).
MAX_FOLDER_FILES = 10_000

# Kernel and device file systems: never a data or model file, whatever the policy.
PSEUDO_FILESYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))

# A scheme of two or more letters (``file:``, ``http:``); one letter and a colon is a Windows drive.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
# A drive (C:), a UNC share (\\server, //server) or any backslash.
_WINDOWS = re.compile(r"^([A-Za-z]:|//)|\\")


class FileAccessError(ValueError):
    """A file a workflow names is refused or cannot be read; the message names the field and unit only."""


@dataclass(frozen=True)
class FileRef:
    """One file-naming value of a unit: where it is in the unit (YAML path), its value and its marker."""

    loc: tuple[str | int, ...]
    value: str
    field: FileField

    @property
    def key(self) -> str:
        """The field's name as the user wrote it (``arrival.trace``, ``audio``)."""
        return ".".join(str(p) for p in self.loc if isinstance(p, str))


def file_fields(unit: BaseModel) -> list[FileRef]:
    """Return every file-naming value set in a unit (its own fields, ``arrival``, ``options``).

    Fields are found by their ``FileField`` marker, walking nested models; a list value gives one
    ``FileRef`` per item. ``options`` keys are reported without the ``options`` prefix, as written.
    """
    found: list[FileRef] = []
    stack: list[tuple[BaseModel, tuple[str | int, ...]]] = [(unit, ())]
    while stack:
        model, loc = stack.pop()
        for name, info in type(model).model_fields.items():
            value = getattr(model, name)
            here = loc if name == "options" else (*loc, name)
            if isinstance(value, BaseModel):
                stack.append((value, here))
                continue
            marker = next((m for m in info.metadata if isinstance(m, FileField)), None)
            if marker is None or value is None:
                continue
            if isinstance(value, str):
                found.append(FileRef(here, value, marker))
            elif isinstance(value, list | tuple):
                found += [FileRef((*here, i), v, marker) for i, v in enumerate(value) if isinstance(v, str)]
    return sorted(found, key=lambda r: str(r.loc))


def where(unit: str, key: str) -> str:
    """Return how errors name a field of a unit: ``field 'prompts' of unit 'chat'``."""
    return f"field '{key}' of unit '{unit}'"


def is_model_name(value: str) -> bool:
    """Return whether a ``model:`` value is a catalogue name or ``NAME@random`` (not a path: a random
    twin is built from its name alone, whatever the name, and reads no file)."""
    value = value.strip()
    return value in PACKAGED or (value.endswith("@random") and random_twin(value) is not None)


def _real(value: str | Path) -> Path:
    return Path(os.path.realpath(Path(value).expanduser()))


@dataclass(frozen=True)
class FilePolicy:
    """What a run may read: anything (``data_roots``/``model_roots`` None) or files under the roots.

    Picklable: the runner hands it to each application process, whose driver reads through it.
    """

    data_roots: tuple[Path, ...] | None = None
    model_roots: tuple[Path, ...] | None = None

    @classmethod
    def restricted(cls, data_dirs: Iterable[str | Path], model_dirs: Iterable[str | Path]) -> FilePolicy:
        """Return a policy that allows only files under the given folders (resolved now)."""
        return cls(tuple(dict.fromkeys(map(_real, data_dirs))), tuple(dict.fromkeys(map(_real, model_dirs))))

    @property
    def is_restricted(self) -> bool:
        """Whether paths must lie under the allowed roots."""
        return self.data_roots is not None or self.model_roots is not None

    def _roots(self, kind: FileKind) -> tuple[Path, ...] | None:
        if not self.is_restricted:
            return None
        return (self.model_roots if kind == "model" else self.data_roots) or ()

    # -- the path check (submit time and run time) -------------------------------------------------

    def refusal(self, value: str, field: FileField) -> str | None:
        """Return why a value is refused (a phrase that says nothing about the file), or None.

        Looks only at the value and the resolved path, so the answer is the same for a file that
        exists and one that does not; a model value is first looked for by ``model_search`` (inside
        the allowed model folders on a server), so what it finds is what is checked.
        """
        text = value.strip()
        if not text:
            return "an empty path"
        if "\0" in text:
            return "a path with a NUL character"
        if _WINDOWS.search(text):
            return "a Windows-style path (C:\\... or \\\\server\\share); give a path on this machine"
        if _URL.match(text):
            return "a URL; give a path on this machine, not a file:// or other URL"
        if field.kind == "model" and is_model_name(text):
            return None
        # A model is checked where the search finds it (a folder of the model roots, the hub cache),
        # never only as written: a relative path or a hub id must not land outside the roots.
        real = _real(self.model_location(text) if field.kind == "model" else text)
        roots = self._roots(field.kind)
        if roots is not None and not any(real == root or real.is_relative_to(root) for root in roots):
            return f"path outside the allowed {field.kind} folders"
        if any(real == p or real.is_relative_to(p) for p in PSEUDO_FILESYSTEMS):
            # /proc files stat as regular files: refuse the pseudo file systems by where they are.
            return "a path under /proc, /sys or /dev, which holds no data files"
        return None

    def check(self, value: str, field: FileField, where: str) -> Path:
        """Return the resolved path of an allowed value; raise FileAccessError naming ``where`` otherwise."""
        problem = self.refusal(value, field)
        if problem is not None:
            raise FileAccessError(f"{problem}: {where}")
        return _real(value.strip())

    def unit_problems(self, unit: Any) -> list[tuple[tuple[str | int, ...], str]]:
        """Return (YAML path inside the unit, message) for each refused file field of a unit."""
        out = []
        for ref in file_fields(unit):
            problem = self.refusal(ref.value, ref.field)
            if problem is not None:
                out.append((ref.loc, f"{problem}: {where(unit.name, ref.key)}"))
        return out

    def workflow_problems(self, workflow: Any) -> list[tuple[tuple[str | int, ...], str]]:
        """Return (YAML path, message) for each refused file field of a workflow, in unit order."""
        return [
            ((name, *loc), message)
            for name, unit in workflow.applications.items()
            for loc, message in self.unit_problems(unit)
        ]

    def model_search(self) -> ModelSearch:
        """Return where a ``model:`` value is looked for under this policy: the environment's search on
        the CLI; on a server the model roots, and the hub cache only when it lies under one of them."""
        if not self.is_restricted:
            return ModelSearch.from_env()
        roots = self.model_roots or ()
        hub = _real(hub_cache_dir())
        inside = any(hub == r or hub.is_relative_to(r) for r in roots)
        return ModelSearch(roots, hub if inside else None, cwd=False)

    def model_location(self, value: str) -> str:
        """Return the path the model search finds for ``value``, or ``value`` itself when it finds none."""
        try:
            found = locate(value.strip(), self.model_search()).path
        except (OSError, ValueError):
            # A name the file system cannot even look up (too long, a NUL): checked as written.
            found = None
        return str(found) if found is not None else value.strip()

    # -- reading (run time) ------------------------------------------------------------------------

    def regular_file(self, value: str | Path, field: FileField, where: str) -> Path:
        """Return the resolved path of an allowed, existing regular file within the field's size cap.

        Raises FileAccessError naming ``where``: refused, missing, not a regular file, too large.
        """
        path = self.check(str(value), field, where)
        try:
            st = os.stat(path)
        except OSError:
            raise FileAccessError(f"{where}: no such file") from None
        _check_stat(st, field, where)
        return path

    def read_bytes(self, value: str | Path, field: FileField, where: str) -> bytes:
        """Return the content of an allowed regular file, reading at most its cap (FileAccessError)."""
        path = self.regular_file(value, field, where)
        try:
            # O_NONBLOCK: opening a FIFO swapped in since the check must not wait for a writer.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            raise FileAccessError(f"{where}: no such file or it cannot be opened") from None
        try:
            # What was opened is checked again (it may have been replaced since) before it is wrapped:
            # a folder opens but cannot be read, and the descriptor must not outlive the refusal.
            _check_stat(os.fstat(fd), field, where)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as fh:
            limit = field.max_bytes
            data = fh.read() if limit is None else fh.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise FileAccessError(f"{where}: the file is larger than {limit // (1024 * 1024)} MiB")
        return data

    def read_text(self, value: str | Path, field: FileField, where: str) -> str:
        """Return an allowed regular file as UTF-8 text (FileAccessError; never quotes the content)."""
        try:
            return self.read_bytes(value, field, where).decode("utf-8")
        except UnicodeDecodeError:
            raise FileAccessError(f"{where}: the file is not UTF-8 text") from None

    def folder_files(
        self, value: str | Path, field: FileField, where: str, suffixes: Sequence[str]
    ) -> list[Path]:
        """Return the files with ``suffixes`` of an allowed folder, each checked as ``regular_file``.

        A file that resolves outside the allowed roots (a symlink pointing out) is refused.
        """
        folder = self.check(str(value), field, where)
        if not field.folder:
            raise FileAccessError(f"{where}: this field names a file, not a folder")
        if not folder.is_dir():
            raise FileAccessError(f"{where}: no such folder")
        out = []
        for n, entry in enumerate(sorted(folder.iterdir())):
            if n >= MAX_FOLDER_FILES:
                raise FileAccessError(f"{where}: the folder holds more than {MAX_FOLDER_FILES} entries")
            if entry.suffix.lower() in suffixes:
                out.append(self.regular_file(entry, field, f"{where} ({entry.name})"))
        return out

    def check_unit_model(self, unit: Any) -> None:
        """Check a unit's ``model:`` as ``model_path`` does when it is set (FileAccessError)."""
        if unit.model:
            self.model_path(unit.model, where(unit.name, "model"))

    def resolve_model(self, unit: Any, formats: tuple[Format, ...], app: str) -> ResolvedModel:
        """Return a unit's model resolved through this policy's search, after ``check_unit_model``
        (FileAccessError; ModelError when it is not found or not of the formats)."""
        self.check_unit_model(unit)
        return resolve(unit.model or "", formats, app, self.model_search())

    def model_path(self, value: str, where: str) -> None:
        """Check a ``model:`` value that is a path: allowed, and under a restricted policy every entry
        of a model folder resolves inside the model folders and is a regular file or a folder.

        Catalogue names and ``NAME@random`` pass. Raises FileAccessError naming ``where``.
        """
        value = value if is_model_name(value) else self.model_location(value)
        path = self.check(value, MODEL, where)
        if is_model_name(value) or not self.is_restricted or not path.is_dir():
            if path.exists() and not (path.is_dir() or stat.S_ISREG(os.stat(path).st_mode)):
                raise FileAccessError(f"{where}: not a regular file or a model folder")
            return
        for n, entry in enumerate(_walk(path)):
            if n >= MAX_FOLDER_FILES:
                raise FileAccessError(f"{where}: the model folder holds more than {MAX_FOLDER_FILES} entries")
            self.check(str(entry), MODEL, f"{where} ({entry.relative_to(path)})")
            mode = os.stat(entry).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise FileAccessError(f"{where} ({entry.relative_to(path)}): not a regular file")


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, names in os.walk(root, followlinks=False):
        for name in (*dirs, *names):
            yield Path(folder) / name


def _check_stat(st: os.stat_result, field: FileField, where: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise FileAccessError(f"{where}: not a regular file")
    if field.max_bytes is not None and st.st_size > field.max_bytes:
        raise FileAccessError(f"{where}: the file is larger than {field.max_bytes // (1024 * 1024)} MiB")


UNRESTRICTED = FilePolicy()


def default_data_dirs() -> list[Path]:
    """Return the data folders a restricted policy allows by default: the packaged data folder."""
    return [DATA_DIR]


def default_model_dirs() -> list[Path]:
    """Return the model folders allowed by default: the packaged models' folders and the model cache."""
    dirs = [d for d in (package_dir(m.module) for m in PACKAGED.values()) if d is not None]
    return [*dirs, cache_dir()]


def policy_from_env(environ: Any = None) -> FilePolicy:
    """Return the restricted policy of ``CB_DATA_DIRS`` (comma-separated folders) / ``CB_MODEL_DIRS``
    (the model search path: ``os.pathsep`` or commas; unset: the defaults
    above), as ``consumerbench run --restrict-files`` applies it."""
    env = os.environ if environ is None else environ
    data = [p.strip() for p in env.get("CB_DATA_DIRS", "").split(",") if p.strip()]
    models = model_dirs(env)
    return FilePolicy.restricted(data or default_data_dirs(), models or default_model_dirs())


# --------------------------------------------------------------------------------------------------
# Writing: paths under a run's result folder
# --------------------------------------------------------------------------------------------------


def bundle_path(root: str | Path, *parts: str) -> Path:
    """Return ``root/part/...``, refusing (ValueError) a part that is empty, absolute, ``.``/``..``,
    holds a separator, or a result that resolves outside ``root`` (a symlink in the way)."""
    base = Path(root)
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\\" in part or "\0" in part:
            raise ValueError(f"'{part}' cannot be a file name in a run's result folder")
    path = base.joinpath(*parts)
    real_root = _real(base)
    if not _real(path).is_relative_to(real_root):
        raise ValueError(f"'{'/'.join(parts)}' would be written outside the run's result folder")
    return path
