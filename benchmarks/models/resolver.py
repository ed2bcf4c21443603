"""Resolving a unit's ``model:`` value to what it points to on this machine, and recording what was loaded.

A ``model:`` value is, in the order tried: ``NAME@random`` (a random architecture, or any model name whose
architecture ``catalogue.random_twin`` recognises), a catalogue name (``benchmarks.models.catalogue``),
a local file or folder (absolute or relative to the working folder), a path relative to a folder of
the model search path (``CB_MODEL_DIRS``), or a hub id (``org/name``, or ``org/name/FILE`` for one file
of the repository) found in the local Hugging Face cache. Nothing is ever downloaded: a name found
nowhere raises ``ModelError`` listing exactly the places searched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.models.cache import sha256_of
from benchmarks.models.catalogue import (
    PACKAGED,
    Format,
    ModelError,
    PackagedModel,
    RandomModel,
    Source,
    catalogue_names,
    package_dir,
    random_twin,
)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(/[\w./-]+)?$")


def model_dirs(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Return the folders of ``CB_MODEL_DIRS`` (separated by ``os.pathsep`` or commas), in order."""
    raw = (os.environ if environ is None else environ).get("CB_MODEL_DIRS", "")
    items = [p.strip() for p in re.split(f"[,{re.escape(os.pathsep)}]", raw) if p.strip()]
    return tuple(Path(p).expanduser() for p in items)


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the Hugging Face hub cache folder as huggingface_hub finds it: ``HF_HUB_CACHE``, else
    ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub`` (``~/.cache`` when unset)."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


@dataclass(frozen=True)
class ModelSearch:
    """Where a ``model:`` value that is not a catalogue name is looked for: the working folder (relative
    paths as given; ``cwd`` False: not searched, as on a server), ``dirs`` in order, then the hub cache
    (None: not searched)."""

    dirs: tuple[Path, ...] = ()
    hub_cache: Path | None = None
    cwd: bool = True

    @classmethod
    def from_env(cls) -> ModelSearch:
        """Return the search of this process's environment (``CB_MODEL_DIRS``, ``HF_HOME``...)."""
        return cls(model_dirs(), hub_cache_dir())


class Location(NamedTuple):
    """Where ``locate`` found a model: the path (None: nowhere), the places searched in order as words
    for an error, and the hub id when it was found in the Hugging Face cache."""

    path: Path | None
    tried: list[str]
    hub_id: str | None = None


def locate(model: str, search: ModelSearch | None = None) -> Location:
    """Return where ``model`` (a path or a hub id) is on this machine, and every place looked at."""
    search = ModelSearch.from_env() if search is None else search
    tried: list[str] = []
    path = Path(model).expanduser()
    if path.is_absolute() or search.cwd:
        tried.append(str(path) if path.is_absolute() else f"./{model} (working folder {Path.cwd()})")
        if path.exists():
            return Location(path, tried)
    if not path.is_absolute():
        for folder in search.dirs:
            candidate = folder / model
            tried.append(f"{candidate} (CB_MODEL_DIRS)")
            if candidate.exists():
                return Location(candidate, tried)
    if search.hub_cache is not None and _HUB_ID.match(model) and ".." not in model.split("/"):
        org, name, *rest = model.split("/")
        tried.append(f"{search.hub_cache}/models--{org}--{name} (Hugging Face cache)")
        snapshot = _hub_snapshot(f"{org}/{name}", search.hub_cache)
        if snapshot is not None:
            found = snapshot.joinpath(*rest)
            if found.exists():
                return Location(found, tried, f"{org}/{name}")
    return Location(None, tried)


def _hub_snapshot(repo_id: str, hub_cache: Path) -> Path | None:
    """Return the snapshot folder of a model repository in the hub cache (``refs/main`` honoured), with
    huggingface_hub's own cache lookup and ``local_files_only`` (never a download); None when absent."""
    if not (hub_cache / f"models--{repo_id.replace('/', '--')}").is_dir():
        return None
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return Path(snapshot_download(repo_id, cache_dir=hub_cache, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


@dataclass(frozen=True)
class ResolvedModel:
    """What a ``model:`` value points to on this machine."""

    requested: str
    source: Source
    format: Format
    path: Path | None = None
    random: RandomModel | None = None
    hub_id: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """Return what the result bundle records: the file's name and sha256, ``random`` and config (and
        ``random_for``, the name a random twin stands in for), or the hub id. Never a folder of this
        machine (results are shared; docs/result-format.md)."""
        out: dict[str, Any] = {"model": self.requested, "source": self.source, "format": self.format}
        if self.random is not None:
            out.update(weights="random", architecture=self.random.name, config=self.random.config)
            stands_for = self.requested.removesuffix("@random")
            if stands_for != self.random.name:
                out.update(random_for=stands_for)
        elif self.path is not None:
            out.update(file=self.path.name, sha256=sha256_of(self.path))
        if self.hub_id is not None:
            out.update(hub_id=self.hub_id)
        out.update(self.info)
        return out


def resolve(
    model: str, formats: tuple[Format, ...], app: str, search: ModelSearch | None = None
) -> ResolvedModel:
    """Return what ``model`` points to here, for an application that loads the given formats.

    ``search`` says where paths and hub ids are looked for (default: this process's environment).
    Raises ModelError naming the model and how to install it or point to it, or the places searched.
    """
    model = model.strip()
    accepted = " or ".join(_FORMAT_WORDS[f] for f in formats)
    if model.endswith("@random"):
        arch = model[: -len("@random")]
        random = random_twin(arch)
        if random is None or random.format not in formats:
            known = ", ".join(n for n in catalogue_names(formats) if n.endswith("@random")) or "none"
            if random is None:
                raise ModelError(
                    f"{app} has no random architecture '{arch}' (model '{model}'), and the name tells no "
                    f"architecture it knows; known: {known}"
                )
            raise ModelError(
                f"model '{model}' builds {_FORMAT_WORDS[random.format]}, but {app} loads {accepted} here; "
                f"random models it loads: {known}"
            )
        return ResolvedModel(model, "random", random.format, random=random)
    if model in PACKAGED:
        entry = PACKAGED[model]
        if entry.format not in formats:
            raise ModelError(f"model '{model}' is {_FORMAT_WORDS[entry.format]}, but {app} loads {accepted}")
        return _resolve_packaged(entry)
    path, tried, hub_id = locate(model, search)
    if path is None:
        names = ", ".join(catalogue_names(formats))
        raise ModelError(
            f"model '{model}' is not a catalogue name ({names}) and was not found; looked for "
            f"{'; '.join(tried)}; point model: to {accepted}, or run with --weights random"
        )
    resolved = _resolve_path(model, path, formats, app, accepted)
    if hub_id is not None:
        return ResolvedModel(model, "hub", resolved.format, path=resolved.path, hub_id=hub_id)
    return resolved


def describe(model: str, search: ModelSearch | None = None) -> dict[str, Any]:
    """Return what ``model`` is on this machine, for ``consumerbench models``: ``found`` (``catalogue``,
    ``random``, ``path``, ``hub`` or None), ``path`` and ``hub_id`` when found, ``tried`` (the places
    searched) when not, and ``twin``: the random twin ``--weights random`` runs (None when the name
    tells no architecture), with its parameters and the memory its weights take on the CPU."""
    model = model.strip()
    out: dict[str, Any] = {"model": model, "found": None}
    if model.endswith("@random"):
        out["found"] = "random" if random_twin(model) is not None else None
    elif model in PACKAGED:
        entry = PACKAGED[model]
        root = package_dir(entry.module)
        out.update(found="catalogue" if root is not None else None, package=entry.package)
        if root is None:
            out["tried"] = [f"the package {entry.package} (not installed: {entry.install_hint})"]
    else:
        try:
            path, tried, hub_id = locate(model, search)
        except (OSError, ValueError) as exc:
            path, tried, hub_id = None, [f"nowhere: the name cannot be a path here ({exc})"], None
        if path is None:
            out["tried"] = tried
        else:
            out.update(found="hub" if hub_id else "path", path=str(path), hub_id=hub_id)
    twin = random_twin(model)
    out["twin"] = None
    if twin is not None:
        out["twin"] = {
            "model": f"{twin.name}@random",
            "description": twin.description,
            "params_b": twin.params_b,
            "cpu_memory_gb": round(twin.memory_bytes("cpu") / 1e9, 1),
        }
    return out


_FORMAT_WORDS: dict[str, str] = {
    "gguf": "a GGUF file",
    "ctranslate2": "a CTranslate2 model folder (model.bin, config.json)",
    "diffusers": "a diffusers folder (model_index.json) or NAME@random",
    "transformers": "a transformers model folder (config.json), a hub id or NAME@random",
}
_FILE_SUFFIXES = (".gguf", ".bin", ".safetensors", ".pt", ".ckpt", ".onnx")


def _resolve_packaged(entry: PackagedModel) -> ResolvedModel:
    root = package_dir(entry.module)
    if root is None:
        raise ModelError(
            f"model '{entry.name}' ({entry.description}) is not installed: {entry.install_hint}, "
            f"or set model: to a local file or folder"
        )
    path = root / entry.relpath
    if entry.assemble is not None:
        path = entry.assemble(root)
    if not path.exists():
        raise ModelError(
            f"model '{entry.name}': the package is installed but {path} is missing (damaged install); "
            f"reinstall it: {entry.install_hint} --force-reinstall"
        )
    return ResolvedModel(entry.name, "catalogue", entry.format, path=path, info={"package": entry.package})


def _resolve_path(
    model: str, path: Path, formats: tuple[Format, ...], app: str, accepted: str
) -> ResolvedModel:
    if "gguf" in formats and path.is_dir():
        # A folder of GGUF files (a hub repository, a model's folder): the one file in it, or name it.
        ggufs = sorted(p for p in path.glob("*.gguf") if p.is_file())
        if len(ggufs) == 1:
            path = ggufs[0]
        elif len(ggufs) > 1:
            raise ModelError(
                f"model '{model}' is a folder of {len(ggufs)} GGUF files; name one: "
                + ", ".join(f"{model.rstrip('/')}/{p.name}" for p in ggufs)
            )
    for fmt in formats:
        if _looks_like(fmt, path):
            # Absolute but not resolved: a hub snapshot's file is a link to a blob named by its hash,
            # and the record names the file as the repository does.
            return ResolvedModel(model, "path", fmt, path=Path(os.path.abspath(path)))
    raise ModelError(f"model '{model}' exists but is not {accepted}, which {app} needs")


def _looks_like(fmt: Format, path: Path) -> bool:
    if fmt == "gguf":
        if not path.is_file():
            return False
        with path.open("rb") as fh:
            return fh.read(4) == b"GGUF"
    if fmt == "ctranslate2":
        return path.is_dir() and (path / "model.bin").is_file() and (path / "config.json").is_file()
    if fmt == "diffusers":
        return path.is_dir() and (path / "model_index.json").is_file()
    return path.is_dir() and (path / "config.json").is_file()


def check_model(
    model: str | None,
    formats: tuple[Format, ...],
    app: str,
    device: str,
    search: ModelSearch | None = None,
    available_bytes: int | None = None,
) -> list[str]:
    """Return the problems with a unit's model on this machine, as sentences (empty when it resolves).

    A random model on the CPU must fit the memory available (``available_bytes``, default: what psutil
    reports now): its weights at the CPU's precision (``RandomModel.memory_bytes``).
    """
    if not model:
        return [f"{app} needs 'model'; known: {', '.join(catalogue_names(formats))}"]
    try:
        resolved = resolve(model, formats, app, search)
    except ModelError as exc:
        return [str(exc)]
    except OSError as exc:
        return [f"model '{model}' cannot be read: {exc}"]
    random = resolved.random
    if random is not None and device == "cpu":
        if available_bytes is None:
            import psutil

            available_bytes = int(psutil.virtual_memory().available)
        needed = random.memory_bytes("cpu")
        if needed > available_bytes:
            return [
                f"model '{model}' ({random.name} shapes, {random.params_b:g} B parameters) needs about "
                f"{needed / 1e9:.1f} GB of memory on the CPU, and this machine has "
                f"{available_bytes / 1e9:.1f} GB available; use device: gpu or a smaller model"
            ]
    return []
