"""Resolving a unit's ``model:`` value to what it points to on this machine, and recording what was loaded.

A ``model:`` value is a catalogue name (``benchmarks.models.catalogue``), ``NAME@random``, a local path
(a GGUF file, a CTranslate2 folder, a diffusers folder, a transformers folder) or a hub id
(``org/name``) that the library downloads when the machine is online.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.models.cache import sha256_of
from benchmarks.models.catalogue import (
    PACKAGED,
    RANDOM,
    Format,
    ModelError,
    PackagedModel,
    RandomModel,
    Source,
    catalogue_names,
    package_dir,
)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


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
        """Return what the result bundle records: the file's name and sha256, ``random`` and config, or
        the hub id. Never a folder of this machine (results are shared; docs/result-format.md)."""
        out: dict[str, Any] = {"model": self.requested, "source": self.source, "format": self.format}
        if self.random is not None:
            out.update(weights="random", architecture=self.random.name, config=self.random.config)
        elif self.path is not None:
            out.update(file=self.path.name, sha256=sha256_of(self.path))
        elif self.hub_id is not None:
            out.update(hub_id=self.hub_id)
        out.update(self.info)
        return out


def resolve(model: str, formats: tuple[Format, ...], app: str) -> ResolvedModel:
    """Return what ``model`` points to here, for an application that loads the given formats.

    Raises ModelError naming the model and how to install it or point to it.
    """
    model = model.strip()
    accepted = " or ".join(_FORMAT_WORDS[f] for f in formats)
    if model.endswith("@random"):
        arch = model[: -len("@random")]
        random = RANDOM.get(arch)
        if random is None or random.format not in formats:
            known = ", ".join(n for n in catalogue_names(formats) if n.endswith("@random")) or "none"
            if random is None:
                raise ModelError(
                    f"{app} has no random architecture '{arch}' (model '{model}'); known: {known}"
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
    path = Path(model).expanduser()
    if path.exists():
        return _resolve_path(model, path, formats, app, accepted)
    if (
        _HUB_ID.match(model)
        and not model.startswith((".", "~"))
        and path.suffix.lower() not in _FILE_SUFFIXES
    ):
        return ResolvedModel(
            model, "hub", formats[0] if formats[0] != "gguf" else "transformers", hub_id=model
        )
    names = ", ".join(catalogue_names(formats))
    raise ModelError(
        f"model '{model}' is not a catalogue name ({names}) and no such file or folder exists here; "
        f"point model: to {accepted}"
    )


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
    for fmt in formats:
        if _looks_like(fmt, path):
            return ResolvedModel(model, "path", fmt, path=path.resolve())
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


def check_model(model: str | None, formats: tuple[Format, ...], app: str, device: str) -> list[str]:
    """Return the problems with a unit's model on this machine, as sentences (empty when it resolves)."""
    if not model:
        return [f"{app} needs 'model'; known: {', '.join(catalogue_names(formats))}"]
    try:
        resolved = resolve(model, formats, app)
    except ModelError as exc:
        return [str(exc)]
    except OSError as exc:
        return [f"model '{model}' cannot be read: {exc}"]
    random = resolved.random
    if random is not None and random.gpu_only and device == "cpu":
        tiny = [f"{m.name}@random" for m in RANDOM.values() if m.format == random.format and not m.gpu_only]
        return [
            f"model '{model}' is full size and far too slow on a CPU; use device: gpu, or {' or '.join(tiny)}"
        ]
    return []
